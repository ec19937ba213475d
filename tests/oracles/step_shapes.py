"""The shape of each clean decode step between two proposer calls, naive (the oracle of
packaging/specdec_native/src/step_shapes.h)."""

from __future__ import annotations

import time
from collections.abc import Sequence

from specdec.step_cost import StepSample


class StepShapes:
    """The shape of each clean decode step between two proposer calls (the reference of the
    compiled controller's, packaging/specdec_native/src/step_shapes.h)."""

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
