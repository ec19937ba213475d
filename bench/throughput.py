"""The real engine in interleaved rounds, the order rotating, ratios pairing runs of the same round. `specdec bench
--engine vllm`: throughput per method and batch size over the same prompts, each measurement: prefix cache emptied,
a timed max_tokens=1 prefill pass, the draft cache cold, earlier epochs untimed, then the timed decode pass (a
`BenchRecord` per method and batch size). `specdec bench-run`: many small shards as one stream and one shard at a
time, engine starts excluded; `--vs`: see prepare_engine; `long-first`: by the history in the cache file."""

from __future__ import annotations

import argparse
import dataclasses
import math
import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any

from bench import engine_hooks
from bench.datasets import BUILTIN, load_rows
from bench.plots import MethodRecord, table, write_outputs
from bench.reference import Workload
from specdec import engine_cache
from specdec.cli_options import add_model_options, model_from_args
from specdec.config import EngineConfig, SpecConfig
from specdec.generate import ShardRows, generate_shards
from specdec.params import GenerationParams
from specdec.stats import ShardStats
from specdec.types import GenerationRequest, GenerationResult, SamplingOptions

GREEDY = SamplingOptions(temperature=0.0)
DEFAULT_METHODS = ("none", "ngram", "ngram[2..5]", "suffix", "specdec")
REFERENCE = "none"
# Methods whose cross-request state lives inside vLLM, out of our reach: a fresh engine for
# every measurement is the only way to start each one cold.
UNRESETTABLE = frozenset({"suffix"})


def schedule(methods: Sequence[str], batch_sizes: Sequence[int], rounds: int) -> list[tuple[int, str, int]]:
    """(round from 0, method, batch size): each method at each batch size per round, the order rotating."""
    if rounds < 1:
        raise ValueError(f"rounds must be at least 1, not {rounds}")
    return [(r, m, b) for r in range(rounds) for b in batch_sizes
            for m in [*methods[r % len(methods):], *methods[:r % len(methods)]]]


@dataclasses.dataclass(frozen=True)
class Timing:
    round: int
    method: str
    batch_size: int
    num_output_tokens: int
    prefill_s: float  # the max_tokens=1 pass before the clock (none in bench-run)
    decode_s: float  # every prompt already in the prefix cache (bench-run: the run's wall time)
    shape: str = ""  # bench-run: the worker's shape

    @property
    def decode_tokens_per_s(self) -> float:
        return self.num_output_tokens / self.decode_s

    @property
    def tokens_per_s(self) -> float:  # end to end
        return self.num_output_tokens / (self.prefill_s + self.decode_s)


@dataclasses.dataclass(frozen=True)
class Spread:
    median: float
    low: float
    high: float

    @classmethod
    def of(cls, values: Sequence[float]) -> "Spread":
        return cls(statistics.median(values), min(values), max(values))

    def span(self, digits: int = 2) -> str:
        return f"{self.low:.{digits}f}-{self.high:.{digits}f}"


def summarize(timings: Sequence[Timing], key: tuple[str, int]) -> dict[str, Any]:
    """One method and batch size's medians; the ratios pair each round with `none`'s in the same round."""
    runs = [t for t in timings if (t.method, t.batch_size) == key]
    none = [t for t in timings if (t.method, t.batch_size) == (REFERENCE, key[1])]
    return dict(rounds=len(runs), tokens_per_s=statistics.median(t.tokens_per_s for t in runs),
                seconds=statistics.median(t.prefill_s + t.decode_s for t in runs),
                decode_tokens_per_s=statistics.median(t.decode_tokens_per_s for t in runs),
                prefill_seconds=statistics.median(t.prefill_s for t in runs),
                speedup_vs_none=ratio_spread(runs, none, lambda t: t.tokens_per_s),
                decode_speedup_vs_none=ratio_spread(runs, none, lambda t: t.decode_tokens_per_s))


def ratio_spread(runs: Sequence[Any], others: Sequence[Any], rate: Callable[[Any], float]) -> Spread | None:
    """`rate` of each run over the other's in the same round (`.round`); None when no round pairs."""
    base = {t.round: rate(t) for t in others}
    return Spread.of(ratios) if (ratios := [rate(t) / base[t.round] for t in runs if t.round in base]) else None


@dataclasses.dataclass(frozen=True)
class BenchRecord(MethodRecord):  # tokens_per_s: the median over the rounds
    rounds: int
    seconds: float
    decode_tokens_per_s: float
    prefill_seconds: float
    speedup_vs_none: Spread | None  # to none in the same round (None without none)
    decode_speedup_vs_none: Spread | None


def engine_methods(k: int, draft_model: str | None = None) -> dict[str, SpecConfig]:
    """The real-engine methods by bench name (`ngram` is vLLM's default 5..5 lookup)."""
    return {
        "none": SpecConfig(method="none", k_max=k),
        "ngram": SpecConfig(method="ngram", k_max=k, ngram_min=5, ngram_max=5),
        "ngram[2..5]": SpecConfig(method="ngram", k_max=k, ngram_min=2, ngram_max=5),
        "suffix": SpecConfig(method="suffix", k_max=k),
        "specdec": SpecConfig(method="specdec", k_max=k),
        "specdec[no-budget]": SpecConfig(method="specdec", k_max=k, budget=False),
        **({"draft": SpecConfig(method="draft", k_max=k, draft_model=draft_model)} if draft_model else {}),
    }


class MethodEngine:
    """One method's engine over the rounds, warmed up (restarted where its draft cache cannot be cleared)."""

    def __init__(self, spec: SpecConfig, engine_cfg: EngineConfig, warmup: Sequence[GenerationRequest]) -> None:
        self.spec, self.engine_cfg, self.warmup = spec, engine_cfg, warmup
        self.engine: Any = None
        self.measured = False  # since the engine started: an unresettable cache is then dirty
        self.starts = 0

    def ready(self) -> Any:
        if self.engine is None or (self.measured and self.spec.method in UNRESETTABLE):
            self.close()
            from specdec.engines.vllm_engine import VllmEngine

            self.engine = VllmEngine(self.engine_cfg, self.spec)
            self.starts += 1
            engine_hooks.run_batches(self.engine, self.warmup, GREEDY)
        return self.engine

    def close(self) -> None:
        if self.engine is not None:
            self.engine.close()
            self.engine, self.measured = None, False


def run_rounds(methods: dict[str, SpecConfig], engine_cfg: EngineConfig, epochs: Sequence[Sequence[GenerationRequest]],
               warmup: Sequence[GenerationRequest], batch_sizes: Sequence[int], rounds: int, dataset: str,
               min_prompts: int, workload: Workload = Workload(),
               progress: Callable[[str], None] = lambda _: None) -> list[BenchRecord]:
    """One record per method and batch size; `epochs`: the requests per epoch, the last
    measured, its first max(batch size, `min_prompts`) at each batch size."""
    cfg = dataclasses.replace(engine_cfg, max_num_seqs=max(batch_sizes))
    timings: list[Timing] = []
    results: dict[tuple[str, int], list[GenerationResult]] = {}
    slots = {name: MethodEngine(spec, cfg, warmup) for name, spec in methods.items()}
    try:
        steps = schedule(list(methods), batch_sizes, rounds)
        for i, (round_, method, batch_size) in enumerate(steps):
            timing, out = measure(slots[method], [e[: max(batch_size, min_prompts)] for e in epochs], round_,
                                  batch_size, method, workload.sampling)
            timings.append(timing)
            results.setdefault((method, batch_size), []).extend(out)
            progress(f"round {round_ + 1}/{rounds} {method} batch {batch_size}: "
                     f"decode {timing.decode_tokens_per_s:.1f} tokens/s, end to end {timing.tokens_per_s:.1f}")
            if method in UNRESETTABLE and all(m != method for _, m, _ in steps[i + 1:]):
                slots[method].close()
        for name, slot in slots.items():
            cost = slot.engine.step_cost() if slot.engine is not None else None
            if cost is not None:  # significant digits: the KV terms are microseconds per token
                progress(f"{name}: budget step cost " + ", ".join(f"{k} {v * 1000:.3g} ms" for k, v in cost.items()))
        starts = {name: slot.starts for name, slot in slots.items()}
    finally:
        for slot in slots.values():
            slot.close()
    return make_records(methods, timings, results, dataset, starts, workload)


def measure(slot: MethodEngine, epochs: Sequence[Sequence[GenerationRequest]], round_: int, batch_size: int,
            method: str, sampling: SamplingOptions = GREEDY) -> tuple[Timing, list[GenerationResult]]:
    """`method` on `slot`'s engine, as the module docstring says."""
    engine = slot.ready()
    engine_hooks.reset_prefix_cache(engine)  # else a second batch size or round would prefill for free
    batch = epochs[-1]
    started = time.perf_counter()
    engine_hooks.run_batches(engine, [dataclasses.replace(r, max_tokens=1) for r in batch], GREEDY, batch_size)
    prefill_s = time.perf_counter() - started
    engine_hooks.reset_proposer(engine)  # after the prefill pass: its one-token outputs must not be drafted from
    slot.measured = True
    for epoch in epochs[:-1]:
        engine_hooks.run_batches(engine, epoch, sampling, batch_size)
    started = time.perf_counter()
    results = engine_hooks.run_batches(engine, batch, sampling, batch_size)
    tokens = sum(len(r.output_token_ids) for r in results)
    return Timing(round_, method, batch_size, tokens, prefill_s, time.perf_counter() - started), results


def make_records(methods: dict[str, SpecConfig], timings: Sequence[Timing],
                 results: dict[tuple[str, int], list[GenerationResult]], dataset: str, starts: dict[str, int],
                 workload: Workload = Workload()) -> list[BenchRecord]:
    records = []
    for key in dict.fromkeys((t.method, t.batch_size) for t in timings):
        spec, runs, medians = methods[key[0]], results[key], summarize(timings, key)
        kept = "a fresh engine per measurement" if spec.method in UNRESETTABLE else "one engine kept alive"
        epochs = f"; epochs 1-{workload.epochs - 1} generated before the clock" if workload.epochs > 1 else ""
        total = ShardStats.aggregate(r.stats for r in runs)
        reference = results.get((REFERENCE, key[1]))
        none = {(r.id, r.sample): r.output_token_ids for r in reference or ()}
        records.append(BenchRecord(
            method=key[0], engine="vllm", dataset=dataset, batch_size=key[1], k_max=spec.k_max,
            num_requests=len(runs) // medians["rounds"], tokens_per_forward=total.tokens_per_forward,
            acceptance_rate=total.acceptance_rate, accepted_per_pos=total.accepted_per_pos,
            num_output_tokens=total.num_output_tokens,
            outputs_identical_to_none=None if workload.sampled or reference is None else all(
                none.get((r.id, r.sample)) == r.output_token_ids for r in runs),
            started_from=(f"{medians['rounds']} interleaved rounds, {kept} ({starts[key[0]]} started), warmed up on "
                          f"other prompts; prompts prefilled before the clock; cold cross-request cache{epochs}"),
            **medians, **workload.record_fields()))
    return records


def render_table(records: Sequence[BenchRecord]) -> str:
    columns = [("method", f"<{max([20] + [len(r.method) + 2 for r in records])}"), ("batch", ">6"),
               ("decode/s", ">10.1f"), ("x none", ">8.2f"), ("min-max", ">12"), ("e2e/s", ">9.1f"), ("x none", ">8.2f"),
               ("min-max", ">12"), ("tok/fwd", ">9.2f"), ("accept", ">8.2f"), ("  identical", "")]
    lines = table(columns, [(
        r.method, r.batch_size, r.decode_tokens_per_s, *_ratio(r.decode_speedup_vs_none), r.tokens_per_s,
        *_ratio(r.speedup_vs_none), r.tokens_per_forward, r.acceptance_rate,
        "  " + {None: "-", True: "yes", False: "NO"}[r.outputs_identical_to_none]) for r in records])
    rounds = "/".join(sorted({str(r.rounds) for r in records}))
    lines.append(f"medians over {rounds} interleaved round(s); ratios to none in the same round; "
                 "decode: prompts already prefilled")
    return "\n".join(lines)


def _ratio(spread: Spread | None) -> tuple[float | None, str | None]:
    return (None, None) if spread is None else (spread.median, spread.span())


SHAPES = ("stream", "sequential", "long-first")


@dataclasses.dataclass(frozen=True)
class RunBenchRecord:
    shape: str
    method: str
    engine: str  # vllm-run
    dataset: str
    shards: int
    shard_rows: int
    max_tokens: int
    batch_size: int
    rounds: int
    num_output_tokens: int  # median over rounds
    seconds: float  # median
    tokens_per_s: Spread  # median and spread over the rounds
    vs_sequential: Spread | None  # stream / sequential in the same round
    vs_stream: Spread | None  # long-first / stream in the same round
    vs_none: Spread | None  # specdec or auto / none in the same round and shape


def add_run_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("bench-run", help="a run of many shards through the real engine, as a stream or shard by shard")
    p.add_argument("--input", default="sharegpt", help=f"prompt Parquet file or folder, or {', '.join(BUILTIN)}; "
                   "comma-separated: each its own kind of shard (auto pilots each)")
    p.add_argument("--shards", type=int, default=8)
    p.add_argument("--shard-rows", type=int, default=8, help="prompts per shard")
    p.add_argument("--rounds", type=int, default=3, help="interleaved rounds (median and spread reported)")
    p.add_argument("--vs", default="", help="also these methods, comma-separated, e.g. none (for specdec: its engine "
                   "with drafting off; for auto: a speculation-free engine)")
    p.add_argument("--shapes", default="stream,sequential", help=f"worker shapes, of {', '.join(SHAPES)} "
                   "(long-first needs --cache-file: the untimed first run records the history there)")
    p.add_argument("--json", default=None, help="write the records here")
    add_model_options(p, GenerationParams, exclude=("stall_timeout_s", "long_first"))
    p.set_defaults(max_tokens=256, batch_size=16)  # the bench's own defaults (a shard's worth of varied answers)


def run_bench_run(args: argparse.Namespace) -> int:
    params = model_from_args(GenerationParams, args)
    inputs, r = args.input.split(","), args.shard_rows  # each input a kind of shard, --shards split between them
    n, shards = args.shards // len(inputs), []
    for rows, name in (load_rows(kind, n * r) for kind in inputs):
        num_shards = math.ceil(len(rows) / r)
        if num_shards < n:  # said, not left as empty shards: the run is smaller than asked
            print(f"{name}: {len(rows)} rows, fewer than {n} shards x {r}: {num_shards} shards")
        shards += [ShardRows(f"{name}-{i}", f"{name} shard {i}", rows[i * r:(i + 1) * r], [], kind=name)
                   for i in range(num_shards)]
    dataset = "+".join(dict.fromkeys(s.kind for s in shards))
    methods = [params.method, *(method for method in args.vs.split(",") if method)]
    try:
        timings = run_shard_rounds(shards, params, methods, args.rounds, prepare_engine,
                             progress=lambda line: print(line, flush=True), shapes=args.shapes.split(","))
    finally:
        engine_cache.close_engines()
    records = make_run_records(timings, dataset, shards, params)
    print(render_runs(records))
    write_outputs(records, args.json, None)
    return 0


def prepare_engine(params: GenerationParams, method: str) -> None:
    """Cached engines cold (no prefix cache, cold drafter); specdec's `none`: its engine with drafting
    off; auto's: a speculation-free engine (auto's pilot starts what else it needs)."""
    if params.method != "auto" or method == "none":
        engine_cache.get_engine(params.model_copy(update={"method": method}), exact=params.method == "auto")
    for engine in engine_cache.engines():
        engine_hooks.reset_prefix_cache(engine)
        engine_hooks.reset_proposer(engine)


def measure_run(shards: Sequence[ShardRows], params: GenerationParams, shape: str = "stream",
                on_decision: Callable[[Any], None] = lambda _: None) -> tuple[float, int]:
    """(wall seconds less engine starts, output tokens) of one run; a failed shard fails it."""
    errors: list[BaseException] = []
    totals = generate_shards(shards, params.model_copy(update={"long_first": shape == "long-first"}),
                             params.config_hash(), params.recorded_config(),
                             lambda work, out, error: errors.append(error) if error else None,
                             sequential=shape == "sequential", on_decision=on_decision)
    if errors:
        raise errors[0]
    return totals.wall_s - totals.engine_start_s, totals.num_output_tokens


def run_shard_rounds(shards: Sequence[ShardRows], params: GenerationParams, methods: Sequence[str], rounds: int,
               prepare: Callable[[GenerationParams, str], None], progress: Callable[[str], None] = lambda _: None,
               shapes: Sequence[str] = SHAPES[:2]) -> list[Timing]:
    """Each shape and method (`prepare` called before each) per round, the order rotating, after an untimed
    warm-up run per method (engine start, first compiles: the first round's first run would pay them alone;
    every shard for long-first, whose order comes from it)."""
    if unknown := set(shapes) - set(SHAPES):
        raise ValueError(f"unknown shape(s) {', '.join(sorted(unknown))}: choose from {', '.join(SHAPES)}")
    if "long-first" in shapes and not params.cache_file:
        raise ValueError("the long-first shape needs a cache file (--cache-file) to record the history in")
    for i, method in enumerate(methods):
        prepare(params, method)
        warmup = shards if "long-first" in shapes and i == 0 else shards[:1]
        measure_run(warmup, params.model_copy(update={"method": method}))
    kinds = {f"{shape} {method}": (shape, method) for shape in shapes for method in methods}
    timings = []
    for round_, kind, _ in schedule(list(kinds), [params.batch_size], rounds):
        shape, method = kinds[kind]
        prepare(params, method)
        # each run asks for its own method: the engine cache switches a specdec engine's drafting to match
        seconds, tokens = measure_run(shards, params.model_copy(update={"method": method}), shape,
                                      lambda decision: progress(f"  {decision.reason}"))
        timings.append(Timing(round_, method, params.batch_size, tokens, 0.0, seconds, shape))
        progress(f"round {round_ + 1}/{rounds} {shape} {method}: {tokens} tokens in {seconds:.1f} s, "
                 f"{tokens / seconds:.1f} tokens/s")
    return timings


def make_run_records(timings: Sequence[Timing], dataset: str, shards: Sequence[ShardRows],
                 params: GenerationParams) -> list[RunBenchRecord]:
    """One record per shape and method; ratios pair runs of the same round."""
    records = []
    for shape, method in dict.fromkeys((t.shape, t.method) for t in timings):
        runs = [t for t in timings if (t.shape, t.method) == (shape, method)]
        def paired(other: tuple[str, str]) -> Spread | None:  # None for itself or an absent one
            others = [t for t in timings if (t.shape, t.method) == other != (shape, method)]
            return ratio_spread(runs, others, lambda t: t.tokens_per_s)

        records.append(RunBenchRecord(
            shape, method, "vllm-run", dataset, len(shards), max(len(s.rows) for s in shards), params.max_tokens,
            params.batch_size, len(runs), int(statistics.median(t.num_output_tokens for t in runs)),
            statistics.median(t.decode_s for t in runs), Spread.of([t.tokens_per_s for t in runs]),
            paired(("sequential", method)), paired(("stream", method)) if shape == "long-first" else None,
            paired((shape, "none"))))
    return records


def render_runs(records: Sequence[RunBenchRecord]) -> str:
    columns = [("shape", "<12"), ("method", "<10"), ("tokens/s", ">10.1f"), ("min-max", ">16"), ("x sequential", ">20"),
               ("x stream", ">20"), ("x none", ">8.2f")]
    lines = table(columns, [(r.shape, r.method, r.tokens_per_s.median, r.tokens_per_s.span(1),
                             *(x and f"{x.median:.2f} ({x.span()})" for x in (r.vs_sequential, r.vs_stream)),
                             r.vs_none and r.vs_none.median) for r in records])
    first = records[0]
    lines.append(f"{first.dataset}: {first.shards} shards x {first.shard_rows} prompts, max tokens {first.max_tokens}, "
                 f"{first.batch_size} rows at once; medians over {first.rounds} interleaved round(s), engine start "
                 "excluded; ratios within a round")
    return "\n".join(lines)
