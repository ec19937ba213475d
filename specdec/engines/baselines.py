"""vLLM's own drafting functions as `Proposer`s, so the replay simulator scores the built-in
methods with the exact code vLLM runs (imported from the installed vLLM, not copied)."""

from __future__ import annotations

import dataclasses

import numpy as np


@dataclasses.dataclass
class VllmNgramProposer:
    """vLLM's `ngram` method: longest match in [n_min, n_max], earliest occurrence, K tokens.

    vLLM's defaults when no lookup sizes are given are n_min = n_max = 5.
    """

    n_min: int = 5
    n_max: int = 5
    max_model_len: int = 1 << 30

    def __post_init__(self) -> None:
        from vllm.v1.spec_decode.ngram_proposer import _find_longest_matched_ngram_and_propose_tokens

        self._find = _find_longest_matched_ngram_and_propose_tokens

    def propose(self, req_id: str, tokens: np.ndarray, k: int) -> np.ndarray:
        if k <= 0:
            return tokens[:0]
        return self._find(tokens.astype(np.int32), self.n_min, self.n_max, self.max_model_len, k).astype(np.int64)

    def forget(self, req_id: str) -> None:
        return None
