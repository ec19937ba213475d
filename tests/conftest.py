"""Shared fixtures. Real vLLM engines are expensive (~60 s to start on 2 cores), so each
distinct engine configuration is started at most once per test session and reused."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

# Each engine holds several GiB (weights, KV cache, buffers): keep at most this many alive,
# closing the least recently used, so the suite fits a 24 GiB machine with subprocess
# engines (CLI, Prefect workers) running beside them.
MAX_LIVE_ENGINES = 3
_ENGINES: dict[tuple, object] = {}


@pytest.fixture(scope="session")
def default_model_dir():
    from specdec.models import default_model_dir as resolve

    return resolve()


@pytest.fixture(scope="session")
def engine_factory(default_model_dir) -> Iterator:
    """`engine_factory(method, k_max=4, fresh=False, **spec_overrides)` -> a started, shared
    VllmEngine. `fresh=True` replaces a shared one with a newly started engine: vLLM's
    metrics registry (`get_metrics`) follows only the newest engine of a process."""
    from specdec.config import SpecConfig
    from specdec.engine_cache import engine_configs
    from specdec.engines.vllm_engine import VllmEngine
    from specdec.params import GenerationParams

    # the engine a flow or `specdec generate` with batch_size=16, kv_cache_gib=1.0 starts
    engine_cfg, _ = engine_configs(GenerationParams(batch_size=16, kv_cache_gib=1.0))

    def get(method: str, k_max: int = 4, fresh: bool = False, **spec_overrides):
        key = (method, k_max, tuple(sorted(spec_overrides.items())))
        if fresh and key in _ENGINES:
            _ENGINES.pop(key).close()
        if key in _ENGINES:
            _ENGINES[key] = _ENGINES.pop(key)  # most recently used goes last
            return _ENGINES[key]
        while len(_ENGINES) >= MAX_LIVE_ENGINES:
            _ENGINES.pop(next(iter(_ENGINES))).close()
        spec = SpecConfig(method=method, k_max=k_max, **spec_overrides)
        _ENGINES[key] = VllmEngine(engine_cfg, spec)
        return _ENGINES[key]

    yield get
    for engine in _ENGINES.values():
        engine.close()
    _ENGINES.clear()


@pytest.fixture(scope="session")
def probe_factory(engine_factory):
    """`probe_factory(method, seed, sampling=None, num_samples=..., num_repeat=...)` -> a
    sampling probe (tests/sampling_probe.py) on the shared engine for `method`, computed once
    per session: test_fidelity.py reuses test_sampling_fix.py's plain probe."""
    import sampling_probe

    probes: dict[tuple, dict] = {}

    def get(
        method: str,
        seed: int,
        sampling: dict | None = None,
        num_samples: int = sampling_probe.NUM_SAMPLES,
        num_repeat: int = sampling_probe.NUM_REPEAT,
    ) -> dict:
        sampling = sampling_probe.SAMPLING if sampling is None else sampling
        key = (method, seed, tuple(sorted(sampling.items())), num_samples, num_repeat)
        if key not in probes:
            probes[key] = sampling_probe.run_probe(
                _probe_engine(engine_factory, method), seed, num_samples, sampling=sampling, num_repeat=num_repeat
            )
        return probes[key]

    return get


@pytest.fixture(scope="session")
def humaneval_rows():
    from specdec.datasets import humaneval_rows as rows

    return rows(limit=16)


def _probe_engine(engine_factory, method: str):
    # The sampler is under test, not the batch budget: at the probe's batch size the budget
    # (rightly, on CPU) drafts almost nothing, and seeds only repeat from the same drafts.
    return engine_factory(method, budget=False) if method == "specdec" else engine_factory(method)
