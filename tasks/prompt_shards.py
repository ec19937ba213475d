"""List prompt shards under a folder or S3 prefix; read one, fingerprint it, validate its rows."""

from __future__ import annotations

import dataclasses
import fnmatch
import hashlib
import time

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from specdec.prompts import InputError, PromptRow, RejectedRow, validate_rows
from tasks import storage
from tasks.storage import S3Options


@dataclasses.dataclass(frozen=True)
class ShardRef:
    shard_id: str  # path relative to the source root: stable across re-runs
    uri: str  # where it lives, for messages and the shards table


@dataclasses.dataclass
class LoadedShard:
    ref: ShardRef
    fingerprint: str  # sha256 of the file's bytes
    rows: list[PromptRow]
    rejected: list[RejectedRow]
    read_s: float
    num_input_rows: int = 0


class ShardInputError(InputError):
    """The whole shard is unusable (unreadable, missing or mistyped columns); the message
    names it. `num_input_rows` is its row count when the file could be read."""

    def __init__(self, message: str, num_input_rows: int | None = None) -> None:
        super().__init__(message)
        self.num_input_rows = num_input_rows


def list_shards(source: str, shard_glob: str, s3: S3Options | None = None) -> list[ShardRef]:
    fs, root = storage.filesystem(source, s3)
    info = fs.get_file_info(root)
    if info.type != pafs.FileType.Directory and not storage.is_s3(source):
        raise InputError(f"source {source}: not a folder")
    selector = pafs.FileSelector(root, recursive=True, allow_not_found=True)
    refs = []
    for item in fs.get_file_info(selector):
        if item.type != pafs.FileType.File:
            continue
        rel = item.path[len(root):].lstrip("/")
        if fnmatch.fnmatch(rel, shard_glob) and not rel.split("/")[-1].startswith((".", "_")):
            refs.append(ShardRef(rel, storage.display(source, item.path)))
    if not refs:
        raise InputError(f"source {source}: no shards match {shard_glob!r}")
    return sorted(refs, key=lambda r: r.shard_id)


def read_shard(ref: ShardRef, source: str, s3: S3Options | None = None) -> LoadedShard:
    """Read the file once: its bytes give the fingerprint and the table."""
    started = time.perf_counter()
    fs, root = storage.filesystem(source, s3)
    data = storage.read_bytes(fs, storage.join(root, ref.shard_id))
    fingerprint = hashlib.sha256(data).hexdigest()[:32]
    try:
        table = pq.read_table(pa.BufferReader(data))
    except (OSError, pa.ArrowException) as exc:
        raise ShardInputError(f"shard {ref.uri}: cannot read as Parquet: {exc}") from exc
    try:
        rows, rejected = validate_rows(table, f"shard {ref.uri}")
    except InputError as exc:
        raise ShardInputError(str(exc), table.num_rows) from exc
    return LoadedShard(ref, fingerprint, rows, rejected, time.perf_counter() - started, table.num_rows)
