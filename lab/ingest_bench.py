"""Benchmark: DuckDB ingest rows/s for a synthetic staging set (not a test).

    python -m lab.ingest_bench [--rows 1000000] [--shards 20] [--repeats 3] [--workdir DIR]

Stages `rows` synthetic per-request results (the real RESULT_SCHEMA, k_max 4, ~40 output
token ids per row) as `shards` committed shards in a local staging folder once, then times
`repeats` ingests of the whole run, each into a fresh DuckDB file: reading Parquet, replacing
each shard's rows in `outputs`, `request_stats` and `position_stats`, the shard records, and the
checkpoint that writes them to the file. Interleaved with each ingest, it times DuckDB's own
floor for the same rows: all of them already parsed, one INSERT per table into the same tables
with the same keys, one transaction, into a fresh file. Prints each figure, the medians, the
spread and ingest's share of the floor.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import resource
import statistics
import tempfile
import time
from pathlib import Path

import duckdb
import pyarrow as pa

from tasks.db import connect_for_write, load_sql
from tests.support.synthetic_staging import manifest_for, synthetic_results
from tasks.ingest import ingest
from tasks.staging import Staging


@dataclasses.dataclass
class Repeat:
    ingest_s: float
    rows_per_s: float
    cpu_s: float  # this process, DuckDB's threads included
    load: float  # 1-minute load average when it finished
    reingest_skip_s: float  # the same run again: every shard unchanged, so skipped


def stage(staging: Staging, run_id: str, rows: int, shards: int) -> None:
    per_shard = -(-rows // shards)
    for i in range(shards):
        n = min(per_shard, rows - i * per_shard)
        shard_id = f"bench-{i:04d}.parquet"
        table = synthetic_results(shard_id, n, seed=i)
        staging.write_shard(manifest_for(run_id, shard_id, table, fingerprint=f"fp{i}"), table)


def run_once(staging: Staging, db: Path, rows: int) -> Repeat:
    cpu_before = _cpu_s()
    report = ingest(str(db), staging, "bench")
    cpu_s = _cpu_s() - cpu_before
    load = os.getloadavg()[0]
    con = duckdb.connect(str(db), read_only=True)
    loaded = con.execute("SELECT count(*) FROM outputs").fetchone()[0]
    con.close()
    assert loaded == rows, f"ingested {loaded} of {rows} rows"
    again = ingest(str(db), staging, "bench")
    assert again.num_shards == 0, "re-ingest of unchanged shards wrote rows"
    return Repeat(report.seconds, report.rows_per_s, cpu_s, load, again.seconds)


def floor_once(results: pa.Table, db: Path) -> float:
    """Rows/s of DuckDB alone: the staged rows (parsed beforehand, untimed) in one INSERT per
    table, the same SQL, tables and keys as ingest, one transaction and its checkpoint."""
    con = connect_for_write(db)
    try:
        con.register("staged_results", results)
        started = time.perf_counter()
        con.execute("BEGIN TRANSACTION")
        for query in ("insert_outputs", "insert_request_stats", "insert_position_stats"):
            con.execute(load_sql(query), ["bench", "all"])
        con.execute("COMMIT")
        con.execute("CHECKPOINT")
        return results.num_rows / (time.perf_counter() - started)
    finally:
        con.close()


def _all_results(staging: Staging, run_id: str) -> pa.Table:
    shards = [staging.read_results(run_id, shard_id) for shard_id in staging.committed_shard_ids(run_id)]
    return pa.concat_tables(shards).combine_chunks()


def _cpu_s() -> float:
    # CPU time of this process, DuckDB's threads included: on a busy machine wall time
    # mostly measures the neighbours.
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--shards", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--workdir", type=Path, default=None, help="default: a temporary folder")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="specdec-bench-") as tmp:
        workdir = args.workdir or Path(tmp)
        staging = Staging(str(workdir / "staging"))
        started = time.perf_counter()
        stage(staging, "bench", args.rows, args.shards)
        print(f"staged {args.rows:,} rows in {args.shards} shards in {time.perf_counter() - started:.1f} s")
        results = _all_results(staging, "bench")
        repeats, floors = [], []
        for i in range(args.repeats):
            db = workdir / f"bench-{i}.duckdb"
            db.unlink(missing_ok=True)
            r = run_once(staging, db, args.rows)
            repeats.append(r)
            db.unlink()  # the floor and the next repeat start from an empty file too
            floors.append(floor_once(results, db))
            db.unlink()
            print(f"ingest {i + 1}: {r.ingest_s:.2f} s -> {r.rows_per_s:,.0f} rows/s (CPU {r.cpu_s:.1f} s; "
                  f"load average {r.load:.1f}; re-ingest of unchanged shards: {r.reingest_skip_s:.2f} s); "
                  f"DuckDB floor {floors[-1]:,.0f} rows/s")
    rates = [r.rows_per_s for r in repeats]
    print(f"ingest median {statistics.median(rates):,.0f} rows/s (spread {min(rates):,.0f}-{max(rates):,.0f}; "
          f"CPU median {statistics.median(r.cpu_s for r in repeats):.1f} s; {os.cpu_count()} CPUs)")
    print(f"DuckDB floor median {statistics.median(floors):,.0f} rows/s (spread {min(floors):,.0f}-{max(floors):,.0f}); "
          f"ingest / floor {statistics.median(rates) / statistics.median(floors):.2f}")


if __name__ == "__main__":
    main()
