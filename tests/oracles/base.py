"""The Proposer protocol every drafter implements, and the batch form the controller calls."""

from __future__ import annotations

from collections.abc import Sequence
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


class DraftBatch:
    """Every row's draft (and, from a confident drafter, each drafted token's confidence).
    A plain class: one is made every engine step."""

    __slots__ = ("tokens", "lengths", "confidence")

    def __init__(self, tokens: np.ndarray, lengths: np.ndarray, confidence: np.ndarray | None) -> None:
        self.tokens = tokens  # [num_rows, width] int64; row i's draft is tokens[i, :lengths[i]]
        self.lengths = lengths  # [num_rows] int64
        self.confidence = confidence  # [num_rows, width] float64, or None (no confidences)

    def draft(self, row: int) -> np.ndarray:
        return self.tokens[row, : self.lengths[row]]

    def row_confidence(self, row: int) -> np.ndarray:
        assert self.confidence is not None
        return self.confidence[row, : self.lengths[row]]

    @classmethod
    def from_rows(cls, drafts: Sequence[np.ndarray], confidences: Sequence[np.ndarray] | None) -> "DraftBatch":
        lengths = np.array([d.shape[0] for d in drafts], dtype=np.int64)
        width = int(lengths.max()) if lengths.size else 0
        tokens = np.zeros((len(drafts), width), dtype=np.int64)
        conf = None if confidences is None else np.zeros((len(drafts), width))
        for i, draft in enumerate(drafts):
            tokens[i, : draft.shape[0]] = draft
            if conf is not None and confidences is not None:
                conf[i, : draft.shape[0]] = confidences[i][: draft.shape[0]]
        return cls(tokens, lengths, conf)


class TokenRows:
    """A batch's tokens as vLLM holds them (a sequence of rows): row i is request i's tokens
    so far, `token_ids[buffer_rows[i], :lengths[i]]`. vLLM reuses the same buffer every step,
    which lets the compiled drafter bind it once and read only each row's new tokens."""

    __slots__ = ("token_ids", "lengths", "buffer_rows")

    def __init__(self, token_ids: np.ndarray, lengths: np.ndarray, buffer_rows: np.ndarray) -> None:
        self.token_ids = token_ids  # [max_num_reqs, max_model_len] int32 or int64 (vLLM's token_ids_cpu)
        self.lengths = lengths  # [num_rows] (vLLM's num_tokens_no_spec for these rows)
        self.buffer_rows = buffer_rows  # [num_rows] the row of token_ids holding each row

    def __len__(self) -> int:
        return int(self.lengths.shape[0])

    def __getitem__(self, row: int) -> np.ndarray:
        if not -len(self) <= row < len(self):
            raise IndexError(row)
        return self.token_ids[self.buffer_rows[row], : self.lengths[row]]


class BatchProposer(Protocol):
    """One call per engine step for the whole batch: what the controller drives.

    `feedback_batch` first (what the target accepted of each row's last draft), then
    `propose_batch` (each row's tokens so far in, each row's draft and confidences out).
    """

    def feedback_batch(self, req_ids: Sequence[str], num_drafted: Sequence[int], num_accepted: Sequence[int]) -> None:
        """Row i's last draft had its first `num_drafted[i]` tokens verified, `num_accepted[i]`
        of them accepted (both [num_rows])."""
        ...

    def propose_batch(
        self,
        req_ids: Sequence[str],
        tokens: Sequence[np.ndarray],
        ks: Sequence[int],
        num_prompt_tokens: Sequence[int] | None = None,
    ) -> DraftBatch:
        """Draft at most `ks[i]` tokens ([num_rows]) for row i from `tokens[i]` ([num_tokens_i];
        a list of arrays, or `TokenRows`). `num_prompt_tokens` ([num_rows], or None: unknown)
        is each row's prompt length; a drafter that groups requests by prompt reads it when it
        first sees a request, the others ignore it."""
        ...

    def forget(self, req_id: str) -> None:
        ...


class RowByRow:
    """A per-request `Proposer` behind the batch interface (a loop: for baselines and tests)."""

    def __init__(self, proposer: Proposer) -> None:
        self.proposer = proposer
        self._confident = callable(getattr(proposer, "confidence", None))

    def feedback_batch(self, req_ids: Sequence[str], num_drafted: Sequence[int], num_accepted: Sequence[int]) -> None:
        feedback = getattr(self.proposer, "feedback", None)
        if feedback is None:
            return
        for req_id, drafted, accepted in zip(req_ids, num_drafted, num_accepted, strict=True):
            if drafted:
                feedback(req_id, int(drafted), int(accepted))

    def propose_batch(
        self,
        req_ids: Sequence[str],
        tokens: Sequence[np.ndarray],
        ks: Sequence[int],
        num_prompt_tokens: Sequence[int] | None = None,  # ignored: a per-request proposer drafts alone
    ) -> DraftBatch:
        drafts = [self.proposer.propose(r, t, int(k)) for r, t, k in zip(req_ids, tokens, ks, strict=True)]
        confidences = [self.proposer.confidence(r) for r in req_ids] if self._confident else None  # type: ignore[attr-defined]
        return DraftBatch.from_rows(drafts, confidences)

    def forget(self, req_id: str) -> None:
        self.proposer.forget(req_id)
