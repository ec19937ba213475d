"""Our proposer as a vLLM `custom_class` drafter, running inside vLLM's worker process.

vLLM constructs `SpecdecVllmProposer(vllm_config)` in the worker and calls `propose(...)`
every step with one row per running request. It does not pass request ids, so the engine
adapter binds the model runner's input batch (rows -> `input_batch.req_ids`) and our
SpecConfig through `LLM.collective_rpc` right after start-up (see `bind_proposer`).
Finished requests are noticed when they leave the batch; their traces wait in
`finished` until the adapter collects them (`collect_traces`).

With `SpecConfig.budget` the proposer also times every step (`StepTimer`) and caps the
batch's drafts by the fitted step-cost model (specdec.budget). The adapter calibrates that
model at start-up by running a few steps with forced drafts of known length (`forced_k`).
"""

from __future__ import annotations

import dataclasses
import logging
from typing import Any

import numpy as np

from specdec.budget import StepCost, StepSample
from specdec.config import SpecConfig
from specdec.controller import DraftController
from specdec.drafting.base import TokenRows
from specdec.engines.step_timing import StepTimer
from specdec.stats import RequestTrace

CLASS_PATH = "specdec.engines.vllm_proposer.SpecdecVllmProposer"
# vLLM's "vllm" logger is the one with a handler in its worker processes, where this runs.
log = logging.getLogger("vllm.specdec.proposer")


class SpecdecVllmProposer:
    """vLLM custom proposer: n-gram drafts sized per request by the adaptive-K policy."""

    def __init__(self, vllm_config: Any) -> None:
        self.k_max = int(vllm_config.speculative_config.num_speculative_tokens)
        self.controller: DraftController | None = None
        self.input_batch: Any = None
        self.finished: dict[str, RequestTrace] = {}
        self.timer = StepTimer()
        self.forced_k: int | None = None  # calibration: draft exactly this many tokens

    def load_model(self, target_model: Any) -> None:
        """No draft model to load."""

    def bind(self, input_batch: Any, config: SpecConfig, tokenizer: str | None = None) -> str | None:
        """Returns a warning when the cache file could not be used (the cache starts empty)."""
        if config.k_max != self.k_max:
            raise ValueError(f"SpecConfig.k_max={config.k_max} != vLLM K={self.k_max}")
        self.input_batch = input_batch
        self.controller = DraftController(config, tokenizer=tokenizer)
        return self.controller.cache_warning

    def propose(
        self,
        sampled_token_ids: list[list[int]],
        num_tokens_no_spec: np.ndarray,
        token_ids_cpu: np.ndarray,
        **_: Any,
    ) -> list[list[int]]:
        controller = self.controller
        if controller is None:  # warm-up before binding: no drafts
            return [[] for _ in sampled_token_ids]
        req_ids = list(self.input_batch.req_ids[: len(sampled_token_ids)])
        self._retire_departed(set(req_ids))
        decoding = [row for row, sampled in enumerate(sampled_token_ids) if sampled]  # others: prefill
        budget = controller.config.budget
        if budget:
            self.timer.step_started(req_ids, len(decoding) == len(req_ids))
        if self.forced_k is not None:
            row_drafts = {row: self._forced_draft(token_ids_cpu, num_tokens_no_spec, row) for row in decoding}
        else:
            rows = np.asarray(decoding, dtype=np.int64)
            tokens = TokenRows(token_ids_cpu, num_tokens_no_spec[rows], rows)  # vLLM's buffer, bound once
            accepted = [len(sampled_token_ids[row]) - 1 for row in decoding]
            cost = self.timer.model if budget else None
            ids = [req_ids[row] for row in decoding]
            row_drafts = dict(zip(decoding, controller.step_tokens(ids, tokens, accepted, cost), strict=True))
        drafts = [row_drafts[row][: self.k_max].tolist() if row in row_drafts else [] for row in range(len(req_ids))]
        if budget:
            # The next forward attends to all but the last token (it is scheduled with the draft).
            self.timer.step_finished({req_ids[row]: len(drafts[row]) for row in decoding},
                                     {req_ids[row]: int(num_tokens_no_spec[row]) - 1 for row in decoding})
        return drafts

    def _forced_draft(self, token_ids_cpu: np.ndarray, num_tokens_no_spec: np.ndarray, row: int) -> np.ndarray:
        assert self.forced_k is not None
        last = token_ids_cpu[row, int(num_tokens_no_spec[row]) - 1]
        return np.full(self.forced_k, last, dtype=np.int64)

    def _retire_departed(self, present: set[str]) -> None:
        assert self.controller is not None
        for req_id in self.controller.active_ids():
            if req_id not in present:
                self._retire(req_id)

    def collect(self, external_ids: list[str]) -> dict[str, dict[str, Any]]:
        """Traces of the given requests (finishing any still active), removed from memory.

        The worker sees vLLM's internal ids, `<external id>-<8 random chars>`; the caller
        knows the external ids from `RequestOutput.request_id`.
        """
        wanted = set(external_ids)
        if self.controller is not None:
            for req_id in self.controller.active_ids():
                if _external_id(req_id) in wanted:
                    self._retire(req_id)
        out: dict[str, dict[str, Any]] = {}
        for req_id in [r for r in self.finished if _external_id(r) in wanted]:
            out[_external_id(req_id)] = self.finished.pop(req_id).to_dict()
        if self.controller is not None and not self.controller.active_ids():
            self.timer.forget_requests()
        return out

    def state_sizes(self) -> dict[str, tuple[int, int | None]]:
        """(size, bound) of every structure that grows with requests: per-request ones
        (bound None) are empty between generate calls, the others stay within their bound."""
        sizes = {"finished_traces": (len(self.finished), None), "step_drafts": (len(self.timer._last_drafts), None),
                 "step_contexts": (len(self.timer._last_contexts), None),
                 "step_samples": (len(self.timer.recent), self.timer.recent.maxlen)}
        return {**sizes, **(self.controller.state_sizes() if self.controller else {})}

    def _retire(self, req_id: str) -> None:
        assert self.controller is not None
        trace = self.controller.finish(req_id)
        if trace is not None:
            self.finished[req_id] = trace


def _external_id(internal_id: str) -> str:
    return internal_id.rsplit("-", 1)[0]


# Functions run in the worker through LLM.collective_rpc; `worker` is vLLM's worker object.
def _drafter(worker: Any) -> SpecdecVllmProposer | None:
    drafter = getattr(worker.model_runner, "drafter", None)
    return drafter if isinstance(drafter, SpecdecVllmProposer) else None


def bind_proposer(worker: Any, config: dict[str, Any], tokenizer: str | None = None) -> str | None:
    """None: no specdec drafter in this worker; otherwise "" or the cache file's warning."""
    runner = worker.model_runner
    drafter = _drafter(worker)
    if drafter is None:
        return None
    return drafter.bind(runner.input_batch, SpecConfig.from_dict(config), tokenizer) or ""


def reset_proposer(worker: Any) -> bool:
    """Start over with a fresh controller (cold cache, no per-request state)."""
    drafter = _drafter(worker)
    if drafter is None or drafter.controller is None:
        return False
    drafter.controller = DraftController(drafter.controller.config, tokenizer=drafter.controller.tokenizer)
    drafter.finished.clear()
    return True


def collect_traces(worker: Any, req_ids: list[str]) -> dict[str, dict[str, Any]]:
    drafter = _drafter(worker)
    if drafter is None:
        return {}
    return drafter.collect(req_ids)


def start_calibration(worker: Any, forced_k: int) -> bool:
    """Draft exactly `forced_k` tokens per row from now on, timing steps as calibration."""
    drafter = _drafter(worker)
    if drafter is None:
        return False
    drafter.forced_k = forced_k
    drafter.timer.calibrating = True
    return True


def finish_calibration(worker: Any) -> list[dict[str, float]]:
    """Back to normal drafting; returns the calibration samples (and fits the model)."""
    drafter = _drafter(worker)
    if drafter is None:
        return []
    drafter.forced_k = None
    drafter.timer.calibrating = False
    drafter.timer.refit()
    return [dataclasses.asdict(s) for s in drafter.timer.calibration]


def load_calibration(worker: Any, samples: list[dict[str, float]]) -> bool:
    drafter = _drafter(worker)
    if drafter is None:
        return False
    drafter.timer.load_calibration([StepSample(**s) for s in samples])
    return True


def step_cost(worker: Any) -> dict[str, float] | None:
    """The step-cost model the budget uses now (None: not fitted yet)."""
    drafter = _drafter(worker)
    if drafter is None:
        return None
    model: StepCost | None = drafter.timer.model
    return None if model is None else dataclasses.asdict(model)


def state_sizes(worker: Any) -> dict[str, tuple[int, int | None]] | None:
    drafter = _drafter(worker)
    return None if drafter is None else drafter.state_sizes()


def save_cache(worker: Any, path: str) -> int:
    """Write the proposer's cross-request cache to `path` (sequences written)."""
    drafter = _drafter(worker)
    if drafter is None or drafter.controller is None:
        return 0
    try:
        return drafter.controller.save_cache(path)
    except OSError as exc:  # costs the next run its warm start, not this call its results
        log.warning("specdec: could not save the draft cache to %s: %s", path, exc)
        return 0
