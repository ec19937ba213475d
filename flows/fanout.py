"""Scale-out: one run over many workers through a Prefect work pool.

The parent flow `speculative-generation-fanout` lists the run's shards, sizes them from their
Parquet footers, splits them into groups of about equal estimated work and submits each group as a child flow run of a deployment of
`speculative-generation-shards` (`run_deployment`): any worker of that deployment's pool (e.g.
one per GPU host on pool `gpu`) picks a group, generates it with its own engine and stages the
results (a shared S3 prefix). Workers never open DuckDB: when every group has finished, the
parent ingests the staged shards once. A shard is staged by exactly one group, and re-running
the parent resumes (staged shards whose content and config match are not generated again). Groups are fixed at submission: the run ends with its slowest group.
While the groups run, the parent's live progress (tasks.progress) sums the live tables each
group publishes on its own flow run.
"""

from __future__ import annotations

import heapq
import json
import time
from collections.abc import Callable
from typing import Any

from prefect import flow, get_client, get_run_logger, task
from prefect.artifacts import create_table_artifact
from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterFlowRunId, ArtifactFilterType
from prefect.client.schemas.objects import State
from prefect.deployments import run_deployment
from prefect.states import Pending

from flows.generation import finish_run
from flows.params import SHARD_FLOW, FanoutParams, FlowParams
from flows.shard_run import RunContext, process_shards, summary, worker_name
from flows.signature import takes_model_fields
from specdec.engine_cache import closing_on_interrupt
from tasks import prefect_tasks as t
from tasks import prompt_shards
from tasks.progress import LIVE_TABLE, LiveProgress, combine_groups
from tasks.prompt_shards import ShardRef
from tasks.storage import S3Options

_READ_PAGE = 100  # artifacts per query, within the API's page limit
GROUP_FIGURES = "specdec fan-out group: shards, failures, engine busy seconds"


def split_into_groups(refs: list[ShardRef], num_groups: int) -> list[list[ShardRef]]:
    """Groups of about equal estimated work (ShardRef.work; None counts as 0): largest shard
    first onto the least-loaded group, so loads differ by at most the largest shard's work.
    At most `num_groups`, none empty; each group largest first; the same input, the same split."""
    n = max(1, min(num_groups, len(refs)))
    groups: list[list[ShardRef]] = [[] for _ in range(n)]
    # (load, shards, index): among equal loads an empty group comes first, so none stays empty
    loads = [(0.0, 0, i) for i in range(n)]
    for ref in sorted(refs, key=lambda r: (-(r.work or 0.0), r.shard_id)):
        load, count, i = heapq.heappop(loads)
        groups[i].append(ref)
        heapq.heappush(loads, (load + (ref.work or 0.0), count + 1, i))
    return groups


@task(name="size-shards", **t.IO_RETRIES)
def size_shards(refs: list[ShardRef], params: FlowParams, s3: S3Options) -> list[ShardRef]:
    """Each shard's rows and estimated work from its Parquet footer (tasks.prompt_shards)."""
    sized = prompt_shards.with_footer_sizes(refs, params.source, params.samples, params.max_tokens, s3)
    unread = [r.shard_id for r in sized if r.num_rows is None]
    if unread:
        get_run_logger().warning("%d shard(s) without a readable footer count as no work: %s",
                                 len(unread), ", ".join(unread[:10]))
    return sized


@flow(name=SHARD_FLOW, log_prints=False)
def generate_shard_group(params: dict[str, Any], shards: list[dict[str, str]]) -> dict[str, Any]:
    """Child flow: generate and stage the given shards of a run (no DuckDB here); returns its
    figures (worker, shards, failures, engine_busy_s) and records them for the parent.
    `params`: FlowParams fields as JSON (no credentials); `shards`: [{"shard_id", "uri"}]."""
    p = FlowParams(**params)
    p.check_model_folders()
    run = RunContext(p, stages_decisions=False)  # run.json is the parent's: the figures carry them
    refs = [ShardRef(s["shard_id"], s["uri"]) for s in shards]
    get_run_logger().info("run %s: %d shard(s) on worker %s (code: %s)", run.run_id, len(refs),
                          worker_name(), __file__)
    with closing_on_interrupt():  # cancelled: the engine goes before the process does
        process_shards(run, refs, ingest_each=False, keyed_progress=False)  # the parent's are keyed
    figures = {"worker": worker_name(), "shards": [r.shard_id for r in refs], "failures": run.failures,
               "engine_busy_s": run.manifest.engine_busy_s, "pilot": run.manifest.pilot}
    _record_group_figures(figures)
    return figures


@flow(name="speculative-generation-fanout", log_prints=False)
@takes_model_fields(FanoutParams)
def speculative_generation_fanout(**fields: Any) -> dict[str, Any]:
    """Split the shards under `source` into `num_groups` child flow runs of `shard_deployment`,
    wait for them (the run's live progress sums theirs), then ingest everything once.
    Parameters: the fields of flows.params.FanoutParams. `source` and `staging` must be
    shared by every worker (S3)."""
    fanout = FanoutParams(**fields)
    params = fanout.run_params()
    logger = get_run_logger()
    run = RunContext(params)
    t.record_run(run.staging, run.manifest)
    refs = size_shards(t.list_shards(params.source, params.shard_glob, run.s3), params, run.s3)
    run.manifest.num_shards = len(refs)
    groups = split_into_groups(refs, fanout.num_groups)
    children, states = _run_groups(run, groups, fanout)
    for child_id, state in states.items():
        if state.type.value != "COMPLETED":
            run.failures.append(f"child flow run {child_id} ended {state.type.value}")
    figures = _read_group_figures(children)
    run.manifest.engine_busy_s = total_engine_busy_s({g: f.get("engine_busy_s") for g, f in figures.items()}, children)
    run.manifest.pilot = first_decision_per_kind([f.get("pilot") or [] for f in figures.values()])
    if run.manifest.engine_busy_s is None:
        logger.warning("not every group reported its engine busy time: the run's is not recorded")
    _collect(run, refs)
    t.ingest(params.db, run.staging, run.run_id, [m.shard_id for m in run.outcomes])
    finish_run(run)
    return {**summary(run, len(refs)), "groups": [[r.shard_id for r in g] for g in groups]}


def _run_groups(run: RunContext, groups: list[list[ShardRef]], fanout: FanoutParams) -> tuple[list, dict[Any, State]]:
    """Submit each group as a child flow run and wait for them all, showing their progress as
    the run's; cancelled or interrupted, the groups are cancelled too."""
    logger = get_run_logger()
    child_params = run.params.shareable()
    live = LiveProgress(run.run_id, sum(len(g) for g in groups))
    children: list = []
    try:
        for i, group in enumerate(groups):
            child = run_deployment(
                fanout.shard_deployment, timeout=0, flow_run_name=f"{run.run_id}-group-{i + 1}-of-{len(groups)}",
                parameters={"params": child_params, "shards": [{"shard_id": r.shard_id, "uri": r.uri} for r in group]},
            )
            logger.info("group %d/%d (%d shard(s), ~%.0f output tokens) -> flow run %s", i + 1, len(groups),
                        len(group), sum(r.work or 0.0 for r in group), child.name)
            children.append(child.id)
        states = _wait_for(children, fanout.group_timeout_s, lambda: _show_progress(live, children))
        _show_progress(live, children)  # the groups' last shards
        return children, states
    except BaseException as exc:
        if not isinstance(exc, Exception):  # cancelled or interrupted: so are the groups
            _cancel_children(children)
        raise
    finally:
        live.close()


def _show_progress(live: LiveProgress, flow_run_ids: list) -> None:
    """The run's live progress from its groups' live tables; a failure is logged, never raised
    (progress is for people watching, the run goes on without it)."""
    if not live.enabled or not flow_run_ids:
        return
    try:
        latest: dict[Any, Any] = {}  # per group, its latest live table (a re-run group makes a new one)
        for artifact in _group_tables(flow_run_ids):
            if (artifact.description or "").startswith(LIVE_TABLE) and isinstance(artifact.data, str):
                if artifact.flow_run_id not in latest or artifact.created > latest[artifact.flow_run_id].created:
                    latest[artifact.flow_run_id] = artifact
        live.replace(*combine_groups((json.loads(a.data) for a in latest.values()), live.tally.total))
    except Exception as exc:
        get_run_logger().warning("could not read the groups' progress: %s", exc)


def _wait_for(flow_run_ids: list, timeout_s: float, on_poll: Callable[[], None],
              poll_s: float = 2.0) -> dict[Any, State]:
    """Final state of each child flow run (or the last seen one at the timeout)."""
    deadline = time.monotonic() + timeout_s
    states: dict[Any, State] = {}
    with get_client(sync_client=True) as client:
        while True:
            for fid in flow_run_ids:
                states[fid] = client.read_flow_run(fid).state or Pending()
            if all(s.is_final() for s in states.values()) or time.monotonic() > deadline:
                return states
            on_poll()
            time.sleep(poll_s)


def total_engine_busy_s(busy_by_group: dict[Any, float | None], group_ids: list) -> float | None:
    """The groups' engine busy time summed; None unless every group reported one (a partial
    sum would understate the run)."""
    figures = [busy_by_group.get(gid) for gid in group_ids]
    return None if not figures or any(f is None for f in figures) else float(sum(figures))  # type: ignore[arg-type]


def _record_group_figures(figures: dict[str, Any]) -> None:
    """A table artifact on the group's flow run: the parent reads it through the Prefect API,
    from any host (a flow's return value is not persisted, and persisting it would persist
    every task's result too, prompts included)."""
    create_table_artifact([figures], description=GROUP_FIGURES)


def _group_tables(flow_run_ids: list) -> list[Any]:
    """Every table artifact of the given flow runs (each group has its figures and its live table)."""
    artifacts: list[Any] = []
    with get_client(sync_client=True) as client:
        for first in range(0, len(flow_run_ids), _READ_PAGE):
            where = ArtifactFilter(flow_run_id=ArtifactFilterFlowRunId(any_=flow_run_ids[first:first + _READ_PAGE]),
                                   type=ArtifactFilterType(any_=["table"]))
            offset = 0
            while True:  # the API returns a page at most
                page = client.read_artifacts(limit=_READ_PAGE, offset=offset, artifact_filter=where)
                artifacts += page
                offset += len(page)
                if len(page) < _READ_PAGE:
                    break
    return artifacts


def _read_group_figures(flow_run_ids: list) -> dict[Any, dict[str, Any]]:
    """Each group's figures from its artifact (absent: the group did not get there)."""
    found: dict[Any, dict[str, Any]] = {}
    for artifact in _group_tables(flow_run_ids):
        if artifact.description == GROUP_FIGURES and isinstance(artifact.data, str):
            rows = json.loads(artifact.data)
            found[artifact.flow_run_id] = rows[0] if rows else {}
    return found


def first_decision_per_kind(groups: list[list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """Method auto under fan-out: each worker pilots the kinds it meets on its own hardware; the
    run records one decision per kind, the first group's (each shard's own method is in its row)."""
    kept: dict[str, dict[str, Any]] = {}
    for decisions in groups:
        for decision in decisions:
            kept.setdefault(decision["kind"], decision)
    return list(kept.values())


def _cancel_children(flow_run_ids: list) -> None:
    """Cancel the group runs still going: a running one is set Cancelling (its worker kills
    it, engine included), one not started yet Cancelled. (Prefect's server also cancels the
    subflow runs of a cancelled parent, after its cleanup interval.)"""
    from prefect.states import Cancelled, Cancelling

    with get_client(sync_client=True) as client:
        for fid in flow_run_ids:
            state = client.read_flow_run(fid).state
            if state is None or state.is_final() or state.is_cancelling():
                continue
            new = Cancelling if state.is_running() else Cancelled
            client.set_flow_run_state(fid, new(message="The fan-out parent run was cancelled."), force=True)


def _collect(run: RunContext, refs: list[ShardRef]) -> None:
    """Every shard's committed outcome from staging; a shard without one was not processed."""
    for ref in refs:
        manifest = run.staging.read_manifest(run.run_id, ref.shard_id)
        if manifest is None:
            run.failures.append(f"{ref.shard_id}: no staged result (its group did not finish)")
            continue
        run.outcomes.append(manifest)
        if manifest.status != "generated":
            run.failures.append(f"{ref.shard_id}: {manifest.error}")
        run.manifest.engine_start_s = (run.manifest.engine_start_s or 0.0) + manifest.engine_start_s
