"""One run's shard work, shared by the single-process flow and the fan-out child flows:
shards stream through one engine (read + validate ahead -> generate -> stage the moment a
shard is done); every outcome (done, quarantined shard, failure) is
staged as a committed manifest, so the one ingest step sees every shard exactly once.
"""

from __future__ import annotations

import dataclasses
import os
import posixpath
import socket
import time
from collections.abc import Iterator
from typing import Any

from prefect import get_run_logger
from prefect.runtime import flow_run

from flows.params import FlowParams
from specdec.generate import Generation, ShardRows, generate_shards
from specdec.pilot import PilotDecision
from tasks import prefect_tasks as t
from tasks.progress import LiveProgress
from tasks.prompt_shards import LoadedShard, ShardInputError, ShardRef
from tasks.staging import RunManifest, ShardManifest, Staging


def worker_name() -> str:
    """Which worker generated a shard: SPECDEC_WORKER_NAME (set per worker) or the host name,
    then the flow-run process id, then the devices it was pinned to where CUDA_VISIBLE_DEVICES
    is set (one worker per GPU: the flow-run process inherits its worker's environment), e.g.
    `host:1234 [cuda 3]`."""
    name = f"{os.environ.get('SPECDEC_WORKER_NAME') or socket.gethostname()}:{os.getpid()}"
    devices = os.environ.get("CUDA_VISIBLE_DEVICES")
    return f"{name} [cuda {devices or 'none'}]" if devices is not None else name


class RunContext:
    """State of one flow run: parameters, staging, timings, shard outcomes."""

    def __init__(self, params: FlowParams, stages_decisions: bool = True) -> None:
        self.params = params
        self.stages_decisions = stages_decisions
        self.run_id = params.run_id()
        self.config = params.recorded_config()
        self.config_hash = params.config_hash()
        self.s3 = params.s3_options()
        self.staging = Staging(params.staging, self.s3)
        self.started = time.perf_counter()
        self.manifest = RunManifest(
            run_id=self.run_id, run_name=params.run_name, flow_run_id=current_flow_run_id(),
            source=params.source, method=params.method, config_hash=self.config_hash,
            config=self.config, status="running", started_at=t.now_iso(),
            engine_start_s=0.0,
        )
        self.outcomes: list[ShardManifest] = []
        self.failures: list[str] = []
        # method auto: each kind's engine, as chosen when this run first met the kind (a resume keeps it)
        self.decided = self._earlier_decisions()
        self.manifest.pilot = [decision.to_dict() for decision in self.decided.values()]

    def _earlier_decisions(self) -> dict[str, PilotDecision]:
        earlier = t.read_run(self.staging, self.run_id)
        if earlier is None or earlier.config_hash != self.config_hash:
            return {}
        return {d["kind"]: PilotDecision.from_dict(d) for d in earlier.pilot}

    def decision_made(self, decision: PilotDecision) -> None:
        """Staged at once: a run killed after its pilot resumes on the same engines."""
        get_run_logger().info("%s", decision.reason)
        self.decided[decision.kind] = decision
        self.manifest.pilot = [d.to_dict() for d in self.decided.values()]
        if self.stages_decisions:
            t.record_run(self.staging, self.manifest)


def shard_kind(shard_id: str) -> str:
    """A shard's kind: its folder inside the run's source ("" at the top level)."""
    return posixpath.dirname(shard_id)


@dataclasses.dataclass(frozen=True)
class _Loaded:
    """A shard as the stream carries it: read, and staged already when it is to be skipped."""

    ref: ShardRef
    shard: LoadedShard | None = None
    staged: ShardManifest | None = None  # committed with this content and config: skip it


def process_shards(run: RunContext, refs: list[ShardRef], ingest_each: bool, keyed_progress: bool = True) -> None:
    """Every shard gets an outcome; one bad shard never stops the others. The shards stream
    through one engine (specdec.generate.generate_shards): read ahead in the background, each
    staged (and with `ingest_each` ingested) the moment its last request finishes, then counted
    in the run's live progress (tasks.progress; `keyed_progress`: under the run id's keys)."""
    params = run.params.generation_params()
    live = LiveProgress(run.run_id, len(refs), keyed=keyed_progress)

    def shards() -> Iterator[ShardRows[_Loaded]]:
        for ref in refs:
            source, kind = f"shard {ref.uri}", shard_kind(ref.shard_id)
            try:
                shard = t.read_shard(ref, run.params.source, run.s3)
                staged = run.staging.read_manifest(run.run_id, ref.shard_id)
            except Exception as exc:  # unreadable or bad input: this shard fails alone
                yield ShardRows(ref.shard_id, source, [], [], _Loaded(ref), exc, kind)
                continue
            if staged and staged.status == "generated" and staged.matches(shard.fingerprint, run.config_hash):
                yield ShardRows(ref.shard_id, source, [], [], _Loaded(ref, shard, staged), kind=kind)
            else:
                yield ShardRows(ref.shard_id, source, shard.rows, shard.rejected, _Loaded(ref, shard), kind=kind)

    def on_done(loaded: _Loaded, out: Generation | None, error: BaseException | None) -> None:
        """Runs in the stream's one finisher thread: the only writer of `run` until the stream ends."""
        try:
            if error is not None:
                raise error
            assert out is not None and loaded.shard is not None
            staged = loaded.staged
            if staged is not None:
                get_run_logger().info("shard %s: already generated with this content and config; skipped",
                                      loaded.ref.shard_id)
            else:
                log_generated(loaded.ref, out)
                run.manifest.engine_start_s = (run.manifest.engine_start_s or 0.0) + out.engine_start_s
                staged = t.stage_shard(run.staging, shard_manifest(run, loaded.shard, out), out.results)
            if ingest_each:
                t.record_run(run.staging, run.manifest)
                t.ingest(run.params.db, run.staging, run.run_id, [loaded.ref.shard_id])
            run.outcomes.append(staged)
            live.shard_done(staged, "skipped" if loaded.staged is not None else "generated")
        except Exception as exc:
            get_run_logger().error("shard %s failed: %s", loaded.ref.shard_id, exc)
            run.failures.append(f"{loaded.ref.shard_id}: {exc}")
            live.shard_done(record_failure(run, loaded.ref, exc, ingest_each), "failed")

    try:
        totals = generate_shards(shards(), params, run.config_hash, run.config, on_done, decided=run.decided,
                                 on_decision=run.decision_made)
    finally:
        live.close()
    run.manifest.engine_busy_s = (run.manifest.engine_busy_s or 0.0) + totals.busy_s


def log_generated(ref: ShardRef, out: Generation) -> None:
    s = out.stats
    get_run_logger().info(
        "shard %s: %d request(s), %d tokens in %.2f s = %.1f tokens/s (%.2f engine-s); acceptance rate %.3f, "
        "%.3f tokens per target forward", ref.shard_id, s.num_requests, s.num_output_tokens, out.generate_s,
        out.tokens_per_s, s.engine_s, s.acceptance_rate, s.tokens_per_forward)


def shard_manifest(run: RunContext, shard: LoadedShard, out: Generation) -> ShardManifest:
    return ShardManifest(
        run_id=run.run_id, shard_id=shard.ref.shard_id, source_path=shard.ref.uri,
        fingerprint=shard.fingerprint, config_hash=run.config_hash, status="generated",
        num_prompts=out.num_prompts, num_rejected=len(out.quarantined), stats=out.stats,
        read_s=shard.read_s, engine_start_s=out.engine_start_s, generate_s=out.generate_s,
        generated_at=t.now_iso(), num_input_rows=shard.num_input_rows, worker=worker_name(), engine=out.engine,
        method=out.method, kind=shard_kind(shard.ref.shard_id),
        rejected=[{"row_index": r.index, "id": r.id, "stage": r.stage, "reason": r.reason, "num_rows": 1}
                  for r in out.quarantined],
    )


def record_failure(run: RunContext, ref: ShardRef, exc: Exception, ingest_each: bool) -> ShardManifest:
    """Stage a failed shard's manifest. Bad input (ShardInputError) quarantines the whole
    shard with its row count; other failures (engine, storage) leave the count unknown."""
    quarantine = []
    num_input_rows = None
    if isinstance(exc, ShardInputError):
        num_input_rows = exc.num_input_rows
        quarantine = [{"row_index": None, "id": None, "stage": "read", "reason": str(exc)[:2000],
                       "num_rows": exc.num_input_rows}]
    manifest = ShardManifest(
        run_id=run.run_id, shard_id=ref.shard_id, source_path=ref.uri, fingerprint="",
        config_hash=run.config_hash, status="failed", error=str(exc)[:2000], generated_at=t.now_iso(),
        rejected=quarantine, num_rejected=num_input_rows or 0, num_input_rows=num_input_rows,
        worker=worker_name(),
    )
    try:
        run.outcomes.append(t.stage_shard(run.staging, manifest, None))
        if ingest_each:
            t.ingest(run.params.db, run.staging, run.run_id, [ref.shard_id])
    except Exception as inner:  # the failure itself is already in the log and the run status
        get_run_logger().error("could not record the failure of shard %s: %s", ref.shard_id, inner)
    return manifest


def current_flow_run_id() -> str | None:
    value = flow_run.get_id()
    return str(value) if value else None


def summary(run: RunContext, num_shards: int) -> dict[str, Any]:
    return {"run_id": run.run_id, "num_shards": num_shards,
            "num_prompts": sum(m.num_prompts for m in run.outcomes if m.status == "generated")}
