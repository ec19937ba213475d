"""The Proposer protocol every drafter implements."""

from __future__ import annotations

from typing import Protocol

import numpy as np


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
