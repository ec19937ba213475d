"""Ingest of staged results into DuckDB, views and `specdec report/sql` (no engine)."""

from __future__ import annotations

import duckdb
import pyarrow as pa
import pytest

from tasks.report import report, run_sql
from tasks.synthetic_staging import manifest_for, synthetic_results
from specdec.cli import main as cli_main
from tasks.ingest import IngestError, ingest
from tasks.staging import RunManifest, Staging


def stage_run(staging: Staging, run_id: str, shards: dict[str, int], method: str = "specdec",
              fingerprint: str = "fp") -> None:
    staging.write_run(RunManifest(
        run_id=run_id, run_name=None, flow_run_id=None, source="synthetic", method=method,
        config_hash="h-" + method, config={"method": method}, status="completed",
        num_shards=len(shards), started_at="2026-01-01T00:00:00", finished_at="2026-01-01T00:01:00",
        wall_s=60.0, engine_start_s=5.0,
    ))
    for i, (shard_id, rows) in enumerate(shards.items()):
        table = synthetic_results(shard_id, rows, seed=i, method=method)
        staging.write_shard(manifest_for(run_id, shard_id, table, fingerprint=f"{fingerprint}-{shard_id}",
                                         config_hash="h-" + method), table)


def counts(db) -> dict[str, int]:
    con = duckdb.connect(str(db), read_only=True)
    try:
        return {t: con.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
                for t in ("runs", "shards", "outputs", "request_stats", "position_stats")}
    finally:
        con.close()


def test_ingest_loads_every_row_and_reingest_never_duplicates(tmp_db, staging_dir):
    staging = Staging(str(staging_dir))
    stage_run(staging, "r1", {"a.parquet": 30, "sub/b.parquet": 20})
    first = ingest(str(tmp_db), staging, "r1")
    assert (first.num_shards, first.num_rows) == (2, 50)
    expected = {"runs": 1, "shards": 2, "outputs": 50, "request_stats": 50, "position_stats": 8}
    assert counts(tmp_db) == expected
    again = ingest(str(tmp_db), staging, "r1")  # unchanged: skipped
    assert (again.num_shards, again.num_skipped) == (0, 2)
    # Same shard staged again with new content: its rows are replaced, not added.
    table = synthetic_results("a.parquet", 12, seed=9)
    staging.write_shard(manifest_for("r1", "a.parquet", table, fingerprint="fp-changed"), table)
    ingest(str(tmp_db), staging, "r1", ["a.parquet"])
    assert counts(tmp_db)["outputs"] == 32


def test_views_and_report_answer_the_questions(tmp_db, staging_dir, capsys):
    staging = Staging(str(staging_dir))
    stage_run(staging, "spec", {"a.parquet": 10, "b.parquet": 10}, method="specdec")
    stage_run(staging, "base", {"a.parquet": 10, "b.parquet": 10}, method="none")
    ingest(str(tmp_db), staging, "spec")
    ingest(str(tmp_db), staging, "base")
    con = duckdb.connect(str(tmp_db), read_only=True)
    rate = con.execute("SELECT sum(num_accepted_tokens) / sum(num_draft_tokens) FROM request_stats WHERE run_id = 'spec'").fetchone()[0]
    view_rate = con.execute("SELECT acceptance_rate FROM v_run_summary WHERE run_id = ?", ["spec"]).fetchone()[0]
    assert view_rate == pytest.approx(rate)
    positions = con.execute("SELECT pos, acceptance_rate FROM v_acceptance_by_position WHERE run_id = 'spec' ORDER BY pos").fetchall()
    assert [p for p, _ in positions] == [0, 1, 2, 3]
    assert all(a >= b for (_, a), (_, b) in zip(positions, positions[1:]))
    k_steps = con.execute("SELECT sum(num_steps) FROM v_k_usage WHERE run_id = 'spec'").fetchone()[0]
    assert k_steps == con.execute("SELECT sum(num_drafts) FROM request_stats WHERE run_id = 'spec'").fetchone()[0]
    comparison = con.execute("SELECT run_id, baseline_run_id, num_shards, speedup FROM v_method_comparison").fetchall()
    assert [(r[0], r[1], r[2]) for r in comparison] == [("spec", "base", 2)]
    con.close()
    assert cli_main(["report", "--db", str(tmp_db), "--run", "spec"]) == 0
    out = capsys.readouterr().out
    for title in ("Runs", "Acceptance by draft position", "Speed-up"):
        assert title in out
    assert "base" not in out.split("== Shards")[0]  # --run filters
    assert cli_main(["sql", "--db", str(tmp_db), "SELECT count(*) AS n FROM outputs"]) == 0
    assert capsys.readouterr().out.split()[-1] == "40"


def test_inconsistent_staging_is_refused_naming_the_shard(tmp_db, staging_dir):
    staging = Staging(str(staging_dir))
    table = synthetic_results("a.parquet", 5)
    manifest = manifest_for("r1", "a.parquet", table)
    manifest.num_prompts = 6
    staging.write_shard(manifest, table)
    with pytest.raises(IngestError, match="r1 shard a.parquet: staged 5 results for 6 prompts"):
        ingest(str(tmp_db), staging, "r1")
    assert counts(tmp_db)["outputs"] == 0


def test_ingest_failure_mid_shard_rolls_back(tmp_db, staging_dir, monkeypatch):
    staging = Staging(str(staging_dir))
    stage_run(staging, "r1", {"a.parquet": 10})
    ingest(str(tmp_db), staging, "r1")
    table = synthetic_results("a.parquet", 4, seed=3)
    staging.write_shard(manifest_for("r1", "a.parquet", table, fingerprint="new"), table)
    import tasks.ingest as ingest_mod

    real = ingest_mod._insert_shard_row
    monkeypatch.setattr(ingest_mod, "_insert_shard_row", lambda *a: (_ for _ in ()).throw(OSError("boom")))
    with pytest.raises(OSError):
        ingest(str(tmp_db), staging, "r1")
    assert counts(tmp_db)["outputs"] == 10  # old rows intact
    monkeypatch.setattr(ingest_mod, "_insert_shard_row", real)
    ingest(str(tmp_db), staging, "r1")
    assert counts(tmp_db)["outputs"] == 4
