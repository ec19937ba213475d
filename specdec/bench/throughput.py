"""Real-engine throughput, methods side by side in one run (`specdec bench --engine vllm`).

Every method gets its own engine (same model, same engine options), warmed up on prompts
that are not measured. The methods then alternate in rounds over the same prompts
(specdec/bench/rounds.py): a slow minute of a shared machine hits every method alike, and
the table gives medians and the spread over rounds. Engines stay alive through the rounds
where memory holds them all, else one runs at a time (specdec/bench/engine_memory.py).

Every measurement starts from the same state: vLLM's prefix cache is emptied, the prompts
go through the engine once with max_tokens=1 (timed apart, as prefill) so that every method
finds them in the prefix cache, then the cross-request draft cache is put back to cold (or to the `specdec[warm]`
snapshot) and only then does the decode clock start. Greedy outputs are compared with
`none`'s and the table says whether they are identical.

`engine_env` gives a method's engine environment variables of its own at start-up: with
`--gomp-spin-counts`, every method also runs on engines with other libgomp spin counts
(e.g. `none[gomp-spin=300000]`, libgomp's default), side by side with ours.

`specdec[no-drafts]` runs on `specdec`'s engine (its own where `specdec` is not measured)
with drafting switched off: the ratio of the two in a round is what drafting is worth on one
engine start, free of the start-to-start spread that a ratio to `none`'s engine carries.

Sampled workloads (`--temperature T --samples S`): every prompt runs as S requests, each with
its own seed (specdec/sampling_seeds.py), at temperature T; outputs then differ from method
to method (the engine's random stream depends on the drafts), so they are not compared. With
`--epochs E`, every measurement first generates epochs 1..E-1 (new samples of the same
prompts) on the same engine after the cold start, untimed, and then times epoch E: the
drafters keep what the earlier epochs taught them.

`specdec[warm]` measures the persisted-cache mode (what a nightly run gains from the cache
file the previous night saved): its engine first generates a disjoint set of prompts, which
saves the cache file, and every measurement then starts from a copy of that file.
"""

from __future__ import annotations

import contextlib
import dataclasses
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from specdec.bench.records import BenchRecord, Workload
from specdec.bench.rounds import NO_DRAFTS, UNRESETTABLE, Timing, engine_owner, schedule
from specdec.bench.step_breakdown import StepWindow
from specdec.bench.throughput_report import make_records
from specdec.config import EngineConfig, SpecConfig
from specdec.engines import cpu_threads
from specdec.types import GenerationRequest, GenerationResult, SamplingOptions

GREEDY = SamplingOptions(temperature=0.0)
DEFAULT_METHODS = ("none", "ngram", "ngram[2..5]", "suffix", "specdec")
WARM_CACHE_NAME = "warm-cache.npz"


def engine_methods(k: int, draft_model: str | None = None) -> dict[str, SpecConfig]:
    """The real-engine methods by bench name (`ngram` is vLLM's default 5..5 lookup)."""
    methods = {
        "none": SpecConfig(method="none", k_max=k),
        "ngram": SpecConfig(method="ngram", k_max=k, ngram_min=5, ngram_max=5),
        "ngram[2..5]": SpecConfig(method="ngram", k_max=k, ngram_min=2, ngram_max=5),
        "suffix": SpecConfig(method="suffix", k_max=k),
        "specdec": SpecConfig(method="specdec", k_max=k),
        "specdec[no-budget]": SpecConfig(method="specdec", k_max=k, budget=False),
        # Measured on specdec's engine (where specdec is measured too) with drafting off.
        "specdec[no-drafts]": SpecConfig(method="specdec", k_max=k),
        # The cache file lives in a folder of the bench's own (see run_rounds).
        "specdec[warm]": SpecConfig(method="specdec", k_max=k, cache_file=WARM_CACHE_NAME),
    }
    if draft_model:
        methods["draft"] = SpecConfig(method="draft", k_max=k, draft_model=draft_model)
    return methods


def prompts_for_batch(requests: Sequence[GenerationRequest], batch_size: int, min_prompts: int) -> Sequence[GenerationRequest]:
    """At least one full batch, and at least `min_prompts` (small batches need several rounds)."""
    return requests[: max(batch_size, min_prompts)]


class MethodEngine:
    """One method's engine over the rounds, and the cross-request cache state each of its
    measurements starts from."""

    def __init__(self, name: str, spec: SpecConfig, engine_cfg: EngineConfig, warmup: Sequence[GenerationRequest],
                 warm_from: Sequence[GenerationRequest], record_steps: bool = False,
                 env: dict[str, str] | None = None) -> None:
        if spec.cache_file and not warm_from:
            raise ValueError(f"{name}: the persisted-cache mode needs prompts to build its cache from")
        self.name, self.spec, self.engine_cfg = name, spec, engine_cfg
        self.warmup, self.warm_from = warmup, warm_from
        self.record_steps = record_steps
        self.env = env or {}  # environment variables its engines start with
        self.engine: Any = None
        self.drafting = True  # every engine starts drafting; switched only for an in-engine baseline
        self.measured = False  # since the engine started: an unresettable cache is then dirty
        self.snapshot = Path(spec.cache_file + ".saved") if spec.cache_file else None
        self.starts = 0

    def ready(self) -> Any:
        """The engine, started (again) where needed: vLLM's suffix cache cannot be cleared
        from outside, so such an engine is restarted after every measurement."""
        if self.engine is None or (self.measured and self.spec.method in UNRESETTABLE):
            self.close()
            from specdec.engines.vllm_engine import VllmEngine

            with cpu_threads.environment(self.env):
                self.engine = VllmEngine(self.engine_cfg, self.spec, record_steps=self.record_steps)
            self.drafting = True
            self.starts += 1
            self.engine.generate(self.warmup, GREEDY)
            if self.snapshot is not None and not self.snapshot.exists():
                _save_warm_cache(self.engine, self.spec.cache_file, self.warm_from, self.snapshot)
        return self.engine

    def set_drafting(self, enabled: bool) -> None:
        """Drafting on or off for the next measurement (one call to the engine, and only
        where it changes)."""
        if enabled != self.drafting:
            self.engine.set_drafting(enabled)
            self.drafting = enabled

    def start_cold(self) -> None:
        """Cross-request cache back to the start: cold, or the `specdec[warm]` snapshot (the
        engine rewrites its cache file after every call, so the saved copy is restored)."""
        if self.snapshot is not None:
            shutil.copyfile(self.snapshot, self.spec.cache_file)
        self.engine.reset_proposer()
        self.measured = True

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
    all_alive: bool,
    min_prompts: int,
    warm_from: Sequence[GenerationRequest] = (),
    progress: Callable[[str], None] = lambda _: None,
    step_windows: list[StepWindow] | None = None,
    engine_env: dict[str, dict[str, str]] | None = None,
    sampling: SamplingOptions = GREEDY,
    warmup_epochs: Sequence[Sequence[GenerationRequest]] = (),
    workload: Workload = Workload(),
) -> list[BenchRecord]:
    """Measure every method at every batch size in `rounds` interleaved rounds; one record
    per method and batch size (medians, and the spread of the ratio to `none`). With
    `step_windows`, the engines time their steps and every decode pass is appended there;
    `engine_env`: environment variables of a method's own for its engines' start.
    `requests` are generated with `sampling` (each request's own seed wins); with
    `warmup_epochs`, each measurement first generates those (the same prompts), untimed."""
    cfg = dataclasses.replace(engine_cfg, max_num_seqs=max(batch_sizes))
    timings: list[Timing] = []
    results: dict[tuple[str, int], list[GenerationResult]] = {}
    with contextlib.ExitStack() as stack:
        slots = {name: MethodEngine(name, stack.enter_context(_private_cache_file(spec)), cfg, warmup, warm_from,
                                    record_steps=step_windows is not None, env=(engine_env or {}).get(name))
                 for name, spec in methods.items() if engine_owner(name, list(methods)) == name}
        for slot in slots.values():
            stack.callback(slot.close)
        slots |= {name: slots[engine_owner(name, list(methods))] for name in methods}
        steps = schedule(list(methods), batch_sizes, rounds, all_alive)
        for i, step in enumerate(steps):
            if not all_alive:  # one engine at a time, each started afresh every round
                for other in set(slots.values()):
                    if other is not slots[step.method] or (i and steps[i - 1].round != step.round):
                        other.close()
            batch = prompts_for_batch(requests, step.batch_size, min_prompts)
            earlier = [prompts_for_batch(e, step.batch_size, min_prompts) for e in warmup_epochs]
            timing, out, window = measure(slots[step.method], batch, step.round, step.batch_size, step.method,
                                          sampling, earlier)
            timings.append(timing)
            if step_windows is not None and window is not None:
                step_windows.append(window)
            results.setdefault((step.method, step.batch_size), []).extend(out)
            progress(f"round {step.round + 1}/{rounds} {step.method} batch {step.batch_size}: "
                     f"decode {timing.decode_tokens_per_s:.1f} tokens/s, end to end {timing.tokens_per_s:.1f}")
            if step.method in UNRESETTABLE and not any(s.method == step.method for s in steps[i + 1:]):
                slots[step.method].close()
        for name, slot in slots.items():
            cost = slot.engine.step_cost() if slot.engine is not None and slot.name == name else None
            if cost is not None:
                progress(f"{name}: budget step cost {_format_cost(cost)}")
        starts = {name: slot.starts for name, slot in slots.items()}
    return make_records(methods, timings, results, dataset, all_alive, starts, len(warm_from), workload)


def measure(slot: MethodEngine, batch: Sequence[GenerationRequest], round_: int, batch_size: int, method: str,
            sampling: SamplingOptions = GREEDY, earlier_epochs: Sequence[Sequence[GenerationRequest]] = (),
            ) -> tuple[Timing, list[GenerationResult], StepWindow | None]:
    """`method` on `slot`'s engine: from an empty prefix cache, the prefill pass
    (max_tokens=1: every prompt then in the prefix cache), the cross-request cache back to
    its start, the earlier epochs (untimed: the drafter keeps what they leave), then the
    timed decode pass (and its steps, where the engine records them)."""
    engine = slot.ready()
    slot.set_drafting(method not in NO_DRAFTS)
    engine.reset_prefix_cache()  # else a second batch size or round would prefill for free
    started = time.perf_counter()
    engine.generate([dataclasses.replace(r, max_tokens=1) for r in batch], GREEDY, batch_size=batch_size)
    prefill_s = time.perf_counter() - started
    slot.start_cold()  # after the prefill pass: its one-token outputs must not be drafted from
    for epoch in earlier_epochs:
        engine.generate(epoch, sampling, batch_size=batch_size)
    if slot.record_steps:
        engine.take_step_records()  # the prefill pass's and earlier epochs' steps: not measured
    started = time.perf_counter()
    results = engine.generate(batch, sampling, batch_size=batch_size)
    ended = time.perf_counter()
    window = None
    if slot.record_steps:
        window = StepWindow(round_, method, batch_size, started, ended, len(batch),
                            tuple(engine.take_step_records()))
    tokens = sum(len(r.output_token_ids) for r in results)
    return Timing(round_, method, batch_size, tokens, prefill_s, ended - started), results, window


@contextlib.contextmanager
def _private_cache_file(spec: SpecConfig) -> Iterator[SpecConfig]:
    """`spec` with its cache file moved into a temporary folder of the bench's own."""
    if not spec.cache_file:
        yield spec
        return
    with tempfile.TemporaryDirectory(prefix="specdec-bench-") as folder:
        yield dataclasses.replace(spec, cache_file=str(Path(folder) / Path(spec.cache_file).name))


def _save_warm_cache(engine: Any, cache_file: str, warm_from: Sequence[GenerationRequest], snapshot: Path) -> None:
    """The previous night's run: generate `warm_from` from a cold cache; the engine saves
    the cache file, and a copy of it is what every measurement starts from."""
    Path(cache_file).unlink(missing_ok=True)
    engine.reset_proposer()
    engine.generate(warm_from, GREEDY)
    shutil.copyfile(cache_file, snapshot)


def _format_cost(cost: dict[str, float]) -> str:
    # Significant digits, not fixed decimals: the KV terms are microseconds per token.
    return ", ".join(f"{key} {value * 1000:.3g} ms" for key, value in cost.items())
