"""Fixtures shared by the test groups, and the layout they follow (checked at collection):

    unit/      no engine, no servers: `make test-fast`; never marked slow
    engine/    the real vLLM engine, in this process or in subprocesses; all marked slow
    pipeline/  Prefect server, DuckDB, local S3 (their fixtures: pipeline/conftest.py); some
               start engines, those and the ones starting servers are marked slow
    process/   tests that start Python interpreters (the CLI, signals, concurrent writers,
               vLLM patched in a fresh interpreter) but no engine; all marked slow
    support/   helpers, imported as `support.<module>`: pytest puts tests/, the folder of
               this rootdir conftest (no __init__.py), on sys.path

Real vLLM engines are expensive (20-60 s to start on 2 cores), so each distinct engine
configuration is started at most once per test session and reused; specdec settings that
differ only in the drafter (budget, cache, cache file, k_max within the engine's K) share one
engine, whose drafter is rebound (`support.engine_calls.rebind`). A unit test that starts a
Python interpreter fails (unit/conftest.py)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# vLLM's stop grace, 5 s by default, spent mostly collecting garbage in processes about to exit
# (measured: 4.8 s a stop against 1.0 s): the suite stops dozens of engines, and nothing of
# ours is written at a stop (the drafter's cache file goes at the stream's end)
os.environ.setdefault("VLLM_WORKER_SHUTDOWN_TIMEOUT_SECONDS", "1")

TESTS = Path(__file__).resolve().parent

# Each engine holds several GiB (weights, KV cache, buffers): keep at most this many alive,
# closing the least recently used, so the suite fits a 24 GiB machine with subprocess
# engines (CLI, Prefect workers) running beside them.
MAX_LIVE_ENGINES = 3
_ENGINES: dict[tuple, object] = {}


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "vllm_fix(module): the test checks that fix or speedup of specdec.vllm_plugins; it "
        "fails on a vLLM release the fix was not checked against")


@pytest.fixture(autouse=True)
def _vllm_fix_checked_against_the_installed_vllm(request: pytest.FixtureRequest) -> None:
    """A test marked `vllm_fix(module)` fails, naming the fix, unless the installed vLLM is
    the release that fix was checked against."""
    marker = request.node.get_closest_marker("vllm_fix")
    if marker is not None:
        from support.plugin_checks import require_tested_vllm

        require_tested_vllm(marker.args[0])


@pytest.fixture(scope="session")
def default_model_dir():
    from specdec.models import default_model_dir as resolve

    return resolve()


@pytest.fixture(scope="session")
def engine_config():
    """The engine config a flow or `specdec generate` with batch_size=16, kv_cache_gib=1.0
    starts with (the model length settled from the model, no engine started)."""
    from specdec.engine_cache import engine_configs
    from specdec.params import GenerationParams

    return engine_configs(GenerationParams(batch_size=16, kv_cache_gib=1.0))[0]


@pytest.fixture(scope="session")
def engine_factory(engine_config) -> Iterator:
    """`engine_factory(method, k_max=4, fresh=False, newest=False, **spec_overrides)` -> a shared
    VllmEngine running that configuration. Its drafter state is whatever earlier tests left
    unless the configuration changed (`reset_proposer` for a cold one). `fresh=True` replaces
    a shared one with a newly started engine; `newest=True` only where another engine started
    after it: vLLM's metrics registry (`get_metrics`, `counters`) follows only the newest engine
    of a process."""
    from support.engine_calls import is_newest, rebind
    from specdec.config import SpecConfig
    from specdec.engines.vllm_engine import VllmEngine

    def get(method: str, k_max: int = 4, fresh: bool = False, newest: bool = False, **spec_overrides):
        spec = SpecConfig(method=method, k_max=k_max, **spec_overrides)
        if method == "specdec":
            # Every specdec setting runs on one engine per vLLM K, rebinding its drafter
            # (a cold start, seconds) instead of starting an engine (a minute): K is the
            # larger of this setting's ceiling and the budgeted default's for this k_max.
            started = SpecConfig(method=method, k_max=k_max)
            started = spec if spec.k_ceiling >= started.k_ceiling else started
            key: object = (method, started.k_ceiling)  # see _is_specdec_key
        else:
            started, key = spec, spec  # settings given or defaulted alike share an engine
        if key in _ENGINES and (fresh or (newest and not is_newest(_ENGINES[key]))):
            _ENGINES.pop(key).close()
        if key in _ENGINES:
            _ENGINES[key] = _ENGINES.pop(key)  # most recently used goes last
        else:
            while len(_ENGINES) >= MAX_LIVE_ENGINES:
                _ENGINES.pop(next(iter(_ENGINES))).close()
            _ENGINES[key] = VllmEngine(engine_config, started)
        engine = _ENGINES[key]
        if engine.spec != spec:
            rebind(engine, spec)
        return engine

    yield get
    _close_engines()


def _close_engines(keep_specdec: bool = False) -> None:
    """Close the shared engines (`keep_specdec`: all but the specdec one), side by side: each
    close waits up to 5 s for vLLM's processes to exit (their interpreters' teardown)."""
    closing = [_ENGINES.pop(k) for k in list(_ENGINES) if not (keep_specdec and _is_specdec_key(k))]
    if closing:
        with ThreadPoolExecutor(len(closing)) as pool:
            list(pool.map(lambda engine: engine.close(), closing))  # list(): a failed close raises here


def _is_specdec_key(key: object) -> bool:
    return isinstance(key, tuple) and key[0] == "specdec"


@pytest.fixture(scope="session")
def probe_factory(engine_factory):
    """`probe_factory(method, seed, sampling=None, num_samples=..., num_repeat=...)` -> a
    sampling probe (support/sampling_probe.py) on the shared engine for `method`, computed
    once per session: test_fidelity.py reuses test_sampling_fix_engine.py's plain probe."""
    from support import sampling_probe

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
    from prompt_sets.humaneval import humaneval_rows as rows

    return rows(limit=16)


@pytest.fixture(scope="session")
def tokenizer(default_model_dir):
    """The default model's tokenizer, without an engine."""
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(default_model_dir)


@pytest.fixture
def no_pipeline_env(tmp_path) -> dict[str, str]:
    """Environment for subprocesses in which prefect and duckdb cannot be imported."""
    from support.no_pipeline import env_without_pipeline

    return env_without_pipeline(tmp_path)


def _probe_engine(engine_factory, method: str):
    # The sampler is under test, not the batch budget: at the probe's batch size the budget
    # (rightly, on CPU) drafts almost nothing, and seeds only repeat from the same drafts.
    return engine_factory(method, budget=False) if method == "specdec" else engine_factory(method)


# --- the layout -----------------------------------------------------------------------------


def _group(item: pytest.Item) -> str:
    """unit, engine, pipeline or process: the folder under tests/ that holds the test."""
    path = item.path.resolve()
    return path.relative_to(TESTS).parts[0] if path.is_relative_to(TESTS) else ""


# engine/ modules whose engines all start in subprocesses of their own: first of all, while no
# shared engine holds memory here (test_cli_generate.py measured 27-30 s alone, 36-37 s beside
# three idle shared engines). They start none in this process, so the order below still holds.
OWN_PROCESS_ENGINE_MODULES = ("test_cli_generate.py", "test_signals_engine.py", "test_model_conversion.py")
# engine/ modules that run next, in this order, the others after them in file order:
# test_engine_greedy.py reconciles vLLM's counters, which follow only the newest engine of the
# process, so its specdec engine must start before the shared `none` one (the same engine then
# serves every later specdec test, rebound); the bench test runs its rounds on the `none` and
# ngram engines that test_engine_greedy.py leaves alive.
FIRST_ENGINE_MODULES = (*OWN_PROCESS_ENGINE_MODULES, "test_engine_greedy.py", "test_bench_engine.py")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """No slow test in unit/ (`make test-fast` runs that folder), none but slow ones in engine/
    and process/; FIRST_ENGINE_MODULES first (a stable sort: the order is otherwise kept)."""
    groups = list(dict.fromkeys(_group(item) for item in items))
    first = {name: i for i, name in enumerate(FIRST_ENGINE_MODULES)}
    items.sort(key=lambda item: (groups.index(_group(item)), first.get(item.path.name, len(first))))
    misplaced = []
    for item in items:
        slow = item.get_closest_marker("slow") is not None
        if _group(item) == "unit" and slow:
            misplaced.append(f"{item.nodeid}: marked slow, in unit/ (move it to engine/ or pipeline/)")
        if _group(item) in ("engine", "process") and not slow:
            misplaced.append(f"{item.nodeid}: not marked slow, in {_group(item)}/ (mark it, or move it to unit/)")
    if misplaced:
        raise pytest.UsageError("tests in the wrong group:\n  " + "\n  ".join(misplaced))


_last_group: str | None = None


def pytest_runtest_setup(item: pytest.Item) -> None:
    """A new group starts without the engines the last one left alive but the specdec one
    (pipeline/ uses it too): pipeline/'s Prefect workers start engines of their own, and
    several GiB each would not fit beside more."""
    global _last_group
    group = _group(item)
    if _last_group not in (None, group):
        _close_engines(keep_specdec=True)
    _last_group = group
