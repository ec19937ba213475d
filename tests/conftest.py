"""Shared fixtures. Real vLLM engines are expensive (~60 s to start on 2 cores), so each
distinct engine configuration is started at most once per test session and reused."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "2")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

_ENGINES: dict[tuple, object] = {}


@pytest.fixture(scope="session")
def default_model_dir():
    from specdec.models import default_model_dir as resolve

    return resolve()


@pytest.fixture(scope="session")
def engine_factory(default_model_dir) -> Iterator:
    """`engine_factory(method, k_max=4, **spec_overrides)` -> a started, shared VllmEngine."""
    from specdec.config import EngineConfig, SpecConfig
    from specdec.engines.vllm_engine import VllmEngine

    def get(method: str, k_max: int = 4, **spec_overrides):
        key = (method, k_max, tuple(sorted(spec_overrides.items())))
        if key not in _ENGINES:
            spec = SpecConfig(method=method, k_max=k_max, **spec_overrides)
            _ENGINES[key] = VllmEngine(EngineConfig(max_num_seqs=16, kv_cache_gib=1.0), spec)
        return _ENGINES[key]

    yield get
    for engine in _ENGINES.values():
        engine.close()
    _ENGINES.clear()


@pytest.fixture(scope="session")
def humaneval_rows():
    from specdec.datasets import humaneval_rows as rows

    return rows(limit=16)
