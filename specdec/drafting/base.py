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
