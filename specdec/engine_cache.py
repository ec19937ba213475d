"""One started engine per process, reused across generate calls.

The vLLM engine costs ~25-60 s to start on CPU, so a worker process starts it once and
reuses it for every shard it handles, keyed by the engine and speculation configs. A
different config replaces the cached engine (one engine per process fits in memory; two may
not).
"""

from __future__ import annotations

import gc
import time
from typing import Any

from specdec.config import EngineConfig, SpecConfig
from specdec.models import fit_model_len, resolve_model
from specdec.params import GenerationParams

_ENGINES: dict[tuple[EngineConfig, SpecConfig], Any] = {}
ENGINE_STARTS = 0  # engines started by this process (tests check reuse)


def engine_configs(params: GenerationParams) -> tuple[EngineConfig, SpecConfig]:
    """The configs an engine for `params` starts with (the model length settled from the model)."""
    folder = resolve_model(params.model)
    max_model_len = fit_model_len(folder, params.max_model_len, params.kv_cache_gib, params.dtype)
    return params.engine_config(max_model_len), params.spec_config()


def get_engine(params: GenerationParams) -> tuple[Any, float]:
    """(engine, seconds spent starting it now: 0.0 when reused)."""
    global ENGINE_STARTS
    key = engine_configs(params)
    if key in _ENGINES:
        return _ENGINES[key], 0.0
    close_engines()
    from specdec.engines.vllm_engine import VllmEngine

    started = time.perf_counter()
    engine = VllmEngine(*key)
    _ENGINES[key] = engine
    ENGINE_STARTS += 1
    return engine, time.perf_counter() - started


def close_engines() -> None:
    for engine in _ENGINES.values():
        engine.close()
    _ENGINES.clear()
    gc.collect()
