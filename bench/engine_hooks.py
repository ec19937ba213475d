"""What the bench and the engine tests ask of a running `VllmEngine` beyond generating: each
a function that sends one of the proposer's worker functions (specdec/engines/vllm_proposer.py)
or a vLLM call through the engine's `llm`. The product's engine carries none of them.
"""

from __future__ import annotations

from typing import Any

from specdec.config import ConfigError, SpecConfig
from specdec.engines import calibration, vllm_proposer
from specdec.engines.vllm_engine import VllmEngine
from bench.vllm_metrics import SpecCounters, read_spec_counters
from specdec.step_cost import PrefillSample, StepSample


def rebind(engine: VllmEngine, spec: SpecConfig) -> None:
    """Draft with `spec` from the next call on, without a restart: the worker's drafter
    starts cold from `spec` (its cache file read anew) and, with a budget, loads that
    budget's calibration. specdec only, within the K the engine started with (vLLM fixes K
    at start-up); smaller ceilings draft fewer tokens."""
    if engine.spec.method != "specdec" or spec.method != "specdec":
        raise ConfigError(f"{engine.spec.method} -> {spec.method}: only a specdec engine rebinds, to specdec")
    if spec.k_ceiling > engine.k_engine:
        raise ConfigError(f"K ceiling {spec.k_ceiling} is above this engine's K={engine.k_engine}")
    engine.bind(spec)


def recalibrate(engine: VllmEngine) -> tuple[list[StepSample], list[PrefillSample]]:
    """Measure the budget's start-up calibration again, now, and run on it (it replaces the
    cached one); specdec with its budget only."""
    if not engine.spec.budgeted:
        raise ConfigError(f"{engine.spec.method}: only specdec with its budget calibrates")
    return calibration.calibrate(engine.llm, engine.engine_config, engine.model_path, engine.spec.k_max,
                                 engine.cpu_binding, fresh=True)


def reset_proposer(engine: VllmEngine) -> None:
    """Forget all drafting state (cross-request cache included): a cold start."""
    if engine.spec.method == "specdec":
        engine.llm.collective_rpc(vllm_proposer.reset_proposer)


def set_drafting(engine: VllmEngine, enabled: bool) -> None:
    """Draft (the default) or propose nothing without calling the controller: the engine then
    runs as `none` would, with the same processes and memory."""
    if engine.spec.method != "specdec":
        raise ConfigError(f"{engine.spec.method}: only specdec's drafting can be switched off")
    engine.llm.collective_rpc(vllm_proposer.set_drafting, args=(enabled,))


def reset_prefix_cache(engine: VllmEngine) -> None:
    """Drop vLLM's prefix cache (between calls, no request running): the next prompts are
    prefilled anew, as on a fresh engine."""
    if not engine.llm.reset_prefix_cache():
        raise RuntimeError("vLLM did not reset its prefix cache")


def is_newest(engine: VllmEngine) -> bool:
    """Started last in this process: vLLM's metrics registry follows this engine."""
    return engine.serial == VllmEngine.engines_started


def counters(engine: VllmEngine) -> SpecCounters:
    """vLLM's own cumulative speculation counters (subtract two snapshots)."""
    if not is_newest(engine):
        raise RuntimeError("vLLM's metrics registry follows only the newest engine in this process; "
                           "read the counters of the engine started last")
    return read_spec_counters(engine.llm.get_metrics())


def state_sizes(engine: VllmEngine) -> dict[str, tuple[int, int | None]]:
    """(size, bound) of what grows with requests, driver and drafter (see
    SpecdecVllmProposer.state_sizes); bound None: per request, empty between calls."""
    llm_engine: Any = engine.llm.llm_engine
    # vLLM internals (0.32.0): per-request output state, pending utility calls
    sizes: dict[str, tuple[int, int | None]] = {
        "driver_unfinished": (llm_engine.get_num_unfinished_requests(), None),
        "driver_request_states": (len(getattr(getattr(llm_engine, "output_processor", None),
                                              "request_states", {})), None),
        "driver_utility_calls": (len(getattr(llm_engine.engine_core, "utility_results", {})), None)}
    if engine.spec.method == "specdec":
        for worker_sizes in engine.llm.collective_rpc(vllm_proposer.state_sizes):
            sizes.update({name: tuple(v) for name, v in (worker_sizes or {}).items()})  # type: ignore[misc]
    return sizes
