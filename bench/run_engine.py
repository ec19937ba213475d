"""`specdec bench-run`: many small shards through the real engine (started once) as one stream
and one shard at a time, in interleaved rounds; run throughput excludes engine start.
`--vs-none`: specdec against its drafting switched off on the same engine. The `long-first`
shape is the stream ordered by the history an untimed first run leaves in the cache file
(`stream` then runs in arrival order)."""

from __future__ import annotations

import argparse
import dataclasses
import statistics
from collections.abc import Callable, Sequence

from bench import engine_hooks
from bench.datasets import BUILTIN, load_rows
from bench.plots import table, write_outputs
from bench.throughput import Spread, Timing, ratio_spread, schedule
from specdec import engine_cache
from specdec.cli_options import add_model_options, model_from_args
from specdec.generate import ShardRows, generate_shards
from specdec.params import GenerationParams

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
    vs_none: Spread | None  # specdec / none in the same round and shape


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("bench-run", help="a run of many shards through the real engine: one stream against "
                                         "sequential shards")
    p.add_argument("--input", default="sharegpt", help=f"prompt Parquet file or folder, or {', '.join(BUILTIN)}")
    p.add_argument("--shards", type=int, default=8)
    p.add_argument("--shard-rows", type=int, default=8, help="prompts per shard")
    p.add_argument("--rounds", type=int, default=3, help="interleaved rounds (median and spread reported)")
    p.add_argument("--vs-none", action="store_true", help="also specdec with its drafting off, on the same engine")
    p.add_argument("--shapes", default="stream,sequential", help=f"worker shapes, of {', '.join(SHAPES)} "
                   "(long-first needs --cache-file: the untimed first run records the history there)")
    p.add_argument("--json", default=None, help="write the records here")
    add_model_options(p, GenerationParams, exclude=("stall_timeout_s", "long_first"))
    p.set_defaults(max_tokens=256, batch_size=16)  # the bench's own defaults (a shard's worth of varied answers)


def run(args: argparse.Namespace) -> int:
    params = model_from_args(GenerationParams, args)
    rows, dataset = load_rows(args.input, args.shards * args.shard_rows)
    shards = [ShardRows(f"shard-{i}", f"{dataset} shard {i}", rows[i * args.shard_rows : (i + 1) * args.shard_rows], [])
              for i in range(args.shards)]
    methods = [params.method, "none"] if args.vs_none and params.method == "specdec" else [params.method]
    try:
        timings = run_rounds(shards, params, methods, args.rounds, prepare_engine,
                             progress=lambda line: print(line, flush=True), shapes=args.shapes.split(","))
    finally:
        engine_cache.close_engines()
    records = make_records(timings, dataset, shards, params)
    print(render(records))
    write_outputs(records, args.json, None)
    return 0


def prepare_engine(params: GenerationParams, method: str) -> None:
    """The cached engine in a cold start's state (no prefix cache, cold drafter), drafting only for specdec."""
    engine, _ = engine_cache.get_engine(params)
    if engine.spec.method == "specdec":
        engine.set_drafting(method != "none")
    engine_hooks.reset_prefix_cache(engine)
    engine_hooks.reset_proposer(engine)


def measure(shards: Sequence[ShardRows], params: GenerationParams, shape: str = "stream") -> tuple[float, int]:
    """(wall seconds less engine start, output tokens) of one run; a failed shard fails it."""
    errors: list[BaseException] = []
    totals = generate_shards(shards, params.model_copy(update={"long_first": shape == "long-first"}),
                             params.config_hash(), params.recorded_config(),
                             lambda work, out, error: errors.append(error) if error else None,
                             sequential=shape == "sequential")
    if errors:
        raise errors[0]
    return totals.wall_s - totals.engine_start_s, totals.num_output_tokens


def run_rounds(shards: Sequence[ShardRows], params: GenerationParams, methods: Sequence[str], rounds: int,
               prepare: Callable[[GenerationParams, str], None], progress: Callable[[str], None] = lambda _: None,
               shapes: Sequence[str] = SHAPES[:2]) -> list[Timing]:
    """Every shape and method (`prepare` called before each) in each round, the order rotating, after
    an untimed warm-up run (engine start, first compiles; every shard for long-first, whose order comes from it)."""
    if unknown := set(shapes) - set(SHAPES):
        raise ValueError(f"unknown shape(s) {', '.join(sorted(unknown))}: choose from {', '.join(SHAPES)}")
    if "long-first" in shapes and not params.cache_file:
        raise ValueError("the long-first shape needs a cache file (--cache-file) to record the history in")
    prepare(params, methods[0])
    measure(shards if "long-first" in shapes else shards[:1], params)
    kinds = {f"{shape} {method}": (shape, method) for shape in shapes for method in methods}
    timings = []
    for round_, kind, _ in schedule(list(kinds), [params.batch_size], rounds):
        shape, method = kinds[kind]
        prepare(params, method)
        seconds, tokens = measure(shards, params, shape)
        timings.append(Timing(round_, method, params.batch_size, tokens, 0.0, seconds, shape))
        progress(f"round {round_ + 1}/{rounds} {shape} {method}: {tokens} tokens in {seconds:.1f} s, "
                 f"{tokens / seconds:.1f} tokens/s")
    return timings


def make_records(timings: Sequence[Timing], dataset: str, shards: Sequence[ShardRows],
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


def render(records: Sequence[RunBenchRecord]) -> str:
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
