"""Faults a real run meets: flaky or unreachable S3, a DuckDB file held by another process,
a task killed while staging. Each ends in success after retries, or in a clear failure that
leaves no partial rows. (A worker killed mid-shard, then the run resumed, is in
test_pipeline_e2e.py.)"""

from __future__ import annotations

import logging
import subprocess
import sys
from urllib.parse import urlparse

import pytest

import tasks.db as db_mod
from support import REPO
from support.db import query
from support.flaky_proxy import FlakyProxy
from support.prefect_records import task_runs
from support.processes import stop, wait_for
from support.shards import write_shard
from tasks import storage
from tasks.db import DatabaseLockedError
from tasks.ingest import IngestError, ingest
from tasks.staging import Staging
from support.synthetic_staging import manifest_for, synthetic_results


def stage(staging: Staging, shard_id: str, rows: int, seed: int = 0, fingerprint: str = "fp"):
    table = synthetic_results(shard_id, rows, seed=seed)
    return staging.write_shard(manifest_for("r1", shard_id, table, fingerprint=fingerprint), table)


def python(*code_and_args: str, **kw) -> subprocess.Popen:
    env = {"PYTHONPATH": str(REPO), "PATH": ""}
    return subprocess.Popen([sys.executable, "-c", *code_and_args], env=env, cwd=REPO,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, **kw)


# Holds the file until its stdin closes: the test lets go when it chooses, never on a timer.
HOLD_LOCK = "import duckdb, sys; c = duckdb.connect(sys.argv[1]); print('locked', flush=True); sys.stdin.read()"


def hold_lock(db) -> subprocess.Popen:
    proc = python(HOLD_LOCK, str(db), stdin=subprocess.PIPE)
    wait_for(lambda: proc.stdout.readline().strip() == "locked", 60, "lock holder", proc)
    return proc


class ReleaseWhenIngestWaits(logging.Handler):
    """Lets the lock holder go once ingest has reported that it waits for the lock."""

    def __init__(self, holder: subprocess.Popen) -> None:
        super().__init__()
        self.holder = holder

    def emit(self, record: logging.LogRecord) -> None:
        if "is locked by another process" in record.getMessage() and not self.holder.stdin.closed:
            self.holder.stdin.close()


# --- DuckDB file held by another process ---------------------------------------------------

def test_ingest_waits_for_a_locked_database_then_succeeds(tmp_db, staging_dir, caplog):
    staging = Staging(str(staging_dir))
    stage(staging, "a.parquet", 10)
    ingest(str(tmp_db), staging, "r1")  # creates the file
    stage(staging, "b.parquet", 5)
    holder = hold_lock(tmp_db)
    release = ReleaseWhenIngestWaits(holder)
    logging.getLogger("tasks.ingest").addHandler(release)
    try:
        with caplog.at_level(logging.WARNING, logger="tasks.ingest"):
            report = ingest(str(tmp_db), staging, "r1")
        assert holder.wait(30) == 0  # ingest got in only after the holder let go
    finally:
        logging.getLogger("tasks.ingest").removeHandler(release)
        stop(holder)
    assert report.num_rows == 5
    assert any("is locked by another process; retrying in" in r.getMessage() for r in caplog.records)
    assert query(tmp_db, "SELECT shard_id, count(*) FROM outputs GROUP BY ALL ORDER BY 1") == [
        ("a.parquet", 10), ("b.parquet", 5)]


def test_ingest_gives_up_on_a_lock_held_too_long_with_a_clear_error(tmp_db, staging_dir, monkeypatch):
    staging = Staging(str(staging_dir))
    stage(staging, "a.parquet", 10)
    ingest(str(tmp_db), staging, "r1")
    stage(staging, "b.parquet", 5)
    monkeypatch.setattr(db_mod, "LOCK_WAIT_S", 2.0)
    holder = hold_lock(tmp_db)
    try:
        with pytest.raises(DatabaseLockedError, match=f"{tmp_db.name} is still locked by another process after 2 s"):
            ingest(str(tmp_db), staging, "r1")
    finally:
        stop(holder)
    assert query(tmp_db, "SELECT shard_id, count(*) FROM outputs GROUP BY ALL") == [("a.parquet", 10)]  # intact
    assert ingest(str(tmp_db), staging, "r1").num_rows == 5


# --- staged files of a crashed task -----------------------------------------------------------

CRASH_WHILE_STAGING = """
import os, sys
from tests.support.synthetic_staging import manifest_for, synthetic_results
from tasks import storage
from tasks.staging import Staging
real, point = storage.write_bytes_atomically, sys.argv[2]
def crash(fs, path, data):
    if point == "results" and path.endswith("results.parquet"):
        with open(path + ".tmp-" + str(os.getpid()), "wb") as f:
            f.write(data[: len(data) // 2])  # half the bytes are on disk when the process dies
        os._exit(9)
    if point == "marker" and path.endswith("manifest.json"):
        os._exit(9)  # the new results are in place, the commit marker is not
    real(fs, path, data)
storage.write_bytes_atomically = crash
table = synthetic_results("a.parquet", 7, seed=5)
Staging(sys.argv[1]).write_shard(manifest_for("r1", "a.parquet", table, fingerprint="new"), table)
"""


@pytest.mark.parametrize("point", ["results", "marker"])
def test_staging_killed_midway_is_never_ingested(tmp_db, staging_dir, point):
    staging = Staging(str(staging_dir))
    stage(staging, "a.parquet", 10)
    stage(staging, "b.parquet", 4)
    ingest(str(tmp_db), staging, "r1")
    crashed = python(CRASH_WHILE_STAGING, str(staging_dir), point)
    assert crashed.wait(60) == 9
    assert staging.committed_shard_ids("r1") == ["b.parquet"]  # a.parquet's marker went first
    ingest(str(tmp_db), staging, "r1")  # ingests what is committed: a.parquet's old rows stay whole
    assert query(tmp_db, "SELECT shard_id, count(*) FROM outputs GROUP BY ALL ORDER BY 1") == [
        ("a.parquet", 10), ("b.parquet", 4)]
    with pytest.raises(IngestError, match="shard a.parquet: not committed"):
        ingest(str(tmp_db), staging, "r1", ["a.parquet"])
    stage(staging, "a.parquet", 7, seed=5, fingerprint="new")  # the re-run stages it again
    ingest(str(tmp_db), staging, "r1")
    assert query(tmp_db, "SELECT shard_id, count(*) FROM outputs GROUP BY ALL ORDER BY 1") == [
        ("a.parquet", 7), ("b.parquet", 4)]


def test_results_changed_after_commit_are_refused(tmp_db, staging_dir):
    staging = Staging(str(staging_dir))
    stage(staging, "a.parquet", 10)
    path = next(staging_dir.rglob("results.parquet"))
    path.write_bytes(path.read_bytes()[:-100])  # truncated behind the manifest's back
    with pytest.raises(IngestError, match="r1 shard a.parquet: staged results unusable, not ingested"):
        ingest(str(tmp_db), staging, "r1")
    assert query(tmp_db, "SELECT count(*) FROM outputs") == [(0,)]


# --- S3 failing or unreachable for a while (real Prefect server, EchoEngine) -------------------

@pytest.fixture
def flaky_s3(s3_env, make_bucket):
    """Bucket `flaky` on the local S3 endpoint, reached through a proxy that can go down."""
    make_bucket(s3_env, "flaky")
    target = urlparse(s3_env)
    proxy = FlakyProxy(target.hostname, target.port)
    yield proxy
    proxy.close()


class OneAttemptS3(storage.pafs.S3FileSystem):
    """pyarrow's S3 filesystem without the client's own retries."""

    def __init__(self, **kwargs) -> None:
        super().__init__(retry_strategy=storage.pafs.AwsStandardS3RetryStrategy(max_attempts=1), **kwargs)


def put_shards(endpoint: str, count: int, rows: int) -> None:
    fs, _ = storage.filesystem("s3://flaky", storage.S3Options(endpoint))
    for i in range(count):
        prompts = [{"id": f"s{i}-{j}", "prompt": f"prompt {i} {j}"} for j in range(rows)]
        write_shard(f"flaky/prompts/s{i}.parquet", prompts, filesystem=fs)


def run_counts(task_runs) -> dict[str, int]:
    """{task run name: most tries} of a flow run's task runs."""
    counts: dict[str, int] = {}
    for tr in task_runs:
        counts[tr.name] = max(counts.get(tr.name, 0), tr.run_count)
    return counts


def task_run_counts(flow_run_id, done) -> dict[str, int]:
    """run_counts once `done(counts)` holds: the server records task runs from events, after
    the flow has returned."""
    return run_counts(task_runs([flow_run_id], lambda runs: done(run_counts(runs))))


def flow_kwargs(tmp_path, proxy: FlakyProxy) -> dict:
    # The S3 server lives for the session: a run name of the test's own keeps resume out of it.
    return dict(source="s3://flaky/prompts", staging="s3://flaky/staging", db=str(tmp_path / "r.duckdb"),
                s3_endpoint_url=proxy.endpoint, max_tokens=8, run_name=tmp_path.name[:60])


@pytest.mark.slow
def test_s3_outage_is_retried_with_backoff_then_the_run_completes(tmp_path, prefect_api, echo_engine, flaky_s3):
    from flows.generation import speculative_generation

    put_shards(flaky_s3.endpoint, 2, 3)
    flaky_s3.outage(10.0)  # longer than the S3 client's own quick retries: the task must back off and retry
    state = speculative_generation(**flow_kwargs(tmp_path, flaky_s3), return_state=True)
    assert state.is_completed(), state.message
    assert flaky_s3.num_refused > 0
    # the run's first I/O on staging: reading back an earlier attempt's decisions, then recording the run
    first_io = ("read-run", "record-run")
    counts = task_run_counts(state.state_details.flow_run_id,
                             lambda counts: any(n > 1 and name.startswith(first_io) for name, n in counts.items()))
    retried = {name for name, n in counts.items() if n > 1}
    assert any(name.startswith(first_io) for name in retried), retried
    db = tmp_path / "r.duckdb"
    assert query(db, "SELECT count(*), count(DISTINCT id) FROM outputs") == [(6, 6)]
    assert query(db, "SELECT status FROM runs") == [("completed",)]


@pytest.mark.slow
def test_s3_gone_for_good_fails_clearly_after_the_retry_budget_without_partial_rows(
        tmp_path, prefect_api, echo_engine, flaky_s3, monkeypatch):
    import specdec.generate as generate_mod
    from support.echo_engine import EchoEngine
    from flows.generation import speculative_generation
    from tasks import prefect_tasks as t

    put_shards(flaky_s3.endpoint, 2, 3)
    for name in ("stage_shard", "record_run", "ingest"):  # same retries, shorter waits
        monkeypatch.setattr(t, name, getattr(t, name).with_options(retry_delay_seconds=[0.5, 1, 2]))
    # One attempt a call for the S3 client (its own three, with backoff, cost 1.8 s a failing
    # call): the flow's task retries are under test, not the client's.
    monkeypatch.setattr(storage.pafs, "S3FileSystem", OneAttemptS3)

    ingest_task = t.ingest

    def ingest_then_outage(*args, **kwargs):  # S3 goes for good once the first shard is in DuckDB
        report = ingest_task(*args, **kwargs)
        flaky_s3.down = True
        return report

    monkeypatch.setattr(t, "ingest", ingest_then_outage)
    monkeypatch.setattr(generate_mod, "get_engine", lambda *a: (EchoEngine(), 0.0))
    state = speculative_generation(**flow_kwargs(tmp_path, flaky_s3), return_state=True)
    assert state.is_failed()
    message = str(state.message) + str(pytest.raises(Exception, state.result).value)
    assert "could not record the run's end in staging s3://flaky/staging" in message
    assert "s1.parquet" in message  # the shard that could not be staged is named
    counts = task_run_counts(state.state_details.flow_run_id, lambda counts: counts.get("stage s1.parquet") == 4)
    assert counts.get("stage s1.parquet") == 4  # first try + 3 retries
    db = tmp_path / "r.duckdb"
    assert query(db, "SELECT shard_id, count(*) FROM outputs GROUP BY ALL") == [("s0.parquet", 3)]
    assert query(db, "SELECT count(*) FROM shards WHERE shard_id = 's1.parquet'") == [(0,)]
