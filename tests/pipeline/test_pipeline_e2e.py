"""End to end with the real engine: a real Prefect server, a process worker, deployments from
prefect.yaml, `prefect deployment run ... --param ...`, local folders and the local S3
endpoint. Three flow runs start engines (each ~30-90 s on 2 cores), so shards are tiny.

Faults of a worker fleet: a deployment run cancelled from Prefect (`prefect flow-run cancel`,
the UI's cancel) and a cancelled fan-out parent. A `specdec run` killed with SIGKILL mid-stream
and resumed: tests/pipeline/test_pipeline_auto.py.
Processes are followed by PID from the process the test started, never found by name."""

from __future__ import annotations

import itertools
import json
import subprocess
import time
from pathlib import Path

import pytest

from prompt_sets.humaneval import humaneval_rows
from support import BIN, REPO
from support.db import query
from support.process_tree import describe, descendants, wait_until_gone
from support.processes import stop_workers, wait_for
from support.shards import write_shard
from tasks.staging import Staging

pytestmark = pytest.mark.slow

SECRET = "e2e-secret-Zq81xv"  # must never show up in logs or DuckDB
FLOW_PARAMS = ["max_tokens=16", "batch_size=4", "kv_cache_gib=1"]
# The cancelled run's later shards: 18 rows, over a hundred engine steps at batch 4 (~7 s on 2
# cores), far more than the moment the engine runs between the first shard's staging and the
# cancel (it is held while the CLI starts); the rerun generates them all. 32 tokens, not 64:
# the rerun's generation is half as long (measured ~13 s -> ~6 s), the cancel still lands mid-run.
LONG_TOKENS = 32


def prefect(env: dict[str, str], *args: str, timeout: float = 180) -> subprocess.CompletedProcess:
    return subprocess.run([str(BIN / "prefect"), *args], env=env, cwd=REPO, capture_output=True,
                          text=True, timeout=timeout)


@pytest.fixture(scope="module")
def worker(prefect_server, s3_server, tmp_path_factory):
    """Pools + `prefect deploy --all` from the checkout + one process worker on pool `cpu`."""
    env = {**prefect_server, "PWD": str(REPO), "AWS_ENDPOINT_URL": s3_server,
           "AWS_ACCESS_KEY_ID": "e2e-key", "AWS_SECRET_ACCESS_KEY": SECRET, "AWS_REGION": "us-east-1"}
    # The three `prefect work-pool create` side by side: each is mostly one core importing Prefect
    # (~2 s), so together they take both cores (measured 5.9 s one after another, 2.7 s at once).
    creating = [subprocess.Popen([str(BIN / "prefect"), "work-pool", "create", pool, "--type", "process"], env=env,
                                 cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
                for pool in ("cpu", "gpu", "gpu-8x")]
    for proc in creating:
        output, _ = proc.communicate(timeout=180)
        assert proc.returncode == 0, output
    done = prefect(env, "--no-prompt", "deploy", "--all")
    assert done.returncode == 0, done.stdout + done.stderr
    for name in ("nightly", "on-demand", "gpu", "gpu-70b-tp4", "gpu-awq", "gpu-draft"):
        assert f"speculative-generation/{name}" in done.stdout
    assert "speculative-generation-fanout/fanout-8x" in done.stdout
    log_path = tmp_path_factory.mktemp("worker") / "worker.log"
    log = open(log_path, "w")
    proc = subprocess.Popen([str(BIN / "prefect"), "worker", "start", "--pool", "cpu", "--type", "process"],
                            env=env, cwd=tmp_path_factory.mktemp("worker-cwd"), stdout=log, stderr=subprocess.STDOUT)
    wait_for(lambda: "started" in log_path.read_text().lower(), 60, "prefect worker", proc)
    yield env, log_path, proc
    stop_workers([proc])
    log.close()


def deployment_run(env: dict[str, str], params: list[str], timeout: float = 480) -> str:
    args = ["deployment", "run", "speculative-generation/on-demand", "--watch", "--watch-timeout", str(int(timeout))]
    for p in params + FLOW_PARAMS:
        args += ["--param", p]
    done = prefect(env, *args, timeout=timeout + 60)
    assert done.returncode == 0 and "Completed" in done.stdout, done.stdout[-3000:] + done.stderr[-3000:]
    return done.stdout


def check_results(db: Path, num_prompts: int, num_shards: int, engine_starts: int) -> None:
    """Every prompt exactly once, statistics for every request, views that add them up."""
    assert query(db, "SELECT count(*), count(DISTINCT id) FROM outputs") == [(num_prompts, num_prompts)]
    assert query(db, "SELECT count(*) FROM request_stats WHERE num_steps > 0 AND num_output_tokens > 0") == [(num_prompts,)]
    assert query(db, "SELECT count(*) FROM outputs o ANTI JOIN request_stats r USING (run_id, shard_id, id)") == [(0,)]
    assert query(db, "SELECT status, shards_done, num_prompts FROM v_run_summary") == [("completed", num_shards, num_prompts)]
    assert query(db, "SELECT input_rows, output_rows, quarantined_rows, balanced FROM v_run_accounting") == [
        (num_prompts, num_prompts, 0, True)]
    assert query(db, "SELECT count(*) FROM v_shard_acceptance WHERE tokens_per_s > 0") == [(num_shards,)]
    check_statistics_views(db)
    # One engine start per process that generated, reused for its later shards.
    starts = [s for (s,) in query(db, "SELECT engine_start_s FROM shards ORDER BY shard_id")]
    assert sum(1 for s in starts if s > 0) == engine_starts, starts


def check_statistics_views(db: Path) -> None:
    """v_acceptance_by_position and v_k_usage hold what the requests' own statistics add up to,
    summed here from request_stats rows (the views sum position_stats and unnest k_histogram
    in SQL); each request's figures agree with each other."""
    drafts: dict[str, int] = {}
    accepted: dict[str, list[int]] = {}
    k_steps: dict[str, list[int]] = {}
    for run_id, num_drafts, draft_tokens, num_accepted, fallback, per_pos, k_histogram in query(
            db, "SELECT run_id, num_drafts, num_draft_tokens, num_accepted_tokens, num_fallback_steps, "
                "accepted_per_pos, k_histogram FROM request_stats"):
        assert sum(per_pos) == num_accepted
        assert k_histogram[0] == fallback and sum(k_histogram[1:]) == num_drafts
        assert sum(k * n for k, n in enumerate(k_histogram)) == draft_tokens
        drafts[run_id] = drafts.get(run_id, 0) + num_drafts
        accepted[run_id] = _add_lists(accepted.get(run_id, []), per_pos)
        k_steps[run_id] = _add_lists(k_steps.get(run_id, []), k_histogram)
    by_position = []
    for run_id, per_pos in sorted(accepted.items()):
        before = drafts[run_id]  # position 0 is conditional on the draft itself
        for pos, num in enumerate(per_pos):
            by_position.append((run_id, pos, num, drafts[run_id], _ratio(num, drafts[run_id]), _ratio(num, before)))
            before = num
    assert _rounded(query(db, "SELECT run_id, pos, num_accepted_tokens, num_drafts, acceptance_rate, conditional_rate "
                              "FROM v_acceptance_by_position ORDER BY run_id, pos")) == _rounded(by_position)
    k_usage = [(run_id, k, num, _ratio(num, sum(histogram)))
               for run_id, histogram in sorted(k_steps.items()) for k, num in enumerate(histogram)]
    assert _rounded(query(db, "SELECT run_id, k, num_steps, share FROM v_k_usage ORDER BY run_id, k")) == _rounded(k_usage)


def _add_lists(a: list[int], b: list[int]) -> list[int]:
    return [x + y for x, y in itertools.zip_longest(a, b, fillvalue=0)]


def _ratio(num: int, den: int) -> float | None:
    return num / den if den else None


def _rounded(rows: list[tuple]) -> list[tuple]:
    return [tuple(round(v, 9) if isinstance(v, float) else v for v in row) for row in rows]


def test_cancelled_then_rerun_by_deployment_gives_each_prompt_once(worker, prefect_api, tmp_path):
    """Shards stream through one engine, so a fault finds several of them in flight.
    1. A deployment run is cancelled from Prefect mid-stream (its first shard staged, the others
    in the engine): within 30 s none of its processes remains, it ends Cancelled, keeps the shard
    it finished and commits no partial one. 2. The same deployment again:
    completes, every prompt exactly once, the shards committed before untouched."""
    env, worker_log, worker_proc = worker
    rows = humaneval_rows(limit=22)
    write_shard(tmp_path / "src/he-000.parquet", rows[:4])
    # Longer completions behind the first shard: still in the engine when it is committed.
    write_shard(tmp_path / "src/he-001.parquet", [{**r, "max_tokens": LONG_TOKENS} for r in rows[4:10]])
    write_shard(tmp_path / "src/he-002.parquet", [{**r, "max_tokens": LONG_TOKENS} for r in rows[10:]])
    sizes = {"he-000.parquet": 4, "he-001.parquet": 6, "he-002.parquet": 12}
    db, staging = tmp_path / "r.duckdb", tmp_path / "staging"

    params = {"source": str(tmp_path / "src"), "db": str(db), "staging": str(staging)}
    cancel_mid_stream(env, worker_proc, params)
    committed = query(db, "SELECT shard_id, count(*) FROM outputs GROUP BY ALL ORDER BY 1") if db.exists() else []
    assert all(count == sizes[shard] for shard, count in committed), committed  # whole shards only
    (run_id,) = [p.name for p in staging.iterdir() if p.is_dir()]
    assert Staging(str(staging)).read_manifest(run_id, "he-000.parquet") is not None  # finished before: kept
    assert Staging(str(staging)).read_manifest(run_id, "he-002.parquet") is None  # cancelled in flight
    first_generated = query(db, "SELECT shard_id, generated_at FROM shards ORDER BY 1") if committed else []

    deployment_run(env, [f"{k}={v}" for k, v in params.items()])
    check_results(db, num_prompts=22, num_shards=3, engine_starts=2)  # he-000's, the rerun's
    for shard, generated_at in first_generated:
        assert query(db, "SELECT generated_at FROM shards WHERE shard_id = ?", [shard]) == [(generated_at,)]
    assert query(db, "SELECT count(*) FROM runs") == [(1,)]  # same source + config: same run


def cancel_mid_stream(env, worker_proc, params: dict) -> None:
    """A deployment run, cancelled with `prefect flow-run cancel` while its engine generates: once
    its first shard is staged, the others (hundreds of engine steps) still running."""
    from prefect import get_client
    from prefect.deployments import run_deployment

    flow_run = run_deployment("speculative-generation/on-demand", timeout=0, parameters={
        **params, "max_tokens": 16, "batch_size": 4, "kv_cache_gib": 1.0})

    staging, folder = Staging(params["staging"]), Path(params["staging"])

    def first_shard_staged() -> bool:  # its 4 short rows done: the 18 long ones are in the engine
        runs = [p.name for p in folder.iterdir() if p.is_dir()] if folder.is_dir() else []
        return any(staging.read_manifest(run_id, "he-000.parquet") is not None for run_id in runs)

    with get_client(sync_client=True) as client:
        deadline = time.monotonic() + 400
        while not first_shard_staged():  # an engine start (~30 s here), then generation
            state = client.read_flow_run(flow_run.id).state
            assert state is None or not state.is_final(), f"flow run ended {state} before a shard was staged"
            assert time.monotonic() < deadline, "no shard staged after 400 s"
            time.sleep(0.2)
    tree = descendants(worker_proc.pid)  # the flow-run process, its engine and worker processes
    cores = [p for p in tree if "EngineCore" in p.name()]
    # The shards must not finish while the CLI starts (seconds on 2 cores): hold the engine
    # until the run is Cancelling, then let it go so it can be shut down the usual way.
    for p in cores:
        p.suspend()
    try:
        done = prefect(env, "flow-run", "cancel", str(flow_run.id))
    finally:
        for p in cores:
            p.resume()
    assert done.returncode == 0, done.stdout + done.stderr
    assert not wait_until_gone(tree, 30), describe(tree)
    with get_client(sync_client=True) as client:
        wait_for(lambda: client.read_flow_run(flow_run.id).state.is_final(), 60, "final state")
        assert client.read_flow_run(flow_run.id).state.type.value == "CANCELLED"


def test_deployment_run_reads_and_stages_on_s3(worker, s3_server, make_bucket, tmp_path):
    env, worker_log, _ = worker
    make_bucket(s3_server, "e2e")
    from tasks import storage

    fs, _ = storage.filesystem("s3://e2e", storage.S3Options(s3_server, access_key_id="k", secret_access_key="s"))
    rows = humaneval_rows(limit=16)[10:]
    for i, part in enumerate((rows[:3], rows[3:])):
        write_shard(f"e2e/prompts/part-{i}.parquet", part, filesystem=fs)
    db = tmp_path / "s3.duckdb"
    # Engine options as `--param`s (JSON values): each reaches the engine vLLM started on the
    # worker, read back from what vLLM resolved (shards.engine), not from our parameters.
    deployment_run(env, ["source=s3://e2e/prompts", "staging=s3://e2e/staging", f"db={db}",
                         "max_num_batched_tokens=1024", "enable_prefix_caching=false",
                         'engine_args={"max_logprobs": 5}'])
    check_results(db, num_prompts=6, num_shards=2, engine_starts=1)  # one process, both shards
    for (engine,) in query(db, "SELECT engine FROM shards"):
        resolved = json.loads(engine)
        assert (resolved["max_num_batched_tokens"], resolved["enable_prefix_caching"], resolved["max_logprobs"],
                resolved["kv_cache_memory_bytes"]) == (1024, False, 5, 2**30), resolved
    assert query(db, "SELECT DISTINCT source_path LIKE 's3://e2e/prompts/%' FROM shards") == [(True,)]
    staged = fs.get_file_info(storage.pafs.FileSelector("e2e/staging", recursive=True))
    assert sum(1 for f in staged if f.path.endswith("manifest.json")) == 2
    for table in ("runs", "shards"):
        dump = query(db, f"SELECT string_agg(CAST(t AS VARCHAR), '') FROM {table} AS t")[0][0]
        assert SECRET not in dump, table
    assert SECRET not in worker_log.read_text()


def test_cancelling_a_fanout_parent_cancels_its_group_runs(worker, prefect_api, tmp_path):
    """The parent runs on the worker (no engine: it lists, submits and waits); its groups go
    to `gpu-shards`, whose pool has no worker here, so they wait Scheduled. Cancelling the
    parent cancels both."""
    from prefect import get_client
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterParentFlowRunId
    from prefect.deployments import run_deployment

    env, _, _ = worker
    rows = humaneval_rows(limit=2)
    for i, row in enumerate(rows):
        write_shard(tmp_path / f"src/part-{i}.parquet", [row])
    parent = run_deployment("speculative-generation-fanout/fanout", timeout=0, parameters={
        "source": str(tmp_path / "src"), "staging": str(tmp_path / "staging"), "db": str(tmp_path / "r.duckdb"),
        "num_groups": 2, "shard_deployment": "speculative-generation-shards/gpu-shards",
        "method": "none"})

    def children():
        with get_client(sync_client=True) as client:
            return client.read_flow_runs(flow_run_filter=FlowRunFilter(
                parent_flow_run_id=FlowRunFilterParentFlowRunId(any_=[parent.id])))

    wait_for(lambda: len(children()) == 2, 300, "two group runs submitted")
    done = prefect(env, "flow-run", "cancel", str(parent.id))
    assert done.returncode == 0, done.stdout + done.stderr
    wait_for(lambda: all(c.state.is_final() for c in children()), 60, "group runs cancelled")
    assert sorted(c.state.type.value for c in children()) == ["CANCELLED", "CANCELLED"]
    with get_client(sync_client=True) as client:
        wait_for(lambda: client.read_flow_run(parent.id).state.is_final(), 60, "parent final")
        assert client.read_flow_run(parent.id).state.type.value == "CANCELLED"


def test_the_nightly_deployment_never_runs_twice_at_once(worker, prefect_api):
    from prefect import get_client

    with get_client(sync_client=True) as client:
        nightly = client.read_deployment_by_name("speculative-generation/nightly")
    assert nightly.global_concurrency_limit is not None and nightly.global_concurrency_limit.limit == 1
    assert nightly.concurrency_options.collision_strategy == "CANCEL_NEW"
