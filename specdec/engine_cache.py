"""One started engine per process (~25-60 s to start on CPU), reused across generate calls.

A different config or a dead engine replaces the cached one (two engines may not fit in
memory). A `none` request is served by a cached specdec engine with its drafting switched
off: a baseline without a second start, with the same greedy output (verification is lossless).
An interrupted process must not leave its engine processes behind (`closing_on_interrupt`).
"""

from __future__ import annotations

import contextlib
import gc
import threading
import time
from collections.abc import Iterator
from typing import Any

from specdec.config import EngineConfig, SpecConfig
from specdec.models import check_draft_vocab, fit_model_len, resolve_model
from specdec.params import GenerationParams

_ENGINES: dict[tuple[EngineConfig, SpecConfig], Any] = {}
_CLOSING: list[tuple[Any, threading.Thread]] = []  # engines shutting down in the background
ENGINE_STARTS = 0  # engines started by this process (tests check reuse)


def engine_configs(params: GenerationParams) -> tuple[EngineConfig, SpecConfig]:
    """The configs an engine for `params` starts with, checked against this vLLM build and the
    models: raises ConfigError or ModelError before anything starts."""
    from specdec.engines.vllm_args import check_platform, cpu_kv_cache_gib, is_cpu_build

    folder = resolve_model(params.model)
    spec = params.spec_config()
    if spec.method == "draft":
        check_draft_vocab(folder, resolve_model(spec.draft_model))
    probe = params.engine_config(max_model_len=0)
    check_platform(probe)
    kv_cache_gib = cpu_kv_cache_gib(probe) if is_cpu_build() else None
    max_model_len = fit_model_len(folder, params.max_model_len, kv_cache_gib, params.dtype)
    return params.engine_config(max_model_len), spec


def get_engine(params: GenerationParams, *, exact: bool = False, keep_others: bool = False) -> tuple[Any, float]:
    """(engine, seconds spent starting it now: 0.0 when reused). `exact`: `none` is an engine
    without vLLM's speculative path, never a specdec engine with its drafting off. `keep_others`:
    a new engine starts beside the cached ones where they fit together (engines_fit_together)."""
    global ENGINE_STARTS
    key = engine_configs(params)
    cached = _cached_engine(*key, exact=exact)
    if cached is not None:
        return cached, 0.0
    if not (keep_others and engines_fit_together()):
        close_engines()
    from specdec.engines.vllm_engine import VllmEngine

    started = time.perf_counter()
    engine = VllmEngine(*key)
    _ENGINES[key] = engine
    ENGINE_STARTS += 1
    return engine, time.perf_counter() - started


def _cached_engine(engine_config: EngineConfig, spec: SpecConfig, exact: bool = False) -> Any:
    """A live cached engine that serves `spec`, its drafting switched to match (one started for
    `spec` itself first); None: none does."""
    live = [(cached_spec, engine) for (cached_engine, cached_spec), engine in _ENGINES.items()
            if cached_engine == engine_config and getattr(engine, "alive", True)]
    for cached_spec, engine in sorted(live, key=lambda item: item[0] != spec):
        if cached_spec == spec:
            if cached_spec.method == "specdec":
                engine.set_drafting(True)
            return engine
        if spec.method == "none" and cached_spec.method == "specdec" and not exact:
            engine.set_drafting(False)
            return engine
    return None


def engines_fit_together() -> bool:
    """vLLM's CPU build: engines share host memory (on a GPU each claims gpu_memory_utilization)."""
    from specdec.engines.vllm_args import is_cpu_build

    return is_cpu_build()


def close_other_engines(params: GenerationParams) -> None:
    """Shut down every cached engine but the one for `params` (auto, once its pilot has chosen), in
    the background: vLLM takes seconds to stop one, the run goes on. close_engines waits for it."""
    keep = engine_configs(params)
    for key in [key for key in _ENGINES if key != keep]:
        engine = _ENGINES.pop(key)
        # not a daemon: the interpreter waits for it at exit, leaving no engine process behind
        closing = threading.Thread(target=engine.close, name="specdec-close-engine")
        _CLOSING.append((engine, closing))
        closing.start()


def engines() -> list[Any]:
    return list(_ENGINES.values())


def close_engines() -> None:
    """Shut every engine of this process down (their processes are gone on return, those shutting
    down in the background included)."""
    while _CLOSING:
        _CLOSING.pop()[1].join()
    for key in list(_ENGINES):
        engine = _ENGINES.get(key)  # None: killed meanwhile (kill_engines, from a signal)
        try:
            if engine is not None:
                engine.close()
        finally:  # dropped only now: a second signal during close() still finds it to kill
            _ENGINES.pop(key, None)
    gc.collect()


def kill_engines() -> None:
    """SIGKILL every engine process of this process now (safe inside a signal handler:
    no waiting on vLLM)."""
    for engine in [*_ENGINES.values(), *(engine for engine, _ in _CLOSING)]:
        engine.kill()
    _ENGINES.clear()


@contextlib.contextmanager
def closing_on_interrupt() -> Iterator[None]:
    """Shut the engines down when anything that is not an Exception unwinds through (a signal,
    a cancellation); an ordinary error keeps the engine for the next call."""
    try:
        yield
    except BaseException as exc:
        if not isinstance(exc, Exception):
            close_engines()
        raise
