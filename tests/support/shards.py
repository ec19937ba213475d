"""Prompt shards for the tests, as real Parquet files (the bytes a user's tool could produce):
`write_shard` writes every shard a test needs, local or on S3; the other writers make one
kind of broken input each."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq

PROMPT_SCHEMA = pa.schema([("id", pa.string()), ("prompt", pa.string())])


def write_shard(
    path: str | Path,
    rows: list[dict] | pa.Table,
    schema: pa.Schema | None = None,
    filesystem: pafs.FileSystem | None = None,
) -> Path:
    """Write `rows` (dicts, or a table as it is) as one Parquet file and return its path.

    `schema`: the columns to keep and their types (default: inferred from the rows; an
    empty shard needs one). `filesystem`: where `path` lives, e.g. the S3 filesystem from
    `tasks.storage.filesystem` with `path` as "bucket/key" (default: the local disk, parent
    folders created)."""
    table = rows if isinstance(rows, pa.Table) else pa.Table.from_pylist(rows, schema=schema)
    if filesystem is None:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, str(path), filesystem=filesystem)
    return Path(path)


def raw_strings(values: list[bytes | None]) -> pa.Array:
    """A string column holding these exact bytes, valid UTF-8 or not (pyarrow does not
    check when building from buffers, and neither do many writers)."""
    binary = pa.array(values, pa.binary())
    return pa.Array.from_buffers(pa.string(), len(values), binary.buffers(), binary.null_count)


def write_invalid_utf8(path: Path) -> Path:
    lone_surrogate = "a\ud800b".encode("utf-8", "surrogatepass")  # how a lone surrogate gets into bytes
    prompts = raw_strings([b"fine prompt", b"bad \xff\xfe bytes", lone_surrogate])
    ids = raw_strings([b"u0", b"u1", b"u2"])
    return write_shard(path, pa.table({"id": ids, "prompt": prompts}))


def write_truncated(path: Path, rows: list[dict]) -> Path:
    write_shard(path, rows)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    return path
