"""Checks a projection against what can be measured: the real CPU engine on the same prompts
(`specdec bench --engine replay --cost cpu-calibrated --check-engine`).

Rounds, interleaved: every round runs every method at every batch size, so that a slow spell
of the machine hits all of them alike; the medians are compared with the projection. Each
method gets a fresh engine in every round (the same options; specdec calibrates at start-up
on random prompts, never the checked ones, and the calibration is cached), warmed up on
prompts that are not measured; one engine at a time, so the check fits beside other work in
the machine's memory.
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
    progress: Callable[[str], None] = lambda _: None,
) -> list[Measured]:
    from specdec.engines.vllm_engine import VllmEngine

    check_batch_sizes(batch_sizes)
    cfg = dataclasses.replace(engine_cfg, max_num_seqs=max(batch_sizes))
    rates: dict[tuple[str, int], list[float]] = {(n, b): [] for n in methods for b in batch_sizes}
    for round_ in range(rounds):
        for name, spec in methods.items():
            progress(f"check round {round_ + 1}: starting the {name} engine")
            engine = VllmEngine(cfg, spec)
            try:
                engine.generate(warmup, GREEDY)
                for batch_size in batch_sizes:
                    rate = _tokens_per_s(engine, requests, batch_size)
                    rates[(name, batch_size)].append(rate)
                    progress(f"check round {round_ + 1}: {name} batch {batch_size}: {rate:.1f} tokens/s")
            finally:
                engine.close()
    return [Measured(n, b, r) for (n, b), r in rates.items()]


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
