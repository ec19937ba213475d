"""Bad prompt shards for the tests: each writer makes one kind of broken input, as real
Parquet files (the bytes a user's tool could produce)."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

SCHEMA = pa.schema([("id", pa.string()), ("prompt", pa.string())])


def write_table(path: Path, table: pa.Table) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, path)
    return path


def write_rows(path: Path, rows: list[dict], schema: pa.Schema = SCHEMA) -> Path:
    return write_table(path, pa.Table.from_pylist(rows, schema=schema))


def raw_strings(values: list[bytes | None]) -> pa.Array:
    """A string column holding these exact bytes, valid UTF-8 or not (pyarrow does not
    check when building from buffers, and neither do many writers)."""
    binary = pa.array(values, pa.binary())
    return pa.Array.from_buffers(pa.string(), len(values), binary.buffers(), binary.null_count)


def write_invalid_utf8(path: Path) -> Path:
    lone_surrogate = "a\ud800b".encode("utf-8", "surrogatepass")  # how a lone surrogate gets into bytes
    prompts = raw_strings([b"fine prompt", b"bad \xff\xfe bytes", lone_surrogate])
    ids = raw_strings([b"u0", b"u1", b"u2"])
    return write_table(path, pa.table({"id": ids, "prompt": prompts}))


def write_truncated(path: Path, rows: list[dict]) -> Path:
    write_rows(path, rows)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    return path
