"""Calibrates the batch budget's step-cost model when a specdec engine starts.

A few short generations at batch sizes 1, 4 and 16, each once without drafts and once with
forced drafts of k_max tokens, plus one at `max_num_seqs` without drafts (forced drafts
there would cost most of the calibration time), give step times over a spread of rows and
tokens; one sequence with a long prompt and four with half as long ones, each with and
without drafts, set the context apart from the rows (with short prompts only, KV tokens
grow in step with the rows and their costs cannot be told apart) and a drafted token's
attention over its row's context apart from its own cost (one row's steps alone are too
noisy for that: a few milliseconds either way on a 2-core CPU); the worker fits `StepCost` to them and keeps refining it from the running engine. Samples
are cached per machine and engine configuration under the project home, so only the first
engine of that kind pays for it (tens of seconds on a 2-core CPU).
"""

from __future__ import annotations

import json
import logging
import os
import platform
from pathlib import Path
from typing import Any

import numpy as np

from specdec.config import EngineConfig, config_hash
from specdec.engines import vllm_proposer
from specdec.models import specdec_home

log = logging.getLogger(__name__)

PROMPT_TOKENS = 32
LONG_PROMPT_TOKENS = 1024  # a few seconds of prefill on a 2-core CPU
LONG_BATCH = 4  # rows of the second long-context pair, LONG_PROMPT_TOKENS / 2 each
STEPS = 6
# Part of the cache key: samples of an older layout or set of runs are measured again.
SAMPLE_VERSION = 4


def calibration_path(engine: EngineConfig, model_path: Path, k_max: int, cpu_binding: dict[str, str]) -> Path:
    import vllm

    key = config_hash(
        {"engine": engine.__dict__, "model": str(model_path), "k_max": k_max, "version": SAMPLE_VERSION},
        {"vllm": vllm.__version__, "cpus": os.cpu_count(), "host": platform.node(), "binding": cpu_binding},
    )
    return specdec_home() / "calibration" / f"{key}.json"


def calibration_runs(max_num_seqs: int, k_max: int, max_model_len: int) -> list[tuple[int, int, int]]:
    """(batch size, forced draft length, prompt tokens) of each calibration generation."""
    runs = [(size, k, PROMPT_TOKENS) for size in (1, 4, 16) if size <= max_num_seqs for k in (0, k_max)]
    if max_num_seqs > 16:
        runs.append((max_num_seqs, 0, PROMPT_TOKENS))
    long_prompt = min(LONG_PROMPT_TOKENS, max_model_len - STEPS * (k_max + 1) - 1)
    if long_prompt > 4 * PROMPT_TOKENS:
        runs += [(1, 0, long_prompt), (1, k_max, long_prompt)]
        if max_num_seqs >= LONG_BATCH:
            runs += [(LONG_BATCH, 0, long_prompt // 2), (LONG_BATCH, k_max, long_prompt // 2)]
    return runs


def calibrate(
    llm: Any, engine: EngineConfig, model_path: Path, k_max: int, cpu_binding: dict[str, str]
) -> list[dict[str, float]]:
    """Step-time samples for this engine (cached), loaded into the worker's budget."""
    path = calibration_path(engine, model_path, k_max, cpu_binding)
    if path.exists():
        samples = json.loads(path.read_text())
    else:
        samples = _measure(llm, engine, k_max)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")  # workers may calibrate at once
        tmp.write_text(json.dumps(samples))
        tmp.replace(path)
    llm.collective_rpc(vllm_proposer.load_calibration, args=(samples,))
    return samples


def _measure(llm: Any, engine: EngineConfig, k_max: int) -> list[dict[str, float]]:
    from vllm import SamplingParams
    from vllm.inputs import TokensPrompt

    log.info("calibrating the speculation budget (step cost vs batch size and drafted tokens)")
    vocab = llm.get_tokenizer().vocab_size
    rng = np.random.default_rng(0)
    params = SamplingParams(max_tokens=STEPS, temperature=0.0, ignore_eos=True)
    samples: list[list[dict[str, float]]] = []
    for size, forced_k, prompt_tokens in calibration_runs(engine.max_num_seqs, k_max, engine.max_model_len):
        prompts = [
            TokensPrompt(prompt_token_ids=rng.integers(100, vocab, prompt_tokens).tolist()) for _ in range(size)
        ]
        llm.collective_rpc(vllm_proposer.start_calibration, args=(forced_k,))
        try:
            llm.generate(prompts, params, use_tqdm=False)
        finally:
            samples = llm.collective_rpc(vllm_proposer.finish_calibration)
    return samples[0] if samples else []
