"""Quarantined input: rows (or whole files) that did not become outputs, with the reason
(one schema: `specdec generate`'s quarantine file and the pipeline's table)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from pathlib import Path

import pyarrow as pa

from specdec.prompts import RejectedRow

QUARANTINE_SCHEMA = pa.schema([
    ("run_id", pa.string()), ("shard_id", pa.string()), ("row_index", pa.int32()), ("id", pa.string()),
    ("stage", pa.string()),  # read | validate | tokenize | dedupe
    ("reason", pa.string()), ("num_rows", pa.int64()), ("quarantined_at", pa.timestamp("us")),
])


def quarantine_table(rejected: Sequence[RejectedRow], run_id: str | None, shard_id: str) -> pa.Table:
    now = dt.datetime.now(dt.timezone.utc).replace(tzinfo=None)
    rows = [{"run_id": run_id, "shard_id": shard_id, "row_index": r.index, "id": r.id, "stage": r.stage,
             "reason": r.reason, "num_rows": 1, "quarantined_at": now} for r in rejected]
    return pa.Table.from_pylist(rows, schema=QUARANTINE_SCHEMA)


def quarantine_path(output: Path) -> Path:
    return output.with_name(f"{output.stem}.quarantine.parquet")
