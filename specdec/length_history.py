"""How long each prompt's answers ran in earlier runs (the mean per prompt of the cache file's
per-prompt history), read once per stream so that the stream can start its last long requests
first: a run ends when its last long request does."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from specdec.drafting import cache_file
from specdec.native import load_core
from specdec.types import GenerationRequest


@dataclasses.dataclass(frozen=True)
class LengthHistory:
    mean_tokens: dict[int, float]  # by prompt digest (the drafter's, over the prompt's token ids)
    overall_mean: float  # what a prompt without history is expected to take

    @classmethod
    def read(cls, path: str | Path | None, tokenizer: str | None) -> LengthHistory | None:
        """None without a usable file or with an empty history (the drafter, which loads the
        same file, says why a file is unusable)."""
        try:
            history = cache_file.read_contents(path, tokenizer) if path else None
        except (FileNotFoundError, cache_file.CacheFileError):
            return None
        if history is None or not history.history_lengths.size:
            return None
        digests, inverse = np.unique(history.history_digests, return_inverse=True)
        lengths = history.history_lengths.astype(np.float64)
        means = np.bincount(inverse, weights=lengths) / np.bincount(inverse)
        return cls(dict(zip(digests.tolist(), means.tolist())), float(lengths.mean()))

    def expected_tokens(self, requests: Sequence[GenerationRequest]) -> list[float]:
        digest = load_core().prompt_digest
        return [min(self.mean_tokens.get(digest(np.asarray(r.prompt_token_ids, dtype=np.int64)), self.overall_mean),
                    float(r.max_tokens)) for r in requests]
