"""Real-engine throughput, methods side by side in one run (`specdec bench --engine vllm`).

Every method gets its own engine (same model, same engine options), warmed up on prompts
that are not measured. The methods then alternate in rounds over the same prompts
(bench/rounds.py): a slow minute of a shared machine hits every method alike, and the table
gives medians and the spread over rounds. The engines stay alive through the rounds.

Every measurement starts from the same state: vLLM's prefix cache is emptied, the prompts go
through the engine once with max_tokens=1 (timed apart, as prefill) so that every method
finds them in the prefix cache, the cross-request draft cache is put back to cold, and only
then does the decode clock start. Greedy outputs are compared with `none`'s.

Sampled workloads (`--temperature T --samples S`): every prompt runs as S requests, each
with its own seed, at temperature T; outputs then differ from method to method (the engine's
random stream depends on the drafts), so they are not compared. With `--epochs E`, every
measurement first generates epochs 1..E-1 (new samples of the same prompts) after the cold
start, untimed, and then times epoch E: the drafters keep what the earlier epochs taught them.
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from collections.abc import Callable, Sequence
from typing import Any

from bench import engine_hooks
from bench.records import BenchRecord, Workload
from bench.rounds import UNRESETTABLE, Timing, schedule
from bench.throughput_report import make_records
from specdec.config import EngineConfig, SpecConfig
from specdec.types import GenerationRequest, GenerationResult, SamplingOptions

GREEDY = SamplingOptions(temperature=0.0)
DEFAULT_METHODS = ("none", "ngram", "ngram[2..5]", "suffix", "specdec")


def engine_methods(k: int, draft_model: str | None = None) -> dict[str, SpecConfig]:
    """The real-engine methods by bench name (`ngram` is vLLM's default 5..5 lookup)."""
    methods = {
        "none": SpecConfig(method="none", k_max=k),
        "ngram": SpecConfig(method="ngram", k_max=k, ngram_min=5, ngram_max=5),
        "ngram[2..5]": SpecConfig(method="ngram", k_max=k, ngram_min=2, ngram_max=5),
        "suffix": SpecConfig(method="suffix", k_max=k),
        "specdec": SpecConfig(method="specdec", k_max=k),
        "specdec[no-budget]": SpecConfig(method="specdec", k_max=k, budget=False),
    }
    if draft_model:
        methods["draft"] = SpecConfig(method="draft", k_max=k, draft_model=draft_model)
    return methods


def prompts_for_batch(requests: Sequence[GenerationRequest], batch_size: int, min_prompts: int) -> Sequence[GenerationRequest]:
    """At least one full batch, and at least `min_prompts` (small batches need several rounds)."""
    return requests[: max(batch_size, min_prompts)]


class MethodEngine:
    """One method's engine over the rounds: started where needed, warmed up on other prompts."""

    def __init__(self, spec: SpecConfig, engine_cfg: EngineConfig, warmup: Sequence[GenerationRequest]) -> None:
        self.spec, self.engine_cfg, self.warmup = spec, engine_cfg, warmup
        self.engine: Any = None
        self.measured = False  # since the engine started: an unresettable cache is then dirty
        self.starts = 0

    def ready(self) -> Any:
        """The engine, started (again) where needed: vLLM's suffix cache cannot be cleared
        from outside, so such an engine is restarted after every measurement."""
        if self.engine is None or (self.measured and self.spec.method in UNRESETTABLE):
            self.close()
            from specdec.engines.vllm_engine import VllmEngine

            self.engine = VllmEngine(self.engine_cfg, self.spec)
            self.starts += 1
            self.engine.generate(self.warmup, GREEDY)
        return self.engine

    def close(self) -> None:
        if self.engine is not None:
            self.engine.close()
            self.engine = None
            self.measured = False


def run_rounds(
    methods: dict[str, SpecConfig],
    engine_cfg: EngineConfig,
    requests: Sequence[GenerationRequest],
    warmup: Sequence[GenerationRequest],
    batch_sizes: Sequence[int],
    rounds: int,
    dataset: str,
    min_prompts: int,
    progress: Callable[[str], None] = lambda _: None,
    sampling: SamplingOptions = GREEDY,
    warmup_epochs: Sequence[Sequence[GenerationRequest]] = (),
    workload: Workload = Workload(),
) -> list[BenchRecord]:
    """Measure every method at every batch size in `rounds` interleaved rounds; one record
    per method and batch size (medians, and the spread of the ratio to `none`). `requests`
    are generated with `sampling` (each request's own seed wins); with `warmup_epochs`, each
    measurement first generates those (the same prompts), untimed."""
    cfg = dataclasses.replace(engine_cfg, max_num_seqs=max(batch_sizes))
    timings: list[Timing] = []
    results: dict[tuple[str, int], list[GenerationResult]] = {}
    with contextlib.ExitStack() as stack:
        slots = {name: MethodEngine(spec, cfg, warmup) for name, spec in methods.items()}
        for slot in slots.values():
            stack.callback(slot.close)
        steps = schedule(list(methods), batch_sizes, rounds)
        for i, step in enumerate(steps):
            batch = prompts_for_batch(requests, step.batch_size, min_prompts)
            earlier = [prompts_for_batch(e, step.batch_size, min_prompts) for e in warmup_epochs]
            timing, out = measure(slots[step.method], batch, step.round, step.batch_size, step.method,
                                  sampling, earlier)
            timings.append(timing)
            results.setdefault((step.method, step.batch_size), []).extend(out)
            progress(f"round {step.round + 1}/{rounds} {step.method} batch {step.batch_size}: "
                     f"decode {timing.decode_tokens_per_s:.1f} tokens/s, end to end {timing.tokens_per_s:.1f}")
            if step.method in UNRESETTABLE and not any(s.method == step.method for s in steps[i + 1:]):
                slots[step.method].close()
        for name, slot in slots.items():
            cost = slot.engine.step_cost() if slot.engine is not None else None
            if cost is not None:
                progress(f"{name}: budget step cost {_format_cost(cost)}")
        starts = {name: slot.starts for name, slot in slots.items()}
    return make_records(methods, timings, results, dataset, starts, workload)


def measure(slot: MethodEngine, batch: Sequence[GenerationRequest], round_: int, batch_size: int, method: str,
            sampling: SamplingOptions = GREEDY, earlier_epochs: Sequence[Sequence[GenerationRequest]] = (),
            ) -> tuple[Timing, list[GenerationResult]]:
    """`method` on `slot`'s engine: from an empty prefix cache, the prefill pass
    (max_tokens=1: every prompt then in the prefix cache), the cross-request cache back to
    cold, the earlier epochs (untimed: the drafter keeps what they leave), then the timed
    decode pass."""
    engine = slot.ready()
    engine_hooks.reset_prefix_cache(engine)  # else a second batch size or round would prefill for free
    started = time.perf_counter()
    engine.generate([dataclasses.replace(r, max_tokens=1) for r in batch], GREEDY, batch_size=batch_size)
    prefill_s = time.perf_counter() - started
    engine_hooks.reset_proposer(engine)  # after the prefill pass: its one-token outputs must not be drafted from
    slot.measured = True
    for epoch in earlier_epochs:
        engine.generate(epoch, sampling, batch_size=batch_size)
    started = time.perf_counter()
    results = engine.generate(batch, sampling, batch_size=batch_size)
    ended = time.perf_counter()
    tokens = sum(len(r.output_token_ids) for r in results)
    return Timing(round_, method, batch_size, tokens, prefill_s, ended - started), results


def _format_cost(cost: dict[str, float]) -> str:
    # Significant digits, not fixed decimals: the KV terms are microseconds per token.
    return ", ".join(f"{key} {value * 1000:.3g} ms" for key, value in cost.items())
