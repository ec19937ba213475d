"""Measures the running engine's decode steps and keeps its step-cost model up to date.

vLLM calls our proposer once per step, right after the target forward; the time from the
end of one call to the start of the next is one forward (plus scheduling and sampling) over
the rows and draft tokens the previous call handed out, over the context those rows held
(their tokens before that forward). Only clean steps count: every row decoding, none new
since the previous call (a prefill chunk would hide in the time).
"""

from __future__ import annotations

import collections
import time
from collections.abc import Sequence

from specdec.budget import StepCost, StepSample, fit_step_cost


class StepTimer:
    def __init__(self, max_samples: int = 512, refit_every: int = 32) -> None:
        self.calibration: list[StepSample] = []
        self.recent: collections.deque[StepSample] = collections.deque(maxlen=max_samples)
        self.model: StepCost | None = None
        self.refit_every = refit_every
        self._since_fit = 0
        self._last_end: float | None = None
        self._last_drafts: dict[str, int] = {}
        self._last_contexts: dict[str, int] = {}
        self.calibrating = False

    def step_started(self, req_ids: Sequence[str], all_decoding: bool) -> None:
        """Start of a propose call: time the forward that just ran, if it was clean."""
        now = time.perf_counter()
        last_end, last_drafts = self._last_end, self._last_drafts
        self._last_end = None
        if last_end is None or not all_decoding or not req_ids:
            return
        if any(r not in last_drafts for r in req_ids):
            return
        tokens = sum(1 + last_drafts[r] for r in req_ids)
        kv_tokens = sum(self._last_contexts[r] for r in req_ids)
        self.add(StepSample(len(req_ids), tokens, kv_tokens, now - last_end))

    def step_finished(self, drafts: dict[str, int], contexts: dict[str, int]) -> None:
        """End of a propose call: `drafts` maps each decoding row to its draft length,
        `contexts` to the tokens it holds in the KV cache for the next forward."""
        self._last_drafts = drafts
        self._last_contexts = contexts
        self._last_end = time.perf_counter()

    def forget_requests(self) -> None:
        """The batch emptied (a generate call ended): the next step is no clean sample."""
        self._last_drafts = {}
        self._last_contexts = {}
        self._last_end = None

    def add(self, sample: StepSample) -> None:
        if self.calibrating:
            self.calibration.append(sample)
            return
        self.recent.append(sample)
        self._since_fit += 1
        if self._since_fit >= self.refit_every:
            self.refit()

    def load_calibration(self, samples: Sequence[StepSample]) -> None:
        self.calibration = list(samples)
        self.refit()

    def refit(self) -> None:
        self._since_fit = 0
        fitted = fit_step_cost([*self.calibration, *self.recent])
        if fitted is not None:
            self.model = fitted
