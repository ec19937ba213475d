"""The Prefect tasks: thin wrappers that add retries, logging and run names to the plain
functions in tasks/. Nothing is cached by input hash: inputs are large (tables) and the
pipeline's own resume logic (staging manifests + fingerprints) decides what to skip."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

from prefect import get_run_logger, task
from prefect.cache_policies import NO_CACHE
from prefect.tasks import exponential_backoff

from specdec.prompts import InputError
from tasks import ingest as ingest_mod
from tasks import prompt_shards
from tasks.db import DatabaseLockedError
from tasks.ingest import IngestError
from tasks.prompt_shards import LoadedShard, ShardRef
from tasks.staging import RunManifest, ShardManifest, Staging
from tasks.storage import S3Options

def _transient(task: Any, task_run: Any, state: Any) -> bool:
    """Retry I/O hiccups, not bad input: a corrupt shard stays corrupt."""
    try:
        state.result()
    except (InputError, IngestError, DatabaseLockedError, ValueError):
        return False  # DatabaseLockedError: connect_for_write already waited its whole budget
    except Exception:
        return True
    return False


IO_RETRIES: dict[str, Any] = {
    "retries": 3,
    "retry_delay_seconds": exponential_backoff(backoff_factor=2),
    "retry_jitter_factor": 0.5,
    "retry_condition_fn": _transient,
    "cache_policy": NO_CACHE,
}


@task(name="list-shards", **IO_RETRIES)
def list_shards(source: str, shard_glob: str, s3: S3Options) -> list[ShardRef]:
    refs = prompt_shards.list_shards(source, shard_glob, s3)
    get_run_logger().info("%d shard(s) under %s matching %r", len(refs), source, shard_glob)
    return refs


@task(name="read-shard", task_run_name="read {ref.shard_id}", **IO_RETRIES)
def read_shard(ref: ShardRef, source: str, s3: S3Options) -> LoadedShard:
    shard = prompt_shards.read_shard(ref, source, s3)
    logger = get_run_logger()
    logger.info("shard %s: %d valid row(s), %d rejected, read in %.2f s",
                ref.shard_id, len(shard.rows), len(shard.rejected), shard.read_s)
    for bad in shard.rejected[:10]:
        logger.warning("shard %s row %d (id=%r): %s", ref.shard_id, bad.index, bad.id, bad.reason)
    return shard


@task(name="stage-shard", task_run_name="stage {manifest.shard_id}", **IO_RETRIES)
def stage_shard(staging: Staging, manifest: ShardManifest, results: Any) -> ShardManifest:
    return staging.write_shard(manifest, results)


@task(name="record-run", **IO_RETRIES)
def record_run(staging: Staging, manifest: RunManifest) -> None:
    staging.write_run(manifest)


@task(name="read-run", **IO_RETRIES)
def read_run(staging: Staging, run_id: str) -> RunManifest | None:
    return staging.read_run(run_id)


@task(name="ingest", task_run_name="ingest {run_id}", **IO_RETRIES)
def ingest(db: str, staging: Staging, run_id: str, shard_ids: list[str] | None,
           dedupe: bool = False) -> ingest_mod.IngestReport:
    """The only task that opens the DuckDB file for writing (None: every committed shard)."""
    report = ingest_mod.ingest(db, staging, run_id, shard_ids, dedupe=dedupe)
    if report.num_shards:
        get_run_logger().info("ingested %d shard(s), %d row(s) into %s in %.2f s",
                              report.num_shards, report.num_rows, db, report.seconds)
    return report


def now_iso() -> str:
    return datetime.now(timezone.utc).replace(tzinfo=None).isoformat()
