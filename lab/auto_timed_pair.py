"""`python -m lab.auto_timed_pair`: where method auto's time goes against specdec alone, over one
input in one process (both engines up, no warm-up): each run as `bench-run` times it
(`bench.throughput.measure_run`), with auto's pilot (none's share) and each stream timed apart.

    python -m lab.auto_timed_pair --input code-edit-2048.parquet --shards 256 --order auto,specdec

Prints per run: wall seconds less engine starts, output tokens, then the pilot (wall, busy s) and
each stream (method, wall, busy s, output tokens, full-batch s and tokens)."""

from __future__ import annotations

import json
import time
from typing import Any

import specdec.generate as generate
from bench import throughput
from lab.pair_input import pair_input
from specdec import engine_cache


def main() -> None:
    args, shards, params = pair_input(__doc__.splitlines()[0], "the runs, in order")
    parts: list[Any] = []
    stream, none_share = generate._generate_stream, generate._none_share

    def timed_stream(*a: Any, **kw: Any) -> Any:
        started = time.perf_counter()
        t = stream(*a, **kw)
        parts.append(["stream", a[1].method, round(time.perf_counter() - started, 2), round(t.busy_s, 2),
                      t.num_output_tokens, round(t.full_batch_s, 2), t.full_batch_tokens])
        return t

    def timed_none_share(*a: Any, **kw: Any) -> Any:
        started = time.perf_counter()
        share = none_share(*a, **kw)
        parts.append(["pilot", round(time.perf_counter() - started, 2), round(share.totals.busy_s, 2)])
        return share

    generate._generate_stream, generate._none_share = timed_stream, timed_none_share
    for method in ("none", "specdec"):
        engine_cache.get_engine(params.model_copy(update={"method": method}), exact=True, keep_others=True)
    try:
        for method in args.order.split(","):
            throughput.prepare_engine(params, method)
            parts.clear()
            wall, tokens = throughput.measure_run(shards, params.model_copy(update={"method": method}),
                                                  on_decision=lambda d: print(" ", d.reason, flush=True))
            print(method, round(wall, 1), tokens, json.dumps(parts), flush=True)
    finally:
        engine_cache.close_engines()


if __name__ == "__main__":
    main()
