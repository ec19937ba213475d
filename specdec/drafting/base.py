"""The Proposer protocol every drafter implements."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Protocol

import numpy as np

if TYPE_CHECKING:
    from specdec.drafting.suffix_cache import CacheDraft


class Proposer(Protocol):
    """Suggests up to `k` next tokens for one request from its token sequence so far."""

    def propose(self, req_id: str, tokens: np.ndarray, k: int) -> np.ndarray:
        """Return at most `k` draft token ids (possibly none) continuing `tokens`."""
        ...

    def forget(self, req_id: str) -> None:
        """Drop any per-request state once the request has finished."""
        ...


class ConfidentProposer(Proposer, Protocol):
    """A proposer that also knows how likely each token of its last draft is accepted
    (the controller checks for these methods; the batch budget uses them)."""

    def confidence(self, req_id: str) -> np.ndarray:
        """Acceptance probability of each token of `req_id`'s last draft."""
        ...

    def best_confidence(self) -> float:
        """The highest acceptance probability any drafted token can be given right now."""
        ...

    def feedback(self, req_id: str, num_drafted: int, num_accepted: int) -> None:
        """The first `num_drafted` tokens of the last draft were verified, `num_accepted` accepted."""
        ...


class DraftCache(Protocol):
    """The cross-request cache (drafting/suffix_cache.py, the Python reference, and
    drafting/native_cache.py on arctic's compiled suffix tree)."""

    max_depth: int  # longest substring counted

    def __len__(self) -> int: ...

    def __contains__(self, seq_id: str) -> bool: ...

    def insert(self, seq_id: str, tokens: np.ndarray) -> None:
        """Count every substring of a finished sequence (evicting the oldest past the budget)."""
        ...

    def speculate(self, context: np.ndarray, k: int, min_prob: float = 0.0) -> CacheDraft:
        """The most frequent continuation of the longest cached suffix of `context`."""
        ...

    def save(self, path: str | Path) -> None: ...
