"""Benchmark: DuckDB ingest rows/s for a synthetic staging set (not a test).

    python -m tasks.ingest_bench [--rows 1000000] [--shards 20] [--workdir DIR]

Stages `rows` synthetic per-request results (the real RESULT_SCHEMA, k_max 4, ~40 output
token ids per row) as `shards` committed shards in a local staging folder, then times one
`ingest` of the whole run into a fresh DuckDB file: reading Parquet, replacing each shard's
rows in `outputs`, `request_stats` and `position_stats`, and the shard records.
"""

from __future__ import annotations

import argparse
import os
import resource
import tempfile
import time
from pathlib import Path

import duckdb

from tasks.synthetic_staging import manifest_for, synthetic_results
from tasks.ingest import ingest
from tasks.staging import Staging


def stage(staging: Staging, run_id: str, rows: int, shards: int) -> None:
    per_shard = -(-rows // shards)
    for i in range(shards):
        n = min(per_shard, rows - i * per_shard)
        shard_id = f"bench-{i:04d}.parquet"
        table = synthetic_results(shard_id, n, seed=i)
        staging.write_shard(manifest_for(run_id, shard_id, table, fingerprint=f"fp{i}"), table)


def run(rows: int, shards: int, workdir: Path) -> dict[str, float]:
    staging = Staging(str(workdir / "staging"))
    db = workdir / "bench.duckdb"
    started = time.perf_counter()
    stage(staging, "bench", rows, shards)
    stage_s = time.perf_counter() - started
    cpu_before = _cpu_s()
    report = ingest(str(db), staging, "bench")
    ingest_cpu_s = _cpu_s() - cpu_before
    con = duckdb.connect(str(db), read_only=True)
    loaded = con.execute("SELECT count(*) FROM outputs").fetchone()[0]
    con.close()
    assert loaded == rows, f"ingested {loaded} of {rows} rows"
    again = ingest(str(db), staging, "bench")  # nothing changed: every shard skipped
    return {"rows": rows, "shards": shards, "stage_s": stage_s, "ingest_s": report.seconds,
            "rows_per_s": report.rows_per_s, "ingest_cpu_s": ingest_cpu_s,
            "reingest_skip_s": again.seconds}


def _cpu_s() -> float:
    # CPU time of this process, DuckDB's threads included: on a busy machine wall time
    # mostly measures the neighbours.
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--shards", type=int, default=20)
    parser.add_argument("--workdir", type=Path, default=None, help="default: a temporary folder")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="specdec-bench-") as tmp:
        result = run(args.rows, args.shards, args.workdir or Path(tmp))
    print(f"staged {result['rows']:,} rows in {result['shards']} shards in {result['stage_s']:.1f} s")
    print(f"ingest: {result['ingest_s']:.1f} s -> {result['rows_per_s']:,.0f} rows/s "
          f"(CPU {result['ingest_cpu_s']:.1f} s; load average {os.getloadavg()[0]:.1f}; "
          f"re-ingest of unchanged shards: {result['reingest_skip_s']:.2f} s)")


if __name__ == "__main__":
    main()
