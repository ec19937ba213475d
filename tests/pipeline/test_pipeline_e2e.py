"""End to end with the real engine: a real Prefect server, a process worker, deployments from
prefect.yaml, `prefect deployment run ... --param ...`, local folders and the local S3
endpoint. Three flow runs start engines (each ~30-90 s on 2 cores), so shards are tiny."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from specdec.datasets import humaneval_rows
from support import BIN, REPO
from support.db import query
from support.processes import stop, wait_for
from support.shards import write_shard
from tasks.staging import Staging

pytestmark = pytest.mark.slow

SECRET = "e2e-secret-Zq81xv"  # must never show up in logs or DuckDB
FLOW_PARAMS = ["max_tokens=16", "batch_size=4", "kv_cache_gib=1"]


def prefect(env: dict[str, str], *args: str, timeout: float = 180) -> subprocess.CompletedProcess:
    return subprocess.run([str(BIN / "prefect"), *args], env=env, cwd=REPO, capture_output=True,
                          text=True, timeout=timeout)


@pytest.fixture(scope="module")
def worker(prefect_server, s3_server, tmp_path_factory):
    """Pools + `prefect deploy --all` from the checkout + one process worker on pool `cpu`."""
    env = {**prefect_server, "PWD": str(REPO), "AWS_ENDPOINT_URL": s3_server,
           "AWS_ACCESS_KEY_ID": "e2e-key", "AWS_SECRET_ACCESS_KEY": SECRET, "AWS_REGION": "us-east-1"}
    for pool in ("cpu", "gpu"):
        done = prefect(env, "work-pool", "create", pool, "--type", "process")
        assert done.returncode == 0, done.stdout + done.stderr
    done = prefect(env, "--no-prompt", "deploy", "--all")
    assert done.returncode == 0, done.stdout + done.stderr
    for name in ("nightly", "on-demand", "gpu"):
        assert f"speculative-generation/{name}" in done.stdout
    log_path = tmp_path_factory.mktemp("worker") / "worker.log"
    log = open(log_path, "w")
    proc = subprocess.Popen([str(BIN / "prefect"), "worker", "start", "--pool", "cpu", "--type", "process"],
                            env=env, cwd=tmp_path_factory.mktemp("worker-cwd"), stdout=log, stderr=subprocess.STDOUT)
    wait_for(lambda: "started" in log_path.read_text().lower(), 60, "prefect worker", proc)
    yield env, log_path
    stop(proc, (signal.SIGINT, signal.SIGINT), timeout=30)  # a worker needs SIGINT twice
    log.close()


def deployment_run(env: dict[str, str], params: list[str], timeout: float = 480) -> str:
    args = ["deployment", "run", "speculative-generation/on-demand", "--watch", "--watch-timeout", str(int(timeout))]
    for p in params + FLOW_PARAMS:
        args += ["--param", p]
    done = prefect(env, *args, timeout=timeout + 60)
    assert done.returncode == 0 and "Completed" in done.stdout, done.stdout[-3000:] + done.stderr[-3000:]
    return done.stdout


def check_results(db: Path, num_prompts: int, num_shards: int, engine_starts: int) -> None:
    """Every prompt exactly once, statistics for every request, views with rows."""
    assert query(db, "SELECT count(*), count(DISTINCT id) FROM outputs") == [(num_prompts, num_prompts)]
    assert query(db, "SELECT count(*) FROM request_stats WHERE num_steps > 0 AND num_output_tokens > 0") == [(num_prompts,)]
    assert query(db, "SELECT count(*) FROM outputs o ANTI JOIN request_stats r USING (run_id, shard_id, id)") == [(0,)]
    assert query(db, "SELECT status, shards_done, num_prompts FROM v_run_summary") == [("completed", num_shards, num_prompts)]
    assert query(db, "SELECT input_rows, output_rows, quarantined_rows, balanced FROM v_run_accounting") == [
        (num_prompts, num_prompts, 0, True)]
    assert query(db, "SELECT count(*) FROM v_shard_acceptance WHERE tokens_per_s > 0") == [(num_shards,)]
    for view in ("v_acceptance_by_position", "v_k_usage"):
        assert query(db, f"SELECT count(*) FROM {view}")[0][0] > 0, view
    # One engine start per process that generated, reused for its later shards.
    starts = [s for (s,) in query(db, "SELECT engine_start_s FROM shards ORDER BY shard_id")]
    assert sum(1 for s in starts if s > 0) == engine_starts, starts


def test_killed_mid_shard_then_rerun_by_deployment_gives_each_prompt_once(worker, tmp_path):
    env, _ = worker
    rows = humaneval_rows(limit=10)
    write_shard(tmp_path / "src/he-000.parquet", rows[:4])
    write_shard(tmp_path / "src/he-001.parquet", rows[4:])
    db, staging = tmp_path / "r.duckdb", tmp_path / "staging"
    out_path = tmp_path / "run1.log"
    with open(out_path, "w") as out:
        proc = subprocess.Popen(
            [str(BIN / "specdec"), "run", "--source", str(tmp_path / "src"), "--db", str(db),
             "--staging", str(staging), "--max-tokens", "16", "--batch-size", "4", "--kv-cache-gib", "1"],
            env=env, cwd=REPO, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            wait_for(lambda: "shard he-001.parquet: 6 valid row(s)" in out_path.read_text(), 400,
                     "second shard read", proc)
            time.sleep(1.0)  # now inside the second shard's generation
        finally:
            os.killpg(proc.pid, signal.SIGKILL)  # the run's own process group: flow + engine
            proc.wait(30)
    assert query(db, "SELECT shard_id, count(*) FROM outputs GROUP BY ALL") == [("he-000.parquet", 4)]
    (run_id,) = query(db, "SELECT run_id FROM runs")[0]
    assert Staging(str(staging)).read_manifest(run_id, "he-001.parquet") is None  # not committed
    first_generated = query(db, "SELECT generated_at FROM shards WHERE shard_id = 'he-000.parquet'")
    deployment_run(env, [f"source={tmp_path / 'src'}", f"db={db}", f"staging={staging}"])
    # Two processes generated (the killed run: shard 0; the deployment's run: shard 1).
    check_results(db, num_prompts=10, num_shards=2, engine_starts=2)
    assert query(db, "SELECT generated_at FROM shards WHERE shard_id = 'he-000.parquet'") == first_generated
    assert query(db, "SELECT count(*) FROM runs") == [(1,)]  # same source + config: same run


def test_deployment_run_reads_and_stages_on_s3(worker, s3_server, make_bucket, tmp_path):
    env, worker_log = worker
    make_bucket(s3_server, "e2e")
    from tasks import storage

    fs, _ = storage.filesystem("s3://e2e", storage.S3Options(s3_server, access_key_id="k", secret_access_key="s"))
    rows = humaneval_rows(limit=16)[10:]
    for i, part in enumerate((rows[:3], rows[3:])):
        write_shard(f"e2e/prompts/part-{i}.parquet", part, filesystem=fs)
    db = tmp_path / "s3.duckdb"
    deployment_run(env, ["source=s3://e2e/prompts", "staging=s3://e2e/staging", f"db={db}"])
    check_results(db, num_prompts=6, num_shards=2, engine_starts=1)  # one process, both shards
    assert query(db, "SELECT DISTINCT source_path LIKE 's3://e2e/prompts/%' FROM shards") == [(True,)]
    staged = fs.get_file_info(storage.pafs.FileSelector("e2e/staging", recursive=True))
    assert sum(1 for f in staged if f.path.endswith("manifest.json")) == 2
    for table in ("runs", "shards"):
        dump = query(db, f"SELECT string_agg(CAST(t AS VARCHAR), '') FROM {table} AS t")[0][0]
        assert SECRET not in dump, table
    assert SECRET not in worker_log.read_text()
