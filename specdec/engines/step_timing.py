"""Measures the running engine's decode steps and keeps its step-cost model up to date.

vLLM calls our proposer once per step, right after the target forward; the time from the
end of one call to the start of the next is one forward (plus scheduling and sampling) over
the rows and draft tokens the previous call handed out, over the context those rows held
(their tokens before that forward). Only clean steps count: every row decoding, none new
since the previous call (a prefill chunk would hide in the time). The controller tells
them apart (`StepShapes`, or the compiled controller's own); `StepTimer` keeps the samples
and fits the budget's step-cost model to them.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import numpy as np

from specdec.budget import NUM_SHAPE_FIELDS, StepCost, StepSample, fit_step_cost_arrays


REFIT_EVERY = 64  # new samples before a refit
REFIT_ROWS = 512  # rows those samples served, at the least


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


class StepTimer:
    """The clean steps' samples (calibration and the most recent) and the fit of them.

    A refit (about 0.1 ms) comes once `refit_every` new samples covering at least
    `refit_rows` rows have arrived: its cost is shared by the rows those steps served, so
    small batches refit less often (batch 1: every 512 steps, batch 8 and up: every 64). New
    samples wait in a list and join the arrays at the refit, so a step costs an append."""

    def __init__(self, max_samples: int = 512, refit_every: int = REFIT_EVERY, refit_rows: int = REFIT_ROWS) -> None:
        self.calibration: list[StepSample] = []
        self.model: StepCost | None = None
        self.refit_every = refit_every
        self.refit_rows = refit_rows
        self.max_samples = max_samples
        self.calibrating = False
        self._new: list[StepSample] = []
        self._new_rows = 0
        self._calibration = np.zeros((0, NUM_SHAPE_FIELDS + 1))
        self._recent = np.zeros((0, NUM_SHAPE_FIELDS + 1))  # StepSample's fields; oldest first

    def __len__(self) -> int:
        """Samples held besides the calibration's (at most max_samples)."""
        return min(self._recent.shape[0] + len(self._new), self.max_samples)

    def add(self, sample: StepSample) -> None:
        if self.calibrating:
            self.calibration.append(sample)
            return
        self._new.append(sample)
        self._new_rows += sample.num_seqs
        if len(self._new) >= self.refit_every and self._new_rows >= self.refit_rows:
            self.refit()

    def load_calibration(self, samples: Sequence[StepSample]) -> None:
        self.calibration = list(samples)
        self.refit()

    def refit(self) -> None:
        if self._new:
            self._recent = np.concatenate([self._recent, np.array(self._new, dtype=np.float64)])[-self.max_samples :]
            self._new = []
            self._new_rows = 0
        if len(self.calibration) != self._calibration.shape[0]:
            self._calibration = np.array(self.calibration, dtype=np.float64).reshape(-1, NUM_SHAPE_FIELDS + 1)
        table = np.concatenate([self._calibration, self._recent])
        fitted = fit_step_cost_arrays(table[:, :NUM_SHAPE_FIELDS], table[:, NUM_SHAPE_FIELDS])
        if fitted is not None:
            self.model = fitted
