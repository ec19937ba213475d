"""The one writer: staged shard results -> DuckDB.

Each shard is replaced as a unit inside one transaction (delete its rows, insert the staged
ones), keyed by (run_id, shard_id, id, sample), so re-ingesting never duplicates rows and a crash
mid-ingest leaves the previous state. Shards already ingested with the same fingerprint and
config hash are skipped. Staged data is read with pyarrow (local or S3) and handed to DuckDB
as Arrow; DuckDB itself only ever opens the local database file. Several shards are ingested
at once, each on its own cursor in its own transaction, and one checkpoint at the end writes
them to the file.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import threading
import time
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.compute as pc

from specdec.pilot import PilotDecision
from specdec.stats import DRAFT_SOURCES, LEGACY_NAMES, ShardStats
from tasks.db import connect_for_write, load_sql, write_cursor
from tasks.staging import RunManifest, ShardManifest, Staging, StagingIntegrityError

log = logging.getLogger(__name__)

SHARD_TABLES = ("outputs", "request_stats", "position_stats", "source_stats", "quarantine", "shards")
QUARANTINE_SCHEMA = pa.schema([("row_index", pa.int32()), ("id", pa.string()), ("stage", pa.string()),
                               ("reason", pa.string()), ("num_rows", pa.int64())])
# Shards ingested at once, each in its own transaction on its own cursor: DuckDB runs one
# INSERT of a shard on about one core, so a second shard keeps the other core busy.
WORKERS = max(1, min(4, os.cpu_count() or 1))
# Committed shards stay in the WAL until this much has piled up, then one checkpoint compresses
# them all; the default (16 MiB) checkpointed after every shard, rewriting the table each time.
SET_WAL_AUTOCHECKPOINT = "SET wal_autocheckpoint = '1GB'"

# Columns older workers did not write, with the value that describes their results: one
# sample per row, engine time not attributed.
ADDED_COLUMNS = {"sample": pa.scalar(0, pa.int32()), "num_samples": pa.scalar(1, pa.int32()),
                 "engine_s": pa.scalar(0.0, pa.float64())}


def with_current_names(table: pa.Table) -> pa.Table:
    """An older worker's results table with today's column names and columns (a fleet is
    upgraded one worker at a time, so ingest meets both)."""
    for name, value in ADDED_COLUMNS.items():
        if name not in table.column_names:
            table = table.append_column(name, pa.repeat(value, table.num_rows))
    names = table.column_names
    for old, new in LEGACY_NAMES.items():
        if old in names and new in names:  # both written: today's name wins
            table = table.drop_columns([old])
    return table.rename_columns([LEGACY_NAMES.get(n, n) for n in table.column_names])


class IngestError(RuntimeError):
    """Staged results are inconsistent; the message names the run and shard."""


@dataclasses.dataclass
class IngestReport:
    num_shards: int = 0
    num_skipped: int = 0
    num_rows: int = 0
    num_duplicates: int = 0
    seconds: float = 0.0

    @property
    def rows_per_s(self) -> float:
        return self.num_rows / self.seconds if self.seconds > 0 else 0.0


def ingest(db: str, staging: Staging, run_id: str, shard_ids: Iterable[str] | None = None,
           dedupe: bool = False, workers: int = WORKERS) -> IngestReport:
    """Ingest the run record and the given (default: all committed) shards of a run.
    `dedupe` (at the end of a run): quarantine ids that an earlier shard of the run already output.
    Up to `workers` shards are ingested at once (one transaction each); on the first error no
    further shard starts and that error is raised once the ones under way have finished."""
    started = time.perf_counter()
    report = IngestReport()
    con = connect_for_write(db, on_wait=lambda msg: log.warning("%s", msg))
    try:
        con.execute(SET_WAL_AUTOCHECKPOINT)
        run = staging.read_run(run_id)
        if run is not None:
            upsert_run(con, run)
        ids = staging.committed_shard_ids(run_id) if shard_ids is None else list(shard_ids)
        for rows in _ingest_shards(con, staging, run_id, ids, workers):
            report.num_shards += rows is not None
            report.num_skipped += rows is None
            report.num_rows += rows or 0
        if dedupe:
            report.num_duplicates = quarantine_cross_shard_duplicates(con, run_id)
        con.execute("CHECKPOINT")  # the report's time covers the data written to the database file
    finally:
        con.close()
    report.seconds = time.perf_counter() - started
    return report


def _ingest_shards(con: duckdb.DuckDBPyConnection, staging: Staging, run_id: str, ids: list[str],
                   workers: int) -> list[int | None]:
    """ingest_shard for each id, `workers` at a time; rows per shard (None: skipped)."""
    pending = iter(ids)
    lock, failed = threading.Lock(), threading.Event()

    def work(cursor: duckdb.DuckDBPyConnection) -> list[int | None]:
        done: list[int | None] = []
        try:
            while not failed.is_set():
                with lock:
                    shard_id = next(pending, None)
                if shard_id is None:
                    return done
                manifest = staging.read_manifest(run_id, shard_id)
                if manifest is None:
                    raise IngestError(f"run {run_id} shard {shard_id}: not committed in staging {staging.uri}")
                done.append(ingest_shard(cursor, staging, manifest))
            return done
        except BaseException:
            failed.set()
            raise
        finally:
            cursor.close()

    # Cursors are opened here: the writer connection takes one call at a time.
    cursors = [write_cursor(con) for _ in range(max(1, min(workers, len(ids))))]
    if len(cursors) == 1:
        return work(cursors[0])
    with ThreadPoolExecutor(len(cursors), thread_name_prefix="ingest") as pool:
        futures = [pool.submit(work, cursor) for cursor in cursors]
    errors = [f.exception() for f in futures if f.exception() is not None]
    if errors:
        raise errors[0]
    return [rows for f in futures for rows in f.result()]


def upsert_run(con: duckdb.DuckDBPyConnection, run: RunManifest) -> None:
    """The run's record and its pilot decisions (method auto), replaced together in one
    transaction: the manifest holds every decision made so far, so re-ingesting never duplicates."""
    con.execute("BEGIN TRANSACTION")
    try:
        con.execute(
            load_sql("upsert_run"),
            [
                run.run_id, run.run_name, run.flow_run_id, run.source, run.method, run.config_hash,
                json.dumps(run.config, sort_keys=True), run.status, run.num_shards,
                _ts(run.started_at), _ts(run.finished_at), run.wall_s, run.engine_start_s, run.message,
                run.engine_busy_s,
            ],
        )
        con.execute(load_sql("delete_run_pilot_decisions"), [run.run_id])
        for ordinal, decision in enumerate(run.pilot):
            con.execute(load_sql("insert_pilot_decision"), _pilot_row(run.run_id, ordinal, decision))
        con.execute("COMMIT")
    except BaseException:
        con.execute("ROLLBACK")
        raise


def _pilot_row(run_id: str, ordinal: int, data: dict[str, Any]) -> list[Any]:
    """insert_pilot_decision's parameters: the decision, then each pass (NULLs where none ran)."""
    d = PilotDecision.from_dict(data)
    passes: list[Any] = []
    for p in (d.none, d.specdec):
        passes += [None] * 7 if p is None else [p.num_requests, p.num_output_tokens, p.engine_s, p.start_s,
                                                p.tokens_per_s, p.full_batch_s, p.full_batch_tokens]
    return [run_id, d.kind, ordinal, d.method, d.reason, d.speedup, d.margin, *passes]


def ingest_shard(con: duckdb.DuckDBPyConnection, staging: Staging, manifest: ShardManifest) -> int | None:
    """Replace one shard's rows; returns rows ingested, or None when already up to date."""
    m = manifest
    state = con.execute(load_sql("shard_state"), [m.run_id, m.shard_id]).fetchone()
    wanted = "ingested" if m.status == "generated" else m.status
    if state == (m.fingerprint, m.config_hash, wanted):
        return None
    started = time.perf_counter()
    results = _read_results(staging, m) if m.status == "generated" else None
    if results is not None:
        _check_results(m, results)
    quarantined = pa.Table.from_pylist([_quarantine_row(r) for r in m.rejected], schema=QUARANTINE_SCHEMA)
    con.execute("BEGIN TRANSACTION")
    try:
        for table in SHARD_TABLES:
            con.execute(load_sql(f"delete_shard_{table}"), [m.run_id, m.shard_id])
        if results is not None:
            con.register("staged_results", results)
            for query in ("insert_outputs", "insert_request_stats", "insert_position_stats"):
                con.execute(load_sql(query), [m.run_id, m.shard_id])
            _insert_source_stats(con, m)
        con.register("staged_quarantine", quarantined)
        con.execute(load_sql("insert_quarantine"), [m.run_id, m.shard_id])
        _insert_shard_row(con, m, wanted, time.perf_counter() - started)
        con.execute("COMMIT")
    except BaseException:
        con.execute("ROLLBACK")
        raise
    finally:
        for name in ("staged_results", "staged_quarantine"):
            try:
                con.unregister(name)
            except duckdb.Error:
                pass
    return 0 if results is None else results.num_rows


def quarantine_cross_shard_duplicates(con: duckdb.DuckDBPyConnection, run_id: str) -> int:
    """Move outputs whose id an earlier shard (by shard_id) of the run also output into
    quarantine, in one transaction; returns how many. Deterministic whatever the order in
    which shards were generated or ingested (many workers)."""
    con.execute("BEGIN TRANSACTION")
    try:
        before = con.execute("SELECT count(*) FROM outputs WHERE run_id = ?", [run_id]).fetchone()[0]
        con.execute(load_sql("quarantine_cross_shard_duplicates"), [run_id, run_id])
        con.execute(load_sql("delete_duplicate_request_stats"), [run_id, run_id])
        con.execute(load_sql("delete_duplicate_outputs"), [run_id, run_id])
        after = con.execute("SELECT count(*) FROM outputs WHERE run_id = ?", [run_id]).fetchone()[0]
        con.execute("COMMIT")
    except BaseException:
        con.execute("ROLLBACK")
        raise
    if before != after:
        log.warning("run %s: %d output(s) quarantined as duplicates of ids in earlier shards", run_id, before - after)
    return before - after


def _quarantine_row(entry: dict) -> dict:
    """A staged quarantine entry; manifests written before stages existed hold row rejections."""
    return {"row_index": entry.get("row_index"), "id": entry.get("id"), "stage": entry.get("stage", "validate"),
            "reason": entry["reason"], "num_rows": entry.get("num_rows", 1)}


def _read_results(staging: Staging, m: ShardManifest) -> pa.Table:
    """The staged results, with today's column names whichever worker version staged them."""
    try:
        return with_current_names(staging.read_results(m.run_id, m.shard_id, m.results_sha256 or None))
    except (StagingIntegrityError, pa.ArrowInvalid) as exc:
        raise IngestError(f"run {m.run_id} shard {m.shard_id}: staged results unusable, not ingested: {exc}") from exc


def _check_results(m: ShardManifest, results: pa.Table) -> None:
    """Every prompt of the manifest with each of its samples exactly once: samples 0 ..
    num_samples - 1 of every id, no (id, sample) twice."""
    where = f"run {m.run_id} shard {m.shard_id}"
    ids = results.column("id")
    if ids.null_count:
        raise IngestError(f"{where}: {ids.null_count} staged result(s) without a request id")
    num_ids = len(pc.unique(ids))  # about twice as fast as pc.count_distinct
    if num_ids != m.num_prompts:
        raise IngestError(f"{where}: staged results of {num_ids} prompt(s) for {m.num_prompts} prompts")
    if m.stats.num_requests and results.num_rows != m.stats.num_requests:  # older manifests: no count
        raise IngestError(f"{where}: staged {results.num_rows} results for {m.stats.num_requests} requests")
    if num_ids == results.num_rows:  # one result per id: each must be sample 0 of 1
        if results.num_rows and (pc.max(results.column("sample")).as_py() != 0
                                 or pc.max(results.column("num_samples")).as_py() != 1):
            raise IngestError(f"{where}: staged results miss samples (one result per id, not sample 0 of 1)")
        return
    per_id = results.group_by("id").aggregate([("sample", "count"), ("sample", "min"), ("sample", "max"),
                                               ("num_samples", "min"), ("num_samples", "max")])
    n = per_id.column("num_samples_max")
    complete = pc.and_(pc.and_(pc.equal(per_id.column("sample_count"), n), pc.equal(per_id.column("num_samples_min"), n)),
                       pc.and_(pc.equal(per_id.column("sample_min"), 0),
                               pc.equal(per_id.column("sample_max"), pc.subtract(n, 1))))
    if not pc.all(complete).as_py():
        raise IngestError(f"{where}: staged results miss or repeat samples of a request id")
    if results.group_by(["id", "sample"]).aggregate([]).num_rows != results.num_rows:
        raise IngestError(f"{where}: staged results repeat a (request id, sample)")


def _insert_source_stats(con: duckdb.DuckDBPyConnection, m: ShardManifest) -> None:
    s = m.stats
    for source, drafted, accepted in zip(DRAFT_SOURCES, s.drafted_by_source, s.accepted_by_source):
        if drafted or accepted:
            con.execute(load_sql("insert_source_stats"), [m.run_id, m.shard_id, source, drafted, accepted])


def _insert_shard_row(con: duckdb.DuckDBPyConnection, m: ShardManifest, status: str, ingest_s: float) -> None:
    s = m.stats
    con.execute(
        load_sql("insert_shard"),
        [
            m.run_id, m.shard_id, m.source_path, m.fingerprint, m.config_hash, status, m.error,
            m.num_prompts, m.num_rejected, s.num_output_tokens, s.num_steps,
            s.num_drafts, s.num_draft_tokens, s.num_accepted_tokens,
            m.read_s, m.engine_start_s, m.generate_s, m.stage_s, ingest_s, _ts(m.generated_at),
            m.num_input_rows, m.worker, _attributed_engine_s(s),
            json.dumps(m.engine, sort_keys=True) if m.engine is not None else None, m.method, m.kind,
        ],
    )


def _attributed_engine_s(stats: ShardStats) -> float | None:
    """The shard's engine seconds, or None where its requests produced tokens but no engine
    time was attributed to them (an older worker, the sequential path)."""
    return stats.engine_s if stats.engine_s > 0 or stats.num_output_tokens == 0 else None


def _ts(value: str | None) -> datetime | None:
    return datetime.fromisoformat(value) if value else None
