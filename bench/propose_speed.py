"""`specdec bench-propose`: drafting cost per request per step, methods side by side on the
same synthetic buffers and cross-request cache, over a grid (batch x context x cache tokens),
in repeats whose method order rotates; the median over repeats (process CPU time by default)."""

from __future__ import annotations

import argparse
import dataclasses
import json
import time
from collections.abc import Callable, Sequence

import numpy as np

from bench.propose_methods import METHODS, finished_requests, make_runner, request_buffer, share_prompts
from bench.suffix_baseline import arctic_available
from specdec.step_cost import REFIT_EVERY, REFIT_ROWS

CLOCKS: dict[str, Callable[[], float]] = {"cpu": time.process_time, "wall": time.perf_counter}


@dataclasses.dataclass(frozen=True)
class PointResult:
    method: str
    batch_size: int
    context: int
    cache_tokens: int
    us_per_request_step: float  # median over repeats
    spread: float  # max - min over repeats
    repeats: int
    steps: int
    drafted_per_request_step: float


def _ints(text: str) -> list[int]:
    return [int(float(x)) for x in text.split(",")]


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("bench-propose", help="time drafting per request per step, methods side by side")
    p.add_argument("--batch-sizes", default="1,64,256", help="requests per step")
    p.add_argument("--contexts", default="1024,8192", help="prompt tokens per request")
    p.add_argument("--cache-tokens", default="0,1000000", help="tokens of finished requests in the cache")
    p.add_argument("--methods", default=None, help=f"comma list of {', '.join(METHODS)} (default: all available)")
    p.add_argument("--k", type=int, default=4, help="draft tokens asked for per request")
    p.add_argument("--rows-per-prompt", type=int, default=8,
                   help="rows sharing one prompt (1: every row its own prompt); specdec's drafters are told "
                        "the prompt lengths")
    p.add_argument("--steps", type=int, default=REFIT_EVERY,
                   help="engine steps per method per repeat (at least; the default holds one of the "
                        "step timer's refits, so each repeat pays for it)")
    p.add_argument("--min-request-steps", type=int, default=2 * REFIT_ROWS,
                   help="small batches run more steps per repeat, so each repeat times at least this many "
                        "request-steps (batch 1: two of the step timer's refits)")
    p.add_argument("--repeats", type=int, default=5, help="interleaved repeats (the median is reported)")
    p.add_argument("--clock", choices=["cpu", "wall"], default="cpu",
                   help="cpu: this process's CPU time (what drafting costs; on a shared machine wall "
                        "time also counts other processes' time slices), wall: elapsed time")
    p.add_argument("--json", default=None, help="write one record per point here")


def run(args: argparse.Namespace) -> int:
    methods = args.methods.split(",") if args.methods else [m for m in METHODS if m != "suffix-arctic" or arctic_available()]
    unknown = sorted(set(methods) - set(METHODS))
    if unknown:
        raise SystemExit(f"specdec: error: unknown methods {unknown}; choose from {', '.join(METHODS)}")
    points: list[PointResult] = []
    for cache_tokens in _ints(args.cache_tokens):
        for context in _ints(args.contexts):
            for batch in _ints(args.batch_sizes):
                steps = max(args.steps, -(-args.min_request_steps // batch))
                got = measure_point(methods, batch, context, cache_tokens, args.k, steps, args.repeats,
                                    CLOCKS[args.clock], args.rows_per_prompt)
                _print_point(got)
                points += got
    print()
    print(_table(points))
    if args.json:
        with open(args.json, "w") as fh:
            json.dump([dataclasses.asdict(p) | {"kind": "propose", "clock": args.clock} for p in points], fh, indent=1)
        print(f"wrote {args.json}")
    return 0


def measure_point(
    methods: Sequence[str], batch: int, context: int, cache_tokens: int, k: int, steps: int, repeats: int,
    clock: Callable[[], float] = time.process_time, rows_per_prompt: int = 1,
) -> list[PointResult]:
    filler = list(finished_requests(cache_tokens)) if cache_tokens else []
    donors = filler[:64] or list(finished_requests(64 * 2048, seed=3))  # spans prompts copy from
    token_ids = share_prompts(request_buffer(batch, context, steps * repeats + 1, donors), context, rows_per_prompt)
    runners = {m: make_runner(m, k, batch, token_ids.shape[1], cache_tokens, context) for m in methods}
    lengths = {m: np.full(batch, context, dtype=np.int32) for m in methods}
    for m, runner in runners.items():
        runner.fill_cache(filler)
        runner.start(token_ids, lengths[m])
    times: dict[str, list[float]] = {m: [] for m in methods}
    drafted = {m: 0 for m in methods}
    for rep in range(repeats):
        for m in [*methods[rep % len(methods) :], *methods[: rep % len(methods)]]:
            started = clock()
            for _ in range(steps):
                lengths[m] += 1
                drafted[m] += runners[m].step(token_ids, lengths[m])
            times[m].append((clock() - started) / (steps * batch) * 1e6)
    del runners
    return [
        PointResult(m, batch, context, cache_tokens, float(np.median(times[m])), float(np.ptp(times[m])),
                    repeats, steps, drafted[m] / (steps * repeats * batch))
        for m in methods
    ]


def _print_point(results: Sequence[PointResult]) -> None:
    for r in results:
        print(f"batch {r.batch_size:>4} x {r.context:>5} tokens, cache {r.cache_tokens:>9,}: {r.method:<26} "
              f"{r.us_per_request_step:9.2f} us/request/step (range {r.spread:.2f}), "
              f"{r.drafted_per_request_step:.2f} tokens drafted", flush=True)


def _table(points: Sequence[PointResult]) -> str:
    methods = list(dict.fromkeys(p.method for p in points))
    keys = list(dict.fromkeys((p.cache_tokens, p.context, p.batch_size) for p in points))
    by = {(p.cache_tokens, p.context, p.batch_size, p.method): p for p in points}
    head = f"{'cache':>9} {'context':>7} {'batch':>5}  " + "  ".join(f"{m:>26}" for m in methods)
    rows = [head, "-" * len(head)]
    for key in keys:
        cells = [f"{by[(*key, m)].us_per_request_step:>16.2f} ({by[(*key, m)].spread:6.2f})" for m in methods]
        rows.append(f"{key[0]:>9,} {key[1]:>7} {key[2]:>5}  " + "  ".join(f"{c:>26}" for c in cells))
    rows.append("us per request per step: median over repeats (range max - min)")
    return "\n".join(rows)
