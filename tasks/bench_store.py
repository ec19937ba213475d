"""`specdec store-bench`: add the records of `specdec bench --json` to DuckDB (table
bench_results, view v_bench_speedup). Pipeline side: the core never imports duckdb."""

from __future__ import annotations

import datetime as dt
import uuid
from typing import Any

from tasks.db import connect_for_write, load_sql


def store(db: str, records: list[dict[str, Any]]) -> str:
    """Insert one bench invocation's records; return its bench_id."""
    bench_id = uuid.uuid4().hex[:12]
    now = dt.datetime.now(dt.timezone.utc).replace(tzinfo=None)
    sql = load_sql("insert_bench_result")
    con = connect_for_write(db)
    try:
        con.executemany(
            sql,
            [
                [bench_id, now, r["method"], r["engine"], r["dataset"], r["batch_size"], r["k_max"],
                 r["num_requests"], r["tokens_per_forward"], r["acceptance_rate"], r.get("tokens_per_s"),
                 r.get("outputs_identical_to_none"), r["started_from"]]
                for r in records
            ],
        )
    finally:
        con.close()
    return bench_id
