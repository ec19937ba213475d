"""Calibrates the batch budget's step-cost model when a specdec engine starts (`calibration_runs`),
cached per machine and engine configuration and checked once per process against a fresh short
run (docs/internals.md, "The step-cost model")."""

from __future__ import annotations

import json
import logging
import os
import platform
import time
from pathlib import Path
from typing import Any

import numpy as np

from specdec.step_cost import PrefillSample, StepSample, fit_step_cost
from specdec.config import EngineConfig, config_hash
from specdec.engines.drafter_handle import DrafterHandle
from specdec.models import specdec_home

log = logging.getLogger(__name__)

PROMPT_TOKENS = 32
LONG_PROMPT_TOKENS = 1024
LONG_BATCH = 4  # rows of the long-context batch, LONG_PROMPT_TOKENS each
# A row's first drafted token over a long context costs far more than its others (the
# draft-KV term, once per drafting row): the long batch drafts one token per row as well as
# k_max, which tells that term from the per-token one.
FEW_DRAFTS = 1
STEPS = 6
STALE_FACTOR = 1.5  # a cached set this far off fresh check runs' median steps is measured again
_checked: set[Path] = set()  # cached sets already checked in this process
# Part of the cache key: samples of an older layout or set of runs are measured again.
SAMPLE_VERSION = 7


def calibration_path(engine: EngineConfig, model_path: Path, k_max: int, cpu_binding: dict[str, str]) -> Path:
    import vllm

    key = config_hash({"engine": engine.__dict__, "model": str(model_path), "k_max": k_max, "version": SAMPLE_VERSION},
                      {"vllm": vllm.__version__, "cpus": os.cpu_count(), "host": platform.node(),
                       "binding": cpu_binding})
    return specdec_home() / "calibration" / f"{key}.json"


def calibration_runs(max_num_seqs: int, k_max: int, max_model_len: int) -> list[tuple[int, int, int]]:
    """(batch size, forced draft length, prompt tokens) of each calibration generation."""
    runs = [(size, forced, PROMPT_TOKENS) for size in (1, 4, 16) if size <= max_num_seqs for forced in (0, k_max)]
    if max_num_seqs > 16:
        runs.append((max_num_seqs, 0, PROMPT_TOKENS))
    long_prompt = min(LONG_PROMPT_TOKENS, max_model_len - STEPS * (k_max + 1) - 1)
    if long_prompt > 4 * PROMPT_TOKENS:
        runs += [(1, 0, long_prompt), (1, k_max, long_prompt)]
        if max_num_seqs >= LONG_BATCH:
            runs += [(LONG_BATCH, forced, long_prompt) for forced in sorted({0, min(FEW_DRAFTS, k_max), k_max})]
    return runs


def calibrate(llm: Any, drafter: DrafterHandle, engine: EngineConfig, model_path: Path, k_max: int,
              cpu_binding: dict[str, str], fresh: bool = False) -> tuple[list[StepSample], list[PrefillSample]]:
    """Step-time and prefill samples for this engine, loaded into the worker's budget: the
    cached ones, or (none cached, or `fresh`) measured now and cached in their place."""
    path = calibration_path(engine, model_path, k_max, cpu_binding)
    measured = json.loads(path.read_text()) if path.exists() and not fresh else None
    if measured is not None and path not in _checked and not _still_true(llm, drafter, engine, k_max, measured):
        measured = None
    _checked.add(path)
    if measured is None:
        measured = _measure(llm, drafter, engine, k_max)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")  # workers may calibrate at once
        tmp.write_text(json.dumps(measured))
        tmp.replace(path)
    drafter.load_calibration(measured["steps"])
    return _samples(measured)


def check_runs(max_num_seqs: int, k_max: int, max_model_len: int) -> list[tuple[int, int, int]]:
    """The runs a cached set is checked by: the lightest step (one row, no drafts) and the
    heaviest short-prompt one (the largest batch with k_max drafts per row). Load during the
    calibration slows the heavy steps more (they are compute-bound), so a set timed then can
    still match today's light step; its heavy steps are what make drafts look dear."""
    runs = calibration_runs(max_num_seqs, k_max, max_model_len)
    drafted = [run for run in runs if run[1] == k_max and run[2] == PROMPT_TOKENS]  # (batch, k_max, prompt)
    return list(dict.fromkeys([runs[0], max(drafted)]))


def _still_true(llm: Any, drafter: DrafterHandle, engine: EngineConfig, k_max: int, measured: dict[str, list[dict[str, float]]]) -> bool:
    """Whether the cached set's fitted step cost predicts each fresh check run's steps within
    STALE_FACTOR (median over the run's steps)."""
    model = fit_step_cost([StepSample(**step) for step in measured["steps"]])
    runs, ratios = check_runs(engine.max_num_seqs, k_max, engine.max_model_len), []
    for run in runs:
        fresh = [StepSample(**step) for step in _measure(llm, drafter, engine, k_max, [run])["steps"]]
        if model is not None and fresh:
            ratios.append(float(np.median([model.seconds(*step[:-1]) / step.seconds for step in fresh])))
    still_true = len(ratios) == len(runs) and all(1 / STALE_FACTOR <= ratio <= STALE_FACTOR for ratio in ratios)
    if not still_true:
        log.warning("the cached step-cost calibration predicts %s today's steps; measuring it again",
                    ", ".join(f"{ratio:.2f}x" for ratio in ratios) or "none of")
    return still_true


def read_calibration(path: Path) -> tuple[list[StepSample], list[PrefillSample]]:
    """A calibration file's decode-step samples and prefill samples."""
    return _samples(json.loads(path.read_text()))


def _samples(measured: dict[str, list[dict[str, float]]]) -> tuple[list[StepSample], list[PrefillSample]]:
    return [StepSample(**s) for s in measured["steps"]], [PrefillSample(**s) for s in measured["prefills"]]


def _measure(llm: Any, drafter: DrafterHandle, engine: EngineConfig, k_max: int,
             runs: list[tuple[int, int, int]] | None = None) -> dict[str, list[dict[str, float]]]:
    """Samples of `runs` (by default all of `calibration_runs`)."""
    from vllm import SamplingParams
    from vllm.inputs import TokensPrompt

    if runs is None:
        log.info("calibrating the speculation budget (step cost vs batch size and drafted tokens)")
        runs = calibration_runs(engine.max_num_seqs, k_max, engine.max_model_len)
    vocab = llm.get_tokenizer().vocab_size
    rng = np.random.default_rng(0)
    params = SamplingParams(max_tokens=STEPS, temperature=0.0, ignore_eos=True)
    drafter.load_calibration([])  # a fresh set, not added to an older one
    samples: list[dict[str, float]] = []
    prefills = []
    for size, forced_draft_tokens, prompt_tokens in runs:
        prompts = [TokensPrompt(prompt_token_ids=rng.integers(100, vocab, prompt_tokens).tolist()) for _ in range(size)]
        before = len(samples)
        drafter.start_calibration(forced_draft_tokens)
        try:
            started = time.perf_counter()
            llm.generate(prompts, params, use_tqdm=False)
            wall = time.perf_counter() - started
        finally:
            samples = drafter.finish_calibration()
        decode = sum(s["seconds"] for s in samples[before:])
        prefills.append(PrefillSample(size, size * prompt_tokens, max(wall - decode, 0.0))._asdict())
    return {"steps": samples, "prefills": prefills}
