"""The flow's orchestration against a real Prefect server, with a test double for the engine
(`EchoEngine`): shard listing, validation, staging, ingest, resume and failure handling are
real; only token generation is replaced so these tests run in seconds. The real engine runs
in test_pipeline_e2e.py."""

from __future__ import annotations

import pytest

from flows.generation import speculative_generation
from support.db import query
from support.shards import write_shard

pytestmark = pytest.mark.slow  # starts the session's Prefect server


def artifact_keys() -> set[str]:
    from prefect import get_client

    with get_client(sync_client=True) as client:
        return {a.key for a in client.read_artifacts()}


def run(tmp_path, **kw):
    return speculative_generation(source=str(tmp_path / "src"), db=str(tmp_path / "r.duckdb"),
                                  staging=str(tmp_path / "staging"), max_tokens=8, k_max=2, **kw)


def test_flow_ingests_every_prompt_and_resumes_without_regenerating(tmp_path, prefect_api, echo_engine):
    write_shard(tmp_path / "src/a.parquet", [{"id": f"a{i}", "prompt": f"prompt a {i}"} for i in range(5)])
    write_shard(tmp_path / "src/sub/b.parquet", [{"id": "b0", "prompt": "prompt b"}, {"id": "b1", "prompt": ""}])
    (tmp_path / "src/notes.txt").write_text("not a shard")
    first = run(tmp_path)
    db = tmp_path / "r.duckdb"
    assert first["num_prompts"] == 6
    assert query(db, "SELECT count(*), count(DISTINCT id) FROM outputs") == [(6, 6)]
    assert query(db, "SELECT count(*) FROM request_stats") == [(6,)]
    assert query(db, "SELECT shard_id, row_index, id FROM quarantine") == [("sub/b.parquet", 1, "b1")]
    assert query(db, "SELECT status, num_shards FROM runs") == [("completed", 2)]
    assert query(db, "SELECT count(*) FROM v_shard_acceptance") == [(2,)]
    keys = artifact_keys()
    assert f"shards-{first['run_id']}" in keys and f"summary-{first['run_id']}" in keys
    calls = len(echo_engine)
    again = run(tmp_path)  # same source + config: same run id, nothing to generate
    assert again["run_id"] == first["run_id"] and len(echo_engine) == calls
    write_shard(tmp_path / "src/a.parquet", [{"id": "a0", "prompt": "changed"}])
    run(tmp_path)  # a changed shard is generated again and its rows replaced
    assert len(echo_engine) == calls + 1
    assert query(db, "SELECT shard_id, count(*) FROM outputs GROUP BY ALL ORDER BY 1") == [
        ("a.parquet", 1), ("sub/b.parquet", 1)]


def test_unreadable_shard_is_recorded_and_the_others_complete(tmp_path, prefect_api, echo_engine):
    write_shard(tmp_path / "src/good.parquet", [{"id": "g0", "prompt": "hello there"}])
    (tmp_path / "src/bad.parquet").write_bytes(b"this is not parquet")
    with pytest.raises(RuntimeError, match="bad.parquet"):
        run(tmp_path, run_name="with-bad-shard")
    db = tmp_path / "r.duckdb"
    rows = dict(query(db, "SELECT shard_id, status FROM shards"))
    assert rows == {"good.parquet": "ingested", "bad.parquet": "failed"}
    error = query(db, "SELECT error FROM shards WHERE shard_id = 'bad.parquet'")[0][0]
    assert "bad.parquet" in error and "Parquet" in error
    assert query(db, "SELECT status FROM runs") == [("failed",)]


def test_invalid_parameters_fail_before_any_work(tmp_path, prefect_api, echo_engine):
    write_shard(tmp_path / "src/a.parquet", [{"id": "a", "prompt": "p"}])
    with pytest.raises(Exception, match="k_max"):
        run(tmp_path, k_max=0)
    with pytest.raises(Exception, match="ngram_min"):
        run(tmp_path, ngram_min=3, ngram_max=2)
    with pytest.raises(Exception, match="method"):
        run(tmp_path, method="medusa")
    with pytest.raises(Exception, match="not a model folder"):
        run(tmp_path, model=str(tmp_path / "no-such-model"))
    with pytest.raises(Exception, match="not an existing folder"):
        speculative_generation(source=str(tmp_path / "missing"), db=str(tmp_path / "r.duckdb"))
    assert not (tmp_path / "r.duckdb").exists() and not echo_engine
