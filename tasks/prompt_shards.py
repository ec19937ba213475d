"""List prompt shards under a folder or S3 prefix; size them from their Parquet footers; read
one, fingerprint it, validate its rows."""

from __future__ import annotations

import dataclasses
import fnmatch
import hashlib
import math
import time
from concurrent.futures import ThreadPoolExecutor

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from specdec.params import SAMPLES_LIMIT
from specdec.prompts import MAX_TOKENS_LIMIT, InputError, PromptRow, RejectedRow, validate_rows
from tasks import storage
from tasks.storage import S3Options


@dataclasses.dataclass(frozen=True)
class ShardRef:
    shard_id: str  # path relative to the source root: stable across re-runs
    uri: str  # where it lives, for messages and the shards table
    num_rows: int | None = None  # from the footer (with_footer_sizes); None: not read
    work: float | None = None  # estimated output tokens: rows x samples x max tokens


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


# Footer reads are round trips to S3: a few at once hide the latency.
_FOOTER_READERS = 16


def with_footer_sizes(refs: list[ShardRef], source: str, samples: int, max_tokens: int,
                      s3: S3Options | None = None) -> list[ShardRef]:
    """`refs` with num_rows and work read from each shard's Parquet footer (no rows are read).
    `samples`/`max_tokens`: the run's, for rows without their own. A shard whose footer cannot
    be read keeps num_rows None and work 0.0: it fails at its read, at no engine cost."""
    fs, root = storage.filesystem(source, s3)

    def sized(ref: ShardRef) -> ShardRef:
        try:
            metadata = pq.read_metadata(storage.join(root, ref.shard_id), filesystem=fs)
        except (OSError, pa.ArrowException):
            return dataclasses.replace(ref, work=0.0)
        return dataclasses.replace(ref, num_rows=metadata.num_rows,
                                   work=footer_work(metadata, samples, max_tokens))

    with ThreadPoolExecutor(max_workers=_FOOTER_READERS) as pool:
        return list(pool.map(sized, refs))


def footer_work(metadata: pq.FileMetaData, samples: int, max_tokens: int) -> float:
    """Estimated output tokens of a shard: per row group, rows x mean samples x mean max
    tokens. A row's own `samples`/`max_tokens` count through the column's statistics (the
    midpoint of its min and max: the footer has no mean); nulls and missing statistics take
    the run's value."""
    total = 0.0
    for i in range(metadata.num_row_groups):
        group = metadata.row_group(i)
        columns = {group.column(j).path_in_schema: group.column(j) for j in range(group.num_columns)}
        rows = group.num_rows
        mean_samples = _column_mean(columns.get("samples"), rows, samples, SAMPLES_LIMIT)
        mean_max_tokens = _column_mean(columns.get("max_tokens"), rows, max_tokens, MAX_TOKENS_LIMIT)
        total += rows * mean_samples * mean_max_tokens
    return total


def _column_mean(column: pq.ColumnChunkMetaData | None, rows: int, default: int, limit: int) -> float:
    """A row group's mean of a per-row setting, from the footer; `default` for its nulls."""
    stats = column.statistics if column is not None else None
    if rows == 0 or stats is None or not stats.has_min_max or not stats.has_null_count:
        return float(default)
    if not (_is_number(stats.min) and _is_number(stats.max)):  # mistyped: the read rejects it
        return float(default)
    # Values outside [1, limit] reject their row later; here they only must not dominate.
    middle = min(max((stats.min + stats.max) / 2.0, 1.0), float(limit))
    valued = rows - stats.null_count
    return (valued * middle + stats.null_count * default) / rows


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
