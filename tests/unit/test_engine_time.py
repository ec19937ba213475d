"""Engine time attributed to requests, stored and compared (no engine): shard and run sums,
the results table, ingest into DuckDB, the views' tokens per engine-second and wall-clock
throughput, the fallback for runs without engine time, and the migration of an older
database."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import duckdb
import pyarrow as pa
import pytest

from specdec.results_table import RESULT_SCHEMA, results_to_table
from specdec.stats import RunStats, ShardStats, request_stats
from specdec.types import GenerationResult
from support.db import apply_schema_up_to, query
from support.synthetic_staging import manifest_for, stage_run, synthetic_results
from tasks.db import connect_for_write, migrate
from tasks.ingest import ingest, with_current_names
from tasks.report import report
from tasks.staging import Staging

RATE_SPEC, RATE_NONE = 0.005, 0.02  # engine seconds per output token: specdec 4x cheaper


def _result(i: int, tokens: int, engine_s: float) -> GenerationResult:
    return GenerationResult(id=f"q{i}", completion="", output_token_ids=list(range(tokens)), finish_reason="length",
                            stats=request_stats(tokens, [2], [1], k_ceiling=2), engine_s=engine_s)


def test_shard_and_run_engine_seconds_are_sums_of_their_requests():
    shard = ShardStats.of_results([_result(0, 10, 0.25), _result(1, 4, 0.5)])
    assert (shard.num_requests, shard.num_output_tokens, shard.engine_s) == (2, 14, 0.75)
    assert shard.tokens_per_engine_s == pytest.approx(14 / 0.75)
    assert ShardStats.aggregate([_result(0, 10, 0.25).stats]).engine_s == 0.0  # no engine time given
    other = ShardStats.of_results([_result(2, 6, 1.0)])
    run = RunStats.aggregate([shard, other])
    assert (run.num_shards, run.num_requests, run.engine_s) == (2, 3, 1.75)
    assert ShardStats().tokens_per_engine_s == 0.0


def test_engine_seconds_survive_the_manifest_json_and_older_manifests_have_none():
    shard = ShardStats.of_results([_result(0, 10, 0.375)])
    as_json = shard.to_dict()
    assert as_json["tokens_per_engine_s"] == pytest.approx(10 / 0.375)
    assert ShardStats.from_dict(as_json) == shard
    older = {k: v for k, v in as_json.items() if k not in ("engine_s", "tokens_per_engine_s")}
    assert ShardStats.from_dict(older) == dataclasses.replace(shard, engine_s=0.0)


def test_results_table_carries_engine_seconds_and_older_tables_read_as_unattributed():
    table = results_to_table([_result(0, 3, 0.125), _result(1, 2, 0.0)], "specdec", "h", {})
    assert table.schema.field("engine_s").type == pa.float64()
    assert table.column("engine_s").to_pylist() == [0.125, 0.0]
    old = table.drop_columns(["engine_s", "sample", "num_samples"])
    upgraded = with_current_names(old)
    assert upgraded.column("engine_s").to_pylist() == [0.0, 0.0]
    assert upgraded.select(RESULT_SCHEMA.names).schema == RESULT_SCHEMA


def _staged_pair(tmp_path, spec_rate: float = RATE_SPEC, none_rate: float = RATE_NONE,
                 edit: Callable[[Staging], None] | None = None) -> str:
    """A specdec run and a `none` run over the same two shards, staged (then `edit`ed) and
    ingested; returns the database."""
    db, staging = str(tmp_path / "results.duckdb"), Staging(str(tmp_path / "staging"))
    shards = {"a.parquet": 12, "b.parquet": 7}
    stage_run(staging, "spec", shards, generate_s=2.0, engine_s_per_token=spec_rate, wall_s=30.0,
              engine_start_s=5.0, engine_busy_s=4.0)
    stage_run(staging, "base", shards, method="none", generate_s=3.0, engine_s_per_token=none_rate, wall_s=45.0,
              engine_start_s=5.0)
    if edit is not None:
        edit(staging)
    for run_id in ("spec", "base"):
        ingest(db, staging, run_id)
    return db


def _tokens(db: str, run_id: str) -> int:
    return query(db, "SELECT sum(num_output_tokens) FROM shards WHERE run_id = ?", [run_id])[0][0]


def test_ingest_stores_engine_seconds_per_request_shard_and_run(tmp_path):
    db = _staged_pair(tmp_path)
    per_shard = query(db, "SELECT s.shard_id, s.engine_s, sum(r.engine_s), sum(r.num_output_tokens) "
                          "FROM shards s JOIN request_stats r USING (run_id, shard_id) WHERE run_id = 'spec' "
                          "GROUP BY ALL ORDER BY ALL")
    assert [row[0] for row in per_shard] == ["a.parquet", "b.parquet"]
    for _, shard_s, request_sum, tokens in per_shard:
        assert shard_s == pytest.approx(request_sum) and shard_s == pytest.approx(tokens * RATE_SPEC)
    assert query(db, "SELECT run_id, engine_busy_s FROM runs ORDER BY run_id") == [("base", None), ("spec", 4.0)]
    summary = query(db, "SELECT engine_s, tokens_per_engine_s, run_tokens_per_s, engine_busy_s FROM v_run_summary "
                        "WHERE run_id = 'spec'")[0]
    tokens = _tokens(db, "spec")
    assert summary == (pytest.approx(tokens * RATE_SPEC), pytest.approx(1 / RATE_SPEC),
                       pytest.approx(tokens / (30.0 - 5.0)), 4.0)
    shard_rates = query(db, "SELECT tokens_per_engine_s FROM v_shard_acceptance WHERE run_id = 'base'")
    assert [r for (r,) in shard_rates] == [pytest.approx(1 / RATE_NONE)] * 2


def test_method_comparison_on_tokens_per_engine_second_and_run_throughput(tmp_path):
    db = _staged_pair(tmp_path)
    row = query(db, "SELECT num_shards, tokens_per_engine_s, baseline_tokens_per_engine_s, speedup, speedup_basis, "
                    "tokens_per_s, baseline_tokens_per_s, run_tokens_per_s, baseline_run_tokens_per_s, run_speedup "
                    "FROM v_method_comparison WHERE run_id = 'spec' AND baseline_run_id = 'base'")
    spec, base = _tokens(db, "spec"), _tokens(db, "base")
    assert row == [(2, pytest.approx(1 / RATE_SPEC), pytest.approx(1 / RATE_NONE),
                    pytest.approx(RATE_NONE / RATE_SPEC), "engine_s",
                    pytest.approx(spec / 4.0), pytest.approx(base / 6.0),  # generate_s 2.0 / 3.0 per shard
                    pytest.approx(spec / 25.0), pytest.approx(base / 40.0), pytest.approx((spec / 25.0) / (base / 40.0)))]
    text = report(db, "spec").split("== Speed-up against runs without speculation")[1].split("\n== ")[0]
    assert "engine_s" in text and "speedup_basis" in text


def test_speedup_falls_back_to_generate_seconds_where_engine_time_is_unknown(tmp_path):
    db = _staged_pair(tmp_path / "baseline", none_rate=0.0)  # the baseline ran without attribution
    assert query(db, "SELECT count(*), count(engine_s) FROM request_stats WHERE run_id = 'base'") == [(19, 0)]
    assert query(db, "SELECT count(engine_s) FROM shards WHERE run_id = 'base'") == [(0,)]
    spec, base = _tokens(db, "spec"), _tokens(db, "base")
    row = query(db, "SELECT tokens_per_engine_s, speedup, speedup_basis FROM v_method_comparison WHERE run_id = 'spec'")
    assert row == [(None, pytest.approx((spec / 4.0) / (base / 6.0)), "generate_s")]
    assert query(db, "SELECT engine_s, tokens_per_engine_s FROM v_run_summary WHERE run_id = 'base'") == [(None, None)]


def test_one_shard_without_engine_time_makes_its_run_fall_back(tmp_path):
    def restage_a_without_engine_time(staging: Staging) -> None:  # as a sequential worker stages it
        table = synthetic_results("a.parquet", 12, engine_s_per_token=0.0)
        staging.write_shard(manifest_for("spec", "a.parquet", table, fingerprint="fp-a.parquet",
                                         config_hash="h-specdec", generate_s=2.0), table)

    db = _staged_pair(tmp_path, edit=restage_a_without_engine_time)
    assert query(db, "SELECT shard_id, engine_s IS NULL FROM shards WHERE run_id = 'spec' ORDER BY ALL") == [
        ("a.parquet", True), ("b.parquet", False)]
    spec, base = _tokens(db, "spec"), _tokens(db, "base")
    assert query(db, "SELECT tokens_per_engine_s, speedup, speedup_basis FROM v_method_comparison") == [
        (None, pytest.approx((spec / 4.0) / (base / 6.0)), "generate_s")]
    assert query(db, "SELECT engine_s FROM v_run_summary WHERE run_id = 'spec'") == [(None,)]


def test_samples_speedup_compares_on_engine_seconds_too(tmp_path):
    db = _staged_pair(tmp_path)
    assert query(db, "SELECT samples, method, speedup, speedup_basis FROM v_samples_speedup") == [
        (1, "specdec", pytest.approx(RATE_NONE / RATE_SPEC), "engine_s")]


def test_an_older_database_gains_the_columns_with_its_rows_unattributed(tmp_path):
    path = tmp_path / "old.duckdb"
    con = duckdb.connect(str(path))
    # a database from before engine time; today's views that need the new columns left out
    apply_schema_up_to(con, "0022_source_stats", views_left_out=(
        "v_method_comparison", "v_run_summary", "v_samples_speedup", "v_shard_acceptance", "v_pilot_decisions"))
    con.execute("INSERT INTO runs (run_id, source, method, config_hash, config, status, wall_s, engine_start_s) "
                "VALUES ('old', 's', 'specdec', 'h', '{}', 'completed', 20.0, 2.0)")
    con.execute("INSERT INTO shards (run_id, shard_id, source_path, fingerprint, config_hash, status, num_prompts, "
                "num_rejected, num_output_tokens, num_steps, num_drafts, num_draft_tokens, num_accepted_tokens, "
                "generate_s) VALUES ('old', 'a', 'a', 'fp', 'h', 'ingested', 1, 0, 90, 30, 20, 80, 60, 3.0)")
    con.execute("INSERT INTO request_stats (run_id, shard_id, id, method, config_hash, num_output_tokens, num_steps, "
                "num_drafts, num_draft_tokens, num_accepted_tokens, acceptance_rate, tokens_per_forward, "
                "num_fallback_steps, accepted_per_pos, k_histogram) "
                "VALUES ('old', 'a', 'q', 'specdec', 'h', 90, 30, 20, 80, 60, 0.75, 3.0, 9, [20], [9, 20])")
    applied = migrate(con)
    assert {"0023_request_stats_engine_s", "0024_shards_engine_s", "0025_runs_engine_busy_s",
            "v_method_comparison"} <= set(applied)
    assert con.execute("SELECT engine_s FROM request_stats").fetchall() == [(None,)]
    assert con.execute("SELECT engine_s FROM shards").fetchall() == [(None,)]
    assert con.execute("SELECT engine_busy_s, engine_s, run_tokens_per_s FROM v_run_summary").fetchall() == [
        (None, None, pytest.approx(90 / 18.0))]
    con.close()
    staging = Staging(str(tmp_path / "staging"))
    stage_run(staging, "new", {"b.parquet": 4}, engine_s_per_token=RATE_SPEC)
    ingest(str(path), staging, "new")  # today's writer (migrates nothing more) takes new rows
    assert query(path, "SELECT count(engine_s) FROM request_stats WHERE run_id = 'new'") == [(4,)]
    con = connect_for_write(path)
    assert migrate(con) == []
    con.close()
