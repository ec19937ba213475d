"""Flow `speculative-generation`: prompt shards (folder or S3) -> vLLM with speculative
decoding -> staged Parquet per shard -> DuckDB.

Resume: a shard whose staged manifest matches its content fingerprint and the config hash is
not generated again; ingest skips what DuckDB already holds. The run id is derived from the
source and config (or given as run_name), so re-running the same thing resumes it.
"""

from __future__ import annotations

import time
from typing import Any

from prefect import flow, get_run_logger

from tasks.prefect_artifacts import publish_run_artifacts
from flows.params import FlowParams
from flows.shard_run import RunContext, process_shards, summary
from flows.signature import takes_model_fields
from specdec.engine_cache import closing_on_interrupt
from tasks import prefect_tasks as t


@flow(name="speculative-generation", log_prints=False)
@takes_model_fields(FlowParams)
def speculative_generation(**params: Any) -> dict[str, Any]:
    """Generate completions for every prompt shard under `source` into the DuckDB file `db`.
    Parameters: the fields of flows.params.FlowParams (validated before any work).
    Cancelled (or sent SIGTERM/SIGINT), it shuts its engine down before it exits."""
    with closing_on_interrupt():
        return run_pipeline(FlowParams(**params))


def run_pipeline(params: FlowParams) -> dict[str, Any]:
    logger = get_run_logger()
    params.check_model_folders()
    run = RunContext(params)
    logger.info("run %s (config %s): %s -> %s", run.run_id, run.config_hash, params.source, params.db)
    t.record_run(run.staging, run.manifest)
    refs = t.list_shards(params.source, params.shard_glob, run.s3)
    run.manifest.num_shards = len(refs)
    process_shards(run, refs, ingest_each=True)
    finish_run(run)
    return summary(run, len(refs))


def finish_run(run: RunContext) -> None:
    """Record the run's status, ingest it (with the cross-shard duplicate check) and raise
    when any shard failed, naming each: the run's state in Prefect says it too."""
    m = run.manifest
    m.status = "failed" if run.failures else "completed"
    m.message = "; ".join(run.failures)[:4000] or None
    m.finished_at = t.now_iso()
    m.wall_s = time.perf_counter() - run.started
    try:
        t.record_run(run.staging, m)
        t.ingest(run.params.db, run.staging, run.run_id, [], dedupe=True)
    except Exception as exc:  # retries are spent: say what is known, then fail the run
        raise RuntimeError(
            f"run {run.run_id}: could not record the run's end in staging {run.params.staging} or "
            f"DuckDB after retries ({type(exc).__name__}: {exc}); shard failures: "
            + ("; ".join(run.failures) or "none") + ". Re-run to resume.") from exc
    publish_run_artifacts(run.run_id, m, run.outcomes, run.params.db)
    if run.failures:
        raise RuntimeError(f"run {run.run_id}: {len(run.failures)} shard(s) failed: " + "; ".join(run.failures))
