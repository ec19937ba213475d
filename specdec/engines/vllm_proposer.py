"""Our proposer as a vLLM `custom_class` drafter, inside vLLM's worker process. vLLM calls
`propose(...)` every step with one row per running request but no request ids, so the engine binds
the model runner's input batch (rows -> `input_batch.req_ids`) and our SpecConfig through
`LLM.collective_rpc` after start-up (`bind_proposer`). With tensor or pipeline parallelism only
the rank whose drafts vLLM uses drafts (docs/internals.md, "Parallel engines")."""

from __future__ import annotations

import dataclasses
import functools
import logging
from collections.abc import Callable
from typing import Any, TypeVar

import numpy as np

from specdec.config import SpecConfig
from specdec.controller import DraftController
from specdec.step_cost import StepCost, StepSample, StepTimer

CLASS_PATH = "specdec.engines.vllm_proposer.SpecdecVllmProposer"
_R = TypeVar("_R")
# vLLM's "vllm" logger is the one with a handler in its worker processes, where this runs.
log = logging.getLogger("vllm.specdec.proposer")


class SpecdecVllmProposer:

    def __init__(self, vllm_config: Any) -> None:
        # vLLM's K: the SpecConfig's k_ceiling it was started with (drafts never exceed it)
        self.k_ceiling = int(vllm_config.speculative_config.num_speculative_tokens)
        self.max_num_seqs = int(vllm_config.scheduler_config.max_num_seqs)
        self.controller: DraftController | None = None
        self.input_batch: Any = None
        self.budget = False
        self.timer = StepTimer()
        self.forced_draft_tokens: int | None = None  # calibration: draft exactly this many tokens
        self.drafting = True  # off: no drafts and no controller call (an in-engine baseline)
        # No more requests will join (the stream's end, or no stream at all): free rows are the
        # run's tail, where the budget may draft up to k_ceiling.
        self.stream_ending = True
        self.drafts_used = _drafts_used_here()

    def load_model(self, target_model: Any) -> None:
        """No draft model to load."""

    def bind(self, input_batch: Any, config: SpecConfig, tokenizer: str | None = None) -> str | None:
        """Returns a warning when the cache file could not be used (the cache starts empty)."""
        if config.k_ceiling > self.k_ceiling:
            raise ValueError(f"SpecConfig.k_ceiling={config.k_ceiling} > vLLM K={self.k_ceiling}")
        self.input_batch = input_batch
        if not hasattr(input_batch, "num_prompt_tokens"):
            log.warning("specdec: the input batch has no num_prompt_tokens: drafting without prompt groups or history")
        self.controller = DraftController(config, tokenizer)
        self.budget = config.budget
        return self.controller.cache_warning

    def propose(self, sampled_token_ids: list[list[int]], num_tokens_no_spec: np.ndarray, token_ids_cpu: np.ndarray,
                **_: Any) -> list[list[int]]:
        controller = self.controller
        if controller is None or not self.drafting:  # warm-up before binding, or drafting off
            return [[] for _ in sampled_token_ids]
        budget, batch = self.budget, self.input_batch
        # each row's prompt length (None: unknown, see bind): the drafter groups a prompt's requests by it
        prompt_lens = getattr(batch, "num_prompt_tokens", None)
        # free rows while nothing more will join: the run's tail (see stream_ending)
        tail = self.stream_ending and len(sampled_token_ids) < self.max_num_seqs
        drafts, sample = controller.engine_step(batch.req_ids, sampled_token_ids, num_tokens_no_spec, token_ids_cpu,
                                                self.timer.model if budget else None, self.forced_draft_tokens,
                                                timed=budget, num_prompt_tokens=prompt_lens, tail=tail)
        if sample is not None:
            self.timer.add(sample)
        return drafts


def _drafts_used_here() -> bool:
    """Whether vLLM uses this rank's drafts (see the module docstring); True without a
    distributed group (one process: tests, stand-in runners)."""
    try:
        from vllm.distributed.parallel_state import get_pp_group, get_tp_group

        return get_tp_group().rank_in_group == 0 and get_pp_group().is_last_rank
    except (ImportError, AssertionError):  # vLLM asserts when no group was initialised
        return True


# Functions run in the worker through LLM.collective_rpc; `worker` is vLLM's worker object.
def _drafter(worker: Any) -> SpecdecVllmProposer | None:
    """The worker's specdec drafter, on the rank whose drafts vLLM uses (None elsewhere)."""
    drafter = getattr(worker.model_runner, "drafter", None)
    return drafter if isinstance(drafter, SpecdecVllmProposer) and drafter.drafts_used else None


def _on_drafter(absent: Any, bound: bool = False) -> Callable[[Callable[..., _R]], Callable[..., _R]]:
    """An RPC function `fn(worker, ...)` from `fn(drafter, ...)`: `absent` is its answer where
    the worker has no specdec drafter (or, with `bound`, one not bound yet)."""

    def wrap(fn: Callable[..., _R]) -> Callable[..., _R]:
        @functools.wraps(fn)
        def call(worker: Any, *args: Any, **kwargs: Any) -> _R:
            drafter = _drafter(worker)
            if drafter is None or (bound and drafter.controller is None):
                return absent
            return fn(drafter, *args, **kwargs)

        return call

    return wrap


def bind_proposer(worker: Any, config: dict[str, Any], tokenizer: str | None = None) -> str | None:
    """None: no specdec drafter in this worker; otherwise "" or the cache file's warning."""
    drafter = _drafter(worker)
    if drafter is None:
        return None
    return drafter.bind(worker.model_runner.input_batch, SpecConfig.from_dict(config), tokenizer) or ""


@_on_drafter(False, bound=True)
def reset_proposer(drafter: SpecdecVllmProposer) -> bool:
    """Start over with a fresh controller (cold cache, no per-request state)."""
    assert drafter.controller is not None
    drafter.controller = DraftController(drafter.controller.config, drafter.controller.tokenizer)
    return True


@_on_drafter(False)
def set_drafting(drafter: SpecdecVllmProposer, enabled: bool) -> bool:
    """Draft (the default) or propose nothing from the next step on; False: no drafter here."""
    drafter.drafting = enabled
    return True


@_on_drafter(False)
def set_stream_ending(drafter: SpecdecVllmProposer, ending: bool) -> bool:
    """Whether no more requests will join this engine's stream; False: no drafter here."""
    drafter.stream_ending = ending
    return True


@_on_drafter(False)
def start_calibration(drafter: SpecdecVllmProposer, forced_draft_tokens: int) -> bool:
    """Draft exactly `forced_draft_tokens` tokens per row from now on, timing steps as calibration."""
    drafter.forced_draft_tokens = forced_draft_tokens
    drafter.timer.calibrating = True
    return True


@_on_drafter([])
def finish_calibration(drafter: SpecdecVllmProposer) -> list[dict[str, float]]:
    """Back to normal drafting; returns the calibration samples (and fits the model)."""
    drafter.forced_draft_tokens = None
    drafter.timer.calibrating = False
    drafter.timer.refit()
    return [s._asdict() for s in drafter.timer.calibration]


@_on_drafter(False)
def load_calibration(drafter: SpecdecVllmProposer, samples: list[dict[str, float]]) -> bool:
    drafter.timer.load_calibration([StepSample(**s) for s in samples])
    return True


@_on_drafter(None)
def step_cost(drafter: SpecdecVllmProposer) -> dict[str, float] | None:
    """The step-cost model the budget uses now (None: not fitted yet)."""
    model: StepCost | None = drafter.timer.model
    return None if model is None else dataclasses.asdict(model)


@_on_drafter(None)
def take_source_counts(drafter: SpecdecVllmProposer, req_ids: list[str]) -> dict[str, dict[str, tuple[int, int]]]:
    """DraftController.take_source_counts (vLLM's request ids); None: no drafter here."""
    return {} if drafter.controller is None else drafter.controller.take_source_counts(req_ids)


@_on_drafter(False, bound=True)
def learn(drafter: SpecdecVllmProposer, finished: list[tuple[str, list[int], list[int]]]) -> bool:
    """DraftController.learn for each (id, prompt, output); False: no drafter here."""
    assert drafter.controller is not None
    for req_id, prompt, output in finished:
        drafter.controller.learn(req_id, prompt, output)
    return True


@_on_drafter(0, bound=True)
def save_cache(drafter: SpecdecVllmProposer, path: str) -> int:
    """Write the proposer's cross-request cache to `path` (sequences written)."""
    assert drafter.controller is not None
    drafter.controller.finish_all()  # the call's last requests: their tokens belong in the file
    try:
        return drafter.controller.save_cache(path)
    except OSError as exc:  # costs the next run its warm start, not this call its results
        log.warning("specdec: could not save the draft cache to %s: %s", path, exc)
        return 0
