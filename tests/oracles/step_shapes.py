"""The step shapes and a drafted token's price in Python: naive versions of the compiled
controller's (packaging/specdec_native/src/step_shapes.h and budget.cc), for the oracles and
the tests that check the budget and the step fit."""

from __future__ import annotations

import time
from collections.abc import Sequence

import numpy as np

from specdec.step_cost import StepCost, StepCostModel, StepSample


def row_contexts(lengths: np.ndarray) -> np.ndarray:
    """Context each row holds in the KV cache for the next forward, from its tokens so far:
    all but its last (that one is scheduled with the draft)."""
    return np.maximum(np.asarray(lengths, dtype=np.int64) - 1, 0)


def seconds_for_tokens(cost: StepCostModel, num_seqs: int, num_tokens: np.ndarray | int, num_kv_tokens: int,
                       num_draft_kv_tokens: np.ndarray | int) -> np.ndarray:
    """`cost.seconds` for many token counts: one array operation for a StepCost (its formula
    is element by element, the same arithmetic), a call per count for other models."""
    if isinstance(cost, StepCost):
        seconds = cost.seconds(num_seqs, num_tokens, num_kv_tokens, num_draft_kv_tokens)  # type: ignore[arg-type]
        return np.asarray(seconds, dtype=np.float64)
    tokens, draft_kv = np.broadcast_arrays(num_tokens, num_draft_kv_tokens)
    return np.array([cost.seconds(num_seqs, int(n), num_kv_tokens, int(d)) for n, d in zip(tokens, draft_kv)])


def draft_token_seconds(cost: StepCostModel, num_rows: int, num_kv_tokens: int, contexts: np.ndarray) -> np.ndarray:
    """What one drafted token adds to a step of `num_rows` rows without drafts, per row:
    verifying it, and its row's attention over its context with more than one query
    token (the first drafted token's price; further ones in that row cost only their own
    token)."""
    base = cost.seconds(num_rows, num_rows, num_kv_tokens, 0)
    return seconds_for_tokens(cost, num_rows, num_rows + 1, num_kv_tokens, contexts) - base


class StepShapes:
    """The shape of each clean decode step between two proposer calls, as the compiled
    controller measures them."""

    def __init__(self) -> None:
        self._last_end: float | None = None
        self._last_drafts: dict[str, int] = {}
        self._last_contexts: dict[str, int] = {}

    def __len__(self) -> int:
        """Rows of the previous call held (empty between generate calls)."""
        return len(self._last_drafts)

    def started(self, req_ids: Sequence[str], all_decoding: bool) -> StepSample | None:
        """Start of a propose call: the forward that just ran, if it was clean."""
        now = time.perf_counter()
        last_end, last_drafts = self._last_end, self._last_drafts
        self._last_end = None
        if last_end is None or not all_decoding or not req_ids:
            return None
        if any(r not in last_drafts for r in req_ids):
            return None
        contexts = self._last_contexts
        tokens = sum(1 + last_drafts[r] for r in req_ids)
        kv_tokens = sum(contexts[r] for r in req_ids)
        draft_kv_tokens = sum(contexts[r] for r in req_ids if last_drafts[r])
        return StepSample(len(req_ids), tokens, kv_tokens, draft_kv_tokens, now - last_end)

    def finished(self, drafts: dict[str, int], contexts: dict[str, int]) -> None:
        """End of a propose call: `drafts` maps each decoding row to its draft length,
        `contexts` to the tokens it holds in the KV cache for the next forward."""
        self._last_drafts = drafts
        self._last_contexts = contexts
        self._last_end = time.perf_counter()

    def forget(self) -> None:
        """The batch emptied (a generate call ended): the next step is no clean sample."""
        self._last_drafts = {}
        self._last_contexts = {}
        self._last_end = None
