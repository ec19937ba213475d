"""The batch form of a step's drafts, and a batch's tokens as vLLM holds them."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


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
