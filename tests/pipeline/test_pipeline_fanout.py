"""Scale-out: one run spread over two process workers of one work pool. The parent flow
splits 8 shards into two groups and submits them with `run_deployment` to the
`speculative-generation-shards/cpu-shards` deployment (from prefect.yaml); each worker takes
one group (`--limit 1`), generates it with its own real engine and stages to S3; the parent
ingests once. Every shard is generated exactly once, both workers work, DuckDB is complete."""

from __future__ import annotations

import collections
import io
import os
import signal
import subprocess

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pipeline_support import BIN, REPO, assert_loopback_only, stop, wait_for
from specdec.datasets import humaneval_rows
from tasks import storage

pytestmark = pytest.mark.slow

POOL = "shards-test"
NUM_SHARDS = 8


def prefect(env, *args, timeout=240):
    return subprocess.run([str(BIN / "prefect"), *args], env=env, cwd=REPO, capture_output=True, text=True,
                          timeout=timeout)


@pytest.fixture(scope="module")
def two_workers(prefect_server, s3_server, tmp_path_factory):
    env = {**prefect_server, "PWD": str(REPO), "AWS_ENDPOINT_URL": s3_server, "AWS_ACCESS_KEY_ID": "k",
           "AWS_SECRET_ACCESS_KEY": "s", "AWS_REGION": "us-east-1"}
    done = prefect(env, "work-pool", "create", POOL, "--type", "process")
    assert done.returncode == 0, done.stdout + done.stderr
    done = prefect(env, "--no-prompt", "deploy", "--name", "cpu-shards", "--pool", POOL)
    assert done.returncode == 0 and "speculative-generation-shards/cpu-shards" in done.stdout, done.stdout + done.stderr
    procs, logs = [], []
    for name in ("worker-a", "worker-b"):
        log_path = tmp_path_factory.mktemp(name) / "worker.log"
        log = open(log_path, "w")
        procs.append(subprocess.Popen(
            [str(BIN / "prefect"), "worker", "start", "--pool", POOL, "--type", "process", "--limit", "1",
             "--name", name],
            env={**env, "SPECDEC_WORKER_NAME": name}, cwd=log_path.parent, stdout=log, stderr=subprocess.STDOUT))
        logs.append((log, log_path))
    for proc, (_, log_path) in zip(procs, logs):
        wait_for(lambda: "started" in log_path.read_text().lower(), 90, "prefect worker", proc)
    yield env
    for proc in procs:
        stop(proc, (signal.SIGINT, signal.SIGINT), timeout=30)
    for log, _ in logs:
        log.close()


def put_shards(endpoint: str) -> None:
    fs, _ = storage.filesystem("s3://fanout", storage.S3Options(endpoint))
    rows = humaneval_rows(limit=NUM_SHARDS)
    for i, row in enumerate(rows):
        buf = io.BytesIO()
        pq.write_table(pa.Table.from_pylist([{"id": row["id"], "prompt": row["prompt"][:200]}]), buf)
        storage.write_bytes_atomically(fs, f"fanout/prompts/part-{i:03d}.parquet", buf.getvalue())


def task_and_log_records(flow_run_ids):
    from prefect import get_client
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterId, LogFilter, LogFilterFlowRunId

    with get_client(sync_client=True) as client:
        tasks = client.read_task_runs(flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=flow_run_ids)))
        logs = client.read_logs(log_filter=LogFilter(flow_run_id=LogFilterFlowRunId(any_=flow_run_ids)))
        children = client.read_flow_runs(flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=flow_run_ids)))
    return tasks, [entry.message for entry in logs], children


def test_one_run_spreads_over_two_workers_and_every_shard_runs_once(two_workers, s3_env, make_bucket,
                                                                     prefect_api, tmp_path):
    from prefect import get_client
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterName

    from flows.fanout import speculative_generation_fanout

    make_bucket(s3_env, "fanout")
    put_shards(s3_env)
    assert_loopback_only(os.getpid())  # server, S3 endpoint and both workers are up now
    db = tmp_path / "fanout.duckdb"
    result = speculative_generation_fanout(
        source="s3://fanout/prompts", staging="s3://fanout/staging", db=str(db), num_groups=2,
        shard_deployment="speculative-generation-shards/cpu-shards", run_name="fanout-1",
        # Speculation plays no part in how shards are shared out; `none` spares both workers
        # the specdec engine's start-up calibration.
        options={"max_tokens": 4, "batch_size": 4, "kv_cache_gib": 1.0, "method": "none"})
    groups = result["groups"]
    assert sorted(s for g in groups for s in g) == [f"part-{i:03d}.parquet" for i in range(NUM_SHARDS)]
    assert [len(g) for g in groups] == [4, 4]

    con = duckdb.connect(str(db), read_only=True)
    try:
        by_shard = dict(con.execute("SELECT shard_id, worker FROM shards WHERE status = 'ingested'").fetchall())
        assert con.execute("SELECT count(*), count(DISTINCT id) FROM outputs").fetchone() == (NUM_SHARDS, NUM_SHARDS)
        assert con.execute("SELECT status, shards_done, num_prompts FROM v_run_summary").fetchall() == [
            ("completed", NUM_SHARDS, NUM_SHARDS)]
        assert con.execute("SELECT balanced FROM v_run_accounting").fetchall() == [(True,)]
    finally:
        con.close()
    workers = {shard: worker.split(":")[0] for shard, worker in by_shard.items()}
    print("shard split:", sorted(workers.items()))
    assert collections.Counter(workers.values()) == {"worker-a": 4, "worker-b": 4}
    for group in groups:  # a group runs on one worker
        assert len({workers[s] for s in group}) == 1

    with get_client(sync_client=True) as client:
        runs = client.read_flow_runs(flow_run_filter=FlowRunFilter(name=FlowRunFilterName(like_="fanout-1-group-")))
    child_ids = [fr.id for fr in runs]
    assert len(child_ids) == 2
    tasks, messages, children = task_and_log_records(child_ids)
    generated = collections.Counter(tr.name.removeprefix("generate ") for tr in tasks if tr.name.startswith("generate "))
    assert generated == {f"part-{i:03d}.parquet": 1 for i in range(NUM_SHARDS)}  # each shard exactly once
    assert all(fr.state.is_completed() for fr in children)
    assert any(str(REPO / "flows" / "fanout.py") in m for m in messages)  # the workers ran this checkout
