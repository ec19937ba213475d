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
from prefect.runtime import flow_run

from flows.artifacts import publish_run_artifacts
from flows.params import FlowParams
from tasks import prefect_tasks as t
from tasks.generate import ShardGeneration
from tasks.shards import LoadedShard, ShardRef
from tasks.staging import RunManifest, ShardManifest, Staging


@flow(name="speculative-generation", log_prints=False)
def speculative_generation(
    source: str,
    shard_glob: str = "*.parquet",
    db: str = "out/specdec.duckdb",
    staging: str = "out/staging",
    run_name: str | None = None,
    model: str | None = None,
    method: str = "specdec",
    k_max: int = 4,
    ngram_min: int = 2,
    ngram_max: int = 5,
    draft_model: str | None = None,
    max_tokens: int = 128,
    temperature: float = 0.0,
    top_p: float = 1.0,
    top_k: int = 0,
    seed: int | None = None,
    batch_size: int = 16,
    max_model_len: int = 2048,
    kv_cache_gib: float = 2.0,
    dtype: str = "float32",
    enforce_eager: bool = True,
    s3_endpoint_url: str | None = None,
    s3_region: str | None = None,
    aws_access_key_id: str | None = None,
    aws_secret_access_key: str | None = None,
) -> dict[str, Any]:
    """Generate completions for every prompt shard under `source` into the DuckDB file `db`.
    Parameters are those of flows.params.FlowParams (validated before any work)."""
    params = FlowParams(**{name: value for name, value in locals().items()})
    return run_pipeline(params)


class _Run:
    """State of one flow run: parameters, staging, timings, shard outcomes."""

    def __init__(self, params: FlowParams) -> None:
        self.params = params
        self.run_id = params.run_id()
        self.config = params.generation_config()
        self.config_hash = params.config_hash()
        self.s3 = params.s3_options()
        self.staging = Staging(params.staging, self.s3)
        self.started = time.perf_counter()
        self.manifest = RunManifest(
            run_id=self.run_id, run_name=params.run_name, flow_run_id=_flow_run_id(),
            source=params.source, method=params.method, config_hash=self.config_hash,
            config=params.recorded_config(), status="running", started_at=t.now_iso(),
            engine_start_s=0.0,
        )
        self.outcomes: list[ShardManifest] = []
        self.failures: list[str] = []


def run_pipeline(params: FlowParams) -> dict[str, Any]:
    logger = get_run_logger()
    run = _Run(params)
    logger.info("run %s (config %s): %s -> %s", run.run_id, run.config_hash, params.source, params.db)
    t.record_run(run.staging, run.manifest)
    refs = t.list_shards(params.source, params.shard_glob, run.s3)
    run.manifest.num_shards = len(refs)
    for ref in refs:
        try:
            run.outcomes.append(_process_shard(run, ref))
        except Exception as exc:  # one bad shard must not stop the others; it is recorded
            logger.error("shard %s failed: %s", ref.shard_id, exc)
            run.failures.append(f"{ref.shard_id}: {exc}")
            _record_failure(run, ref, exc)
    _finish(run)
    if run.failures:
        raise RuntimeError(f"run {run.run_id}: {len(run.failures)} shard(s) failed: " + "; ".join(run.failures))
    return {"run_id": run.run_id, "num_shards": len(refs),
            "num_prompts": sum(m.num_prompts for m in run.outcomes)}


def _process_shard(run: _Run, ref: ShardRef) -> ShardManifest:
    shard = t.read_shard(ref, run.params.source, run.s3)
    staged = run.staging.read_manifest(run.run_id, ref.shard_id)
    if staged and staged.status == "generated" and staged.matches(shard.fingerprint, run.config_hash):
        get_run_logger().info("shard %s: already generated with this content and config; skipped", ref.shard_id)
    else:
        p = run.params
        out = t.generate(shard, p.engine_config(), p.spec_config(), p.sampling(), p.max_tokens,
                         run.config, run.config_hash)
        run.manifest.engine_start_s = (run.manifest.engine_start_s or 0.0) + out.engine_start_s
        staged = t.stage_shard(run.staging, _shard_manifest(run, shard, out), out.results)
    t.record_run(run.staging, run.manifest)
    t.ingest(run.params.db, run.staging, run.run_id, [ref.shard_id])
    return staged


def _shard_manifest(run: _Run, shard: LoadedShard, out: ShardGeneration) -> ShardManifest:
    return ShardManifest(
        run_id=run.run_id, shard_id=shard.ref.shard_id, source_path=shard.ref.uri,
        fingerprint=shard.fingerprint, config_hash=run.config_hash, status="generated",
        num_prompts=out.results.num_rows, num_rejected=len(out.rejected), stats=out.stats.to_dict(),
        read_s=shard.read_s, engine_start_s=out.engine_start_s, generate_s=out.generate_s,
        generated_at=t.now_iso(),
        rejected=[{"row_index": r.index, "id": r.id, "reason": r.reason} for r in out.rejected],
    )


def _record_failure(run: _Run, ref: ShardRef, exc: Exception) -> None:
    manifest = ShardManifest(
        run_id=run.run_id, shard_id=ref.shard_id, source_path=ref.uri, fingerprint="",
        config_hash=run.config_hash, status="failed", error=str(exc)[:2000], generated_at=t.now_iso(),
    )
    try:
        t.stage_shard(run.staging, manifest, None)
        t.ingest(run.params.db, run.staging, run.run_id, [ref.shard_id])
    except Exception as inner:  # the failure itself is already in the log and the run status
        get_run_logger().error("could not record the failure of shard %s: %s", ref.shard_id, inner)


def _finish(run: _Run) -> None:
    m = run.manifest
    m.status = "failed" if run.failures else "completed"
    m.message = "; ".join(run.failures)[:4000] or None
    m.finished_at = t.now_iso()
    m.wall_s = time.perf_counter() - run.started
    t.record_run(run.staging, m)
    t.ingest(run.params.db, run.staging, run.run_id, [])
    publish_run_artifacts(run.run_id, m, run.outcomes)


def _flow_run_id() -> str | None:
    value = flow_run.get_id()
    return str(value) if value else None
