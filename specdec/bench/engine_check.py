"""Checks a projection against what can be measured: the real CPU engine on the same prompts
(`specdec bench --engine replay --cost cpu-calibrated --check-engine`).

Rounds, interleaved: every round runs every method at every batch size, so that a slow spell
of the machine hits all of them alike; the medians are compared with the projection. Each
method gets a fresh engine in every round (the same options; specdec calibrates at start-up
on random prompts, never the checked ones, and the calibration is cached), warmed up on
prompts that are not measured; one engine at a time, so the check fits beside other work in
the machine's memory.
With `calibrate_k`, every round also measures the budget's start-up calibration again
(in the round's specdec engine, or in one started for it): `cpu-calibrated` is then fitted
to the calibrations of the check's own rounds, so that it prices the machine as it ran
during the check, not as it ran when the cached calibration was written (on a machine
shared with other work that can be a third faster or slower).
Batching as the simulator does it: at batch 1 one request at a time; at the engine's
`max_num_seqs` all requests at once, vLLM keeping that many running and starting the next
when one finishes.
"""

from __future__ import annotations

import dataclasses
import statistics
import time
from collections.abc import Callable, Sequence

from specdec.bench.records import ProjectionRecord
from specdec.budget import PrefillSample, StepSample
from specdec.config import ConfigError, EngineConfig, SpecConfig
from specdec.types import GenerationRequest, SamplingOptions

GREEDY = SamplingOptions(temperature=0.0)


@dataclasses.dataclass(frozen=True)
class Measured:
    method: str
    batch_size: int
    tokens_per_s: list[float]  # one per round

    @property
    def median(self) -> float:
        return statistics.median(self.tokens_per_s)


@dataclasses.dataclass
class CheckRun:
    measured: list[Measured]
    calibration_steps: list[StepSample]  # every round's calibration (with `calibrate_k`)
    calibration_prefills: list[PrefillSample]


def check_batch_sizes(batch_sizes: Sequence[int]) -> None:
    """The engine reproduces the simulator's batching at 1 and at its max_num_seqs only."""
    extra = sorted(set(batch_sizes) - {1, max(batch_sizes)})
    if extra:
        raise ConfigError(f"--check-engine measures batch 1 and one larger batch size; not {extra}")


def measure(
    methods: dict[str, SpecConfig],
    engine_cfg: EngineConfig,
    requests: Sequence[GenerationRequest],
    warmup: Sequence[GenerationRequest],
    batch_sizes: Sequence[int],
    rounds: int,
    calibrate_k: int | None = None,
    progress: Callable[[str], None] = lambda _: None,
) -> CheckRun:
    from specdec.engines.vllm_engine import VllmEngine

    check_batch_sizes(batch_sizes)
    cfg = dataclasses.replace(engine_cfg, max_num_seqs=max(batch_sizes))
    rates: dict[tuple[str, int], list[float]] = {(n, b): [] for n in methods for b in batch_sizes}
    run = CheckRun([], [], [])
    calibrating = next((n for n, s in methods.items() if s.budgeted), None)

    def recalibrate(engine: VllmEngine, round_: int) -> None:
        progress(f"check round {round_ + 1}: measuring the calibration again")
        steps, prefills = engine.recalibrate()
        run.calibration_steps += steps
        run.calibration_prefills += prefills

    for round_ in range(rounds):
        if calibrate_k is not None and calibrating is None:
            engine = VllmEngine(cfg, SpecConfig(method="specdec", k_max=calibrate_k))
            try:
                recalibrate(engine, round_)
            finally:
                engine.close()
        for name, spec in methods.items():
            progress(f"check round {round_ + 1}: starting the {name} engine")
            engine = VllmEngine(cfg, spec)
            try:
                if calibrate_k is not None and name == calibrating:
                    recalibrate(engine, round_)
                engine.generate(warmup, GREEDY)
                for batch_size in batch_sizes:
                    rate = _tokens_per_s(engine, requests, batch_size)
                    rates[(name, batch_size)].append(rate)
                    progress(f"check round {round_ + 1}: {name} batch {batch_size}: {rate:.1f} tokens/s")
            finally:
                engine.close()
    run.measured = [Measured(n, b, r) for (n, b), r in rates.items()]
    return run


def _tokens_per_s(engine, requests: Sequence[GenerationRequest], batch_size: int) -> float:
    engine.reset_proposer()  # a cold cross-request cache, as in the replay
    engine.reset_prefix_cache()  # the simulator prefills every prompt: no batch size finds them cached
    started = time.perf_counter()
    if batch_size == 1:
        results = [r for req in requests for r in engine.generate([req], GREEDY)]
    else:
        results = engine.generate(requests, GREEDY)
    seconds = time.perf_counter() - started
    return sum(len(r.output_token_ids) for r in results) / seconds


def render_check(projected: Sequence[ProjectionRecord], measured: Sequence[Measured]) -> str:
    """Projection (end to end) and engine (median, min-max of the rounds) side by side."""
    shown = {(r.method, r.batch_size): r for r in projected if r.best_k}
    header = f"{'method':<14}{'batch':>6}{'projected':>11}{'engine':>9}{'min-max':>16}{'proj/eng':>10}"
    lines = [f"projection ({projected[0].cost_model}) vs the real engine, tokens/s end to end, "
             f"{len(measured[0].tokens_per_s)} interleaved rounds", header, "-" * len(header)]
    for m in measured:
        p = shown.get((m.method, m.batch_size))
        proj = p.projected_tokens_per_s if p else float("nan")
        lines.append(f"{m.method:<14}{m.batch_size:>6}{proj:>11.1f}{m.median:>9.1f}"
                     f"{min(m.tokens_per_s):>8.1f}-{max(m.tokens_per_s):<7.1f}{proj / m.median:>10.3f}")
    return "\n".join(lines)
