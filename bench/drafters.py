"""What the replays draft with: specdec's controller through the core's facade, and the
comparisons (vLLM's n-gram lookup, arctic's suffix cache, none, an oracle) as per-request
proposers behind a fixed-K adapter with the same two calls, `step_tokens` and `finish`.

vLLM's own drafting functions are imported from the installed vLLM, never copied.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any, Protocol

import numpy as np

from specdec.config import SpecConfig
from specdec.controller import DraftController


class Drafter(Protocol):
    """The two calls a replay makes (specdec's DraftController has them)."""

    config: SpecConfig

    def step_tokens(self, req_ids: list[str], tokens: Sequence[np.ndarray], num_accepted: Sequence[int],
                    cost: Any = None, num_prompt_tokens: Sequence[int] | None = None,
                    tail: bool = False) -> list[np.ndarray]: ...

    def finish(self, req_id: str) -> None: ...


class Proposer(Protocol):
    """A per-request drafter: up to `k` tokens continuing `tokens` (prompt + output so far)."""

    def propose(self, req_id: str, tokens: np.ndarray, k: int) -> np.ndarray: ...

    def forget(self, req_id: str) -> None: ...


def specdec_drafter(config: SpecConfig) -> Drafter:
    """specdec's compiled controller and drafter, as the engine's worker runs them."""
    return DraftController(config)


class FixedK:
    """A proposer drafting up to K tokens every step: no controller, no budget."""

    def __init__(self, config: SpecConfig, proposer: Proposer) -> None:
        self.config, self.proposer = config, proposer

    def step_tokens(self, req_ids: list[str], tokens: Sequence[np.ndarray], num_accepted: Sequence[int],
                    cost: Any = None, num_prompt_tokens: Sequence[int] | None = None,
                    tail: bool = False) -> list[np.ndarray]:
        k = self.config.k_max
        return [self.proposer.propose(r, t, k)[:k] for r, t in zip(req_ids, tokens, strict=True)]

    def finish(self, req_id: str) -> None:
        self.proposer.forget(req_id)


class NullProposer:
    """Never drafts: decoding without speculation."""

    def propose(self, req_id: str, tokens: np.ndarray, k: int) -> np.ndarray:
        return tokens[:0]

    def forget(self, req_id: str) -> None:
        return None


class OracleProposer:
    """Drafts the target's own next tokens: every draft is accepted."""

    def __init__(self, sequences: dict[str, np.ndarray]) -> None:
        self.sequences = sequences  # request id -> prompt + reference tokens

    def propose(self, req_id: str, tokens: np.ndarray, k: int) -> np.ndarray:
        n = int(tokens.shape[0])
        return self.sequences[req_id][n : n + max(k, 0)]

    def forget(self, req_id: str) -> None:
        return None


@dataclasses.dataclass
class VllmNgramProposer:
    """vLLM's `ngram` method: longest match in [n_min, n_max], earliest occurrence, K tokens
    (vLLM's defaults when no lookup sizes are given: n_min = n_max = 5)."""

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
