"""`python -m lab.auto_rows_pair`: two runs over one input in one process (both engines up, no
warm-up), compared request by request on the rows auto ran on specdec: their decode steps, drafted
and accepted tokens, and attributed engine seconds. A method ending in `-nolearn` runs with the
stream's engine learning nothing (VllmEngine.learn switched off), to show what learning a pilot's
none share is worth.

    python -m lab.auto_rows_pair --input code-edit-2048.parquet --shards 256 --order auto-nolearn,auto
    python -m lab.auto_rows_pair --input code-edit-2048.parquet --shards 256 --order auto,specdec

Prints per run: wall seconds less engine starts, and busy seconds; then per run, the sums over the
rows the first run generated on specdec; then how many of those rows have identical output in both."""

from __future__ import annotations

import time
from typing import Any

import pyarrow as pa

from bench import throughput
from lab.pair_input import pair_input
from specdec import engine_cache
from specdec.engines.vllm_engine import VllmEngine
from specdec.generate import ShardRows, generate_shards
from specdec.params import GenerationParams

NO_LEARNING = "-nolearn"


def main() -> None:
    args, shards, params = pair_input(__doc__.splitlines()[0], "the two runs, in order")
    for method in ("none", "specdec"):
        engine_cache.get_engine(params.model_copy(update={"method": method}), exact=True, keep_others=True)
    learn, runs = VllmEngine.learn, {}
    try:
        for label in args.order.split(","):
            method = label.removesuffix(NO_LEARNING)
            off = lambda self, finished: None  # noqa: E731
            VllmEngine.learn = learn if method == label else off  # type: ignore[method-assign]
            runs[label] = _run(shards, params.model_copy(update={"method": method}), label)
    finally:
        VllmEngine.learn = learn  # type: ignore[method-assign]
        engine_cache.close_engines()
    (first, a), (second, b) = runs.items()
    on_specdec = [row_id for row_id, row in a.items() if row["method"] == "specdec"]
    for label, run in runs.items():
        picked = [run[row_id] for row_id in on_specdec]
        sums = {key: sum(row[key] for row in picked) for key in
                ("num_output_tokens", "num_steps", "num_draft_tokens", "num_accepted_tokens", "engine_s")}
        print(f"{label}: {len(picked)} rows, " + ", ".join(f"{k} {v:.1f}" if k == "engine_s" else f"{k} {v}"
                                                         for k, v in sums.items()))
    same = sum(a[row_id]["output_token_ids"] == b[row_id]["output_token_ids"] for row_id in on_specdec)
    print(f"identical outputs: {same} of {len(on_specdec)} ({first} against {second})")


def _run(shards: list[ShardRows], params: GenerationParams, label: str) -> dict[str, dict[str, Any]]:
    """One run's rows by id, after printing its times."""
    throughput.prepare_engine(params, params.method)
    tables: list[pa.Table] = []
    errors: list[BaseException] = []
    started = time.perf_counter()
    totals = generate_shards(shards, params, params.config_hash(), params.recorded_config(),
                             lambda _, out, error: errors.append(error) if error else tables.append(out.results),
                             sequential=False)
    if errors:
        raise errors[0]
    # an auto run closes the engine it did not choose at its end: the next one starts it again
    wall = time.perf_counter() - started - totals.engine_start_s
    print(f"{label}: {wall:.1f} s wall less {totals.engine_start_s:.1f} s of engine starts, {totals.busy_s:.1f} s busy",
          flush=True)
    return {row["id"]: row for row in pa.concat_tables(tables).to_pylist()}


if __name__ == "__main__":
    main()
