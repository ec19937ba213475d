"""Prompt shards as the core reads them: Parquet files of id, prompt and messages."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

SHARD_SCHEMA = pa.schema([("id", pa.string()), ("prompt", pa.string()), ("messages", pa.string())])


def write_shard(rows: list[dict[str, str]], path: str | Path) -> Path:
    """A prompt shard: id, prompt and (null where a row has none) messages."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    full = [{"id": r["id"], "prompt": r["prompt"], "messages": r.get("messages")} for r in rows]
    pq.write_table(pa.Table.from_pylist(full, schema=SHARD_SCHEMA), path)
    return path
