"""Ingest of staged results into DuckDB, views and `specdec report/sql` (no engine)."""

from __future__ import annotations

import duckdb
import pyarrow as pa
import pytest

from tasks.report import report, run_sql
from support.synthetic_staging import manifest_for, stage_run, synthetic_results
from specdec.cli import main as cli_main
from tasks.ingest import IngestError, ingest
from tasks.staging import Staging


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
    with pytest.raises(IngestError, match=r"r1 shard a.parquet: staged results of 5 prompt\(s\) for 6 prompts"):
        ingest(str(tmp_db), staging, "r1")
    assert counts(tmp_db)["outputs"] == 0


@pytest.mark.parametrize("damage, message", [
    (lambda t: t.slice(0, t.num_rows - 1), "staged 11 results for 12 requests"),  # a sample missing
    (lambda t: t.set_column(1, "sample", pa.array([0, 0, 2] * 4, pa.int32())), "repeat a .request id, sample"),
    (lambda t: t.set_column(1, "sample", pa.array([1, 2, 3] * 4, pa.int32())), "miss or repeat samples"),
])
def test_staged_samples_must_be_complete_and_unique(tmp_db, staging_dir, damage, message):
    staging = Staging(str(staging_dir))
    table = synthetic_results("a.parquet", 12, samples=3)
    manifest = manifest_for("r1", "a.parquet", table)
    staging.write_shard(manifest, damage(table))
    with pytest.raises(IngestError, match=message):
        ingest(str(tmp_db), staging, "r1")
    assert counts(tmp_db)["outputs"] == 0


def test_samples_are_keyed_by_id_and_sample_and_their_views_answer(tmp_db, staging_dir):
    staging = Staging(str(staging_dir))
    # no engine time attributed (the sequential worker): speed-ups per shard generate second
    unattributed = {"engine_s_per_token": 0.0}
    stage_run(staging, "s4", {"a.parquet": 12, "b.parquet": 8}, samples=4, generate_s=1.0, **unattributed)
    stage_run(staging, "s4-none", {"a.parquet": 12, "b.parquet": 8}, method="none", samples=4, generate_s=2.0,
              **unattributed)
    stage_run(staging, "s1", {"a.parquet": 5}, fingerprint="other", **unattributed)  # from before samples: 1 each
    stage_run(staging, "s1-none", {"a.parquet": 5}, method="none", fingerprint="other", generate_s=3.0,
              **unattributed)
    # prompt a.parquet/0 of s4: its four samples give two completions, one of them three times
    table = synthetic_results("a.parquet", 12, samples=4, **unattributed)
    table = table.set_column(3, "completion", pa.array(["x", "x", "y", "x"] + [f"c{i}" for i in range(8)]))
    manifest = manifest_for("s4", "a.parquet", table, fingerprint="fp-a.parquet", config_hash="h-specdec")
    manifest.num_input_rows = 3
    staging.write_shard(manifest, table)
    for run_id in ("s4", "s4-none", "s1", "s1-none"):
        ingest(str(tmp_db), staging, run_id)
    before = counts(tmp_db)
    assert ingest(str(tmp_db), staging, "s4").num_skipped == 2 and counts(tmp_db) == before
    con = duckdb.connect(str(tmp_db), read_only=True)
    keys = con.execute("SELECT id, list(sample ORDER BY sample), any_value(num_samples) FROM outputs "
                       "WHERE run_id = 's4' GROUP BY id ORDER BY id").fetchall()
    assert keys == [(f"a.parquet/{i}", [0, 1, 2, 3], 4) for i in range(3)] + [
        (f"b.parquet/{i}", [0, 1, 2, 3], 4) for i in range(2)]
    assert con.execute("SELECT count(*) FROM request_stats r SEMI JOIN outputs o USING (run_id, shard_id, id, sample) "
                       "WHERE run_id = 's4'").fetchone() == (20,)
    agreement = con.execute("SELECT num_samples, distinct_completions, agreement, tokens_per_forward "
                            "FROM v_sample_agreement WHERE run_id = 's4' AND id = 'a.parquet/0'").fetchone()
    steps, out = (con.execute("SELECT sum(num_steps), sum(num_output_tokens) FROM request_stats "
                              "WHERE run_id = 's4' AND id = 'a.parquet/0'").fetchone())
    assert agreement == (4, 2, 0.75, pytest.approx(out / steps))
    assert con.execute("SELECT count(*) FROM v_sample_agreement WHERE run_id = 's4' AND agreement < 1").fetchone() == (
        5,)  # the synthetic completions of the other prompts all differ
    assert con.execute("SELECT input_rows, output_rows, output_samples, expected_samples, balanced "
                       "FROM v_run_accounting WHERE run_id = 's4'").fetchone() == (5, 5, 20, 20, True)
    speedups = con.execute("SELECT samples, method, run_ids, num_shards, samples_per_prompt, speedup, speedup_basis "
                           "FROM v_samples_speedup ORDER BY samples").fetchall()
    tokens = dict(con.execute("SELECT run_id, sum(num_output_tokens) FROM shards GROUP BY ALL").fetchall())
    assert speedups == [
        (1, "specdec", ["s1"], 1, 1.0, pytest.approx((tokens["s1"] / 1.0) / (tokens["s1-none"] / 3.0)), "generate_s"),
        (4, "specdec", ["s4"], 2, 4.0, pytest.approx((tokens["s4"] / 2.0) / (tokens["s4-none"] / 4.0)), "generate_s")]
    con.close()
    section = report(str(tmp_db), "s4").split("== Speed-up per samples setting")[1].split("\n== ")[0]
    assert len(section.strip().splitlines()) == 3 and "specdec" in section  # header, rule, the s4 row

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


def test_a_duplicate_id_is_quarantined_once_and_leaves_with_all_its_samples(tmp_db, staging_dir):
    staging = Staging(str(staging_dir))
    for shard_id in ("a.parquet", "b.parquet"):
        table = synthetic_results(shard_id, 6, samples=3)
        table = table.set_column(0, "id", pa.array(["x"] * 3 + [f"{shard_id}/1"] * 3))
        manifest = manifest_for("r1", shard_id, table, fingerprint=shard_id)
        manifest.num_input_rows = 2
        staging.write_shard(manifest, table)
    assert ingest(str(tmp_db), staging, "r1", dedupe=True).num_duplicates == 3  # x's three samples in b
    con = duckdb.connect(str(tmp_db), read_only=True)
    assert con.execute("SELECT shard_id, id, stage, num_rows FROM quarantine").fetchall() == [
        ("b.parquet", "x", "dedupe", 1)]
    for table in ("outputs", "request_stats"):
        assert con.execute(f"SELECT shard_id, id, count(*) FROM {table} GROUP BY ALL ORDER BY ALL").fetchall() == [
            ("a.parquet", "a.parquet/1", 3), ("a.parquet", "x", 3), ("b.parquet", "b.parquet/1", 3)], table
    assert con.execute("SELECT input_rows, output_rows, quarantined_rows, output_samples, expected_samples, balanced "
                       "FROM v_run_accounting").fetchall() == [(4, 3, 1, 9, 9, True)]
    con.close()


def test_draft_sources_answer_how_much_history_helped(tmp_db, staging_dir, capsys):
    """The drafter's per-source counts of each shard reach `source_stats`, the run's view
    sums them per source with each source's share of the accepted tokens, and the report
    shows them; a re-ingest replaces them."""
    staging = Staging(str(staging_dir))
    stage_run(staging, "r1", {})
    counts_by_shard = {"a.parquet": {"own": (40, 20), "history": (30, 24), "sibling": (10, 4)},
                       "b.parquet": {"own": (10, 6), "cache": (8, 2), "live": (4, 4)}}
    for i, (shard_id, source_counts) in enumerate(counts_by_shard.items()):
        table = synthetic_results(shard_id, 5, seed=i)
        manifest = manifest_for("r1", shard_id, table, fingerprint=f"fp-{shard_id}")
        manifest.stats.add_source_counts(source_counts)
        staging.write_shard(manifest, table)
    ingest(str(tmp_db), staging, "r1")
    # shard a re-staged with other content: its source rows are replaced, never added to
    table = synthetic_results("a.parquet", 5, seed=7)
    manifest = manifest_for("r1", "a.parquet", table, fingerprint="fp-a-again")
    manifest.stats.add_source_counts(counts_by_shard["a.parquet"])
    staging.write_shard(manifest, table)
    ingest(str(tmp_db), staging, "r1", ["a.parquet"])
    con = duckdb.connect(str(tmp_db), read_only=True)
    rows = con.execute("SELECT source, num_draft_tokens, num_accepted_tokens, acceptance_rate, share_of_accepted "
                       "FROM v_draft_sources WHERE run_id = 'r1' ORDER BY source").fetchall()
    con.close()
    total_accepted = 20 + 24 + 4 + 6 + 2 + 4
    assert rows == [
        ("cache", 8, 2, pytest.approx(2 / 8), pytest.approx(2 / total_accepted)),
        ("history", 30, 24, pytest.approx(24 / 30), pytest.approx(24 / total_accepted)),
        ("live", 4, 4, pytest.approx(1.0), pytest.approx(4 / total_accepted)),
        ("own", 50, 26, pytest.approx(26 / 50), pytest.approx(26 / total_accepted)),
        ("sibling", 10, 4, pytest.approx(0.4), pytest.approx(4 / total_accepted)),
    ]
    assert cli_main(["report", "--db", str(tmp_db), "--run", "r1"]) == 0
    out = capsys.readouterr().out
    section = out.split("== Accepted draft tokens by source")[1]
    assert "history" in section and "sibling" in section
