"""What the engine tests ask of a running `VllmEngine` beyond generating: each a function
that sends one of the proposer's worker functions (specdec/engines/vllm_proposer.py) or reads
vLLM's metrics through the engine's `llm`. The bench's own: bench/engine_hooks.py."""

from __future__ import annotations

from specdec.config import ConfigError, SpecConfig
from specdec.engines import calibration, vllm_proposer
from specdec.engines.vllm_engine import VllmEngine
from specdec.step_cost import PrefillSample, StepSample
from support.vllm_counters import SpecCounters, read_spec_counters


def rebind(engine: VllmEngine, spec: SpecConfig) -> None:
    """Draft with `spec` from the next call on, without a restart: the worker's drafter
    starts cold from `spec` (its cache file read anew) and, with a budget, loads that
    budget's calibration. specdec only, within the K the engine started with (vLLM fixes K
    at start-up); smaller ceilings draft fewer tokens."""
    if engine.spec.method != "specdec" or spec.method != "specdec":
        raise ConfigError(f"{engine.spec.method} -> {spec.method}: only a specdec engine rebinds, to specdec")
    if spec.k_ceiling > engine.k_ceiling:
        raise ConfigError(f"K ceiling {spec.k_ceiling} is above this engine's K={engine.k_ceiling}")
    engine.bind(spec)


def recalibrate(engine: VllmEngine) -> tuple[list[StepSample], list[PrefillSample]]:
    """Measure the budget's start-up calibration again, now, and run on it (it replaces the
    cached one); specdec with its budget only."""
    if not engine.spec.budgeted:
        raise ConfigError(f"{engine.spec.method}: only specdec with its budget calibrates")
    return calibration.calibrate(engine.llm, engine.drafter, engine.engine_config, engine.model_path, engine.spec.k_max,
                                 engine.cpu_binding, fresh=True)


def is_newest(engine: VllmEngine) -> bool:
    """Started last in this process: vLLM's metrics registry follows this engine."""
    return engine.serial == VllmEngine.engines_started


def counters(engine: VllmEngine) -> SpecCounters:
    """vLLM's own cumulative speculation counters (subtract two snapshots)."""
    if not is_newest(engine):
        raise RuntimeError("vLLM's metrics registry follows only the newest engine in this process; "
                           "read the counters of the engine started last")
    return read_spec_counters(engine.llm.get_metrics())


def step_cost_fit(engine: VllmEngine) -> tuple[dict[str, float] | None, list[StepSample]]:
    """The batch budget's step-cost model and the samples it holds now (calibration, then the
    most recent steps; those of its last refit unless new ones arrived since). specdec with
    its budget only."""
    if not engine.spec.budgeted:
        raise ConfigError(f"{engine.spec.method}: only specdec with its budget fits a step cost")
    model, rows = engine.llm.collective_rpc(_step_timer_state)[0]
    return model, [StepSample(*row) for row in rows]


def _step_timer_state(worker) -> tuple[dict[str, float] | None, list[list[float]]]:
    """In the worker: its drafter's step timer, as `step_cost_fit` returns it."""
    import numpy as np

    timer = vllm_proposer._drafter(worker).timer
    table = np.concatenate([timer._calibration, timer._recent])
    return vllm_proposer.step_cost(worker), table.tolist()
