"""Method auto's decisions recorded with the run (no engine): the staged manifests, ingest into
DuckDB (idempotent), the view per run and shard kind, the report, the demo's query, the
Prefect summary, and databases and manifests from before the pilot."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import duckdb
import pytest

from specdec.pilot import PilotDecision, PilotPass, decide, skipped
from support.db import apply_schema_up_to, named_rows, query
from support.synthetic_staging import manifest_for, stage_run, synthetic_results
from tasks.db import connect_for_write, migrate
from tasks.ingest import ingest
from tasks.prefect_artifacts import summary_markdown
from tasks.report import report
from tasks.staging import RunManifest, ShardManifest, Staging, shard_key

MARGIN = 0.03
# The pilot of `chat`: 15 requests, 8 on none and 7 on specdec, 50 output tokens each; on the
# whole shares 400 and 320 output tokens per engine-second; compared on their full-batch steps
# (half of each share's time): 500 and 400 tokens/s, specdec slower (0.8x).
CHAT = decide("chat", PilotPass("none", 8, 400, 1.0, 30.0, 0.5, 250),
              PilotPass("specdec", 7, 350, 1.09375, 35.0, 0.5, 200), MARGIN)
CODE = skipped("code", 5, 16, MARGIN)  # too small for a pilot: specdec without one
# The kinds' shards ({shard id: rows}), the method each ran and its engine seconds per output token.
KINDS = {"chat": ({"chat/c0.parquet": 12, "chat/c1.parquet": 7}, "none", 0.02),
         "code": ({"code/e0.parquet": 5}, "specdec", 0.005)}
VIEW_COLUMNS = ("kind", "ordinal", "method", "reason", "speedup", "margin", "pilot_requests", "pilot_basis",
                "pilot_none_tokens_per_s", "pilot_specdec_tokens_per_s", "shards_done", "shards_failed",
                "num_prompts", "num_output_tokens", "tokens_per_engine_s")


def _run_manifest(run_id: str, decisions: list[PilotDecision]) -> RunManifest:
    return RunManifest(run_id=run_id, run_name=run_id, flow_run_id=None, source="synthetic", method="auto",
                       config_hash="h-auto", config={"params": {"method": "auto"}}, status="completed",
                       num_shards=3, started_at="2026-01-01T00:00:00", wall_s=60.0, engine_start_s=5.0,
                       pilot=[d.to_dict() for d in decisions])


def _stage_auto_run(staging: Staging, run_id: str, decisions: list[PilotDecision]) -> dict[str, int]:
    """An auto run over the two kinds, each shard staged with its kind and method; returns
    each kind's output tokens."""
    staging.write_run(_run_manifest(run_id, decisions))
    tokens = {}
    for kind, (shards, method, rate) in KINDS.items():
        tokens[kind] = 0
        for i, (shard_id, rows) in enumerate(shards.items()):
            table = synthetic_results(shard_id, rows, seed=i, method=method, config_hash="h-auto",
                                      engine_s_per_token=rate)
            manifest = manifest_for(run_id, shard_id, table, fingerprint=f"fp-{shard_id}", config_hash="h-auto")
            staging.write_shard(dataclasses.replace(manifest, method=method, kind=kind), table)
            tokens[kind] += manifest.stats.num_output_tokens
    return tokens


def _view(db: str, run_id: str) -> list[dict]:
    rows = query(db, f"SELECT {', '.join(VIEW_COLUMNS)} FROM v_pilot_decisions WHERE run_id = ? ORDER BY ordinal",
                 [run_id])
    return [dict(zip(VIEW_COLUMNS, row)) for row in rows]


def _ingested_auto_run(tmp_path: Path, run_id: str = "auto-run") -> tuple[str, Staging, dict[str, int]]:
    """Staged while the run decides (first chat only, then both kinds), ingested after each
    step and once more: as a flow re-records its manifest and a re-run ingests again."""
    db, staging = str(tmp_path / "results.duckdb"), Staging(str(tmp_path / "staging"))
    _stage_auto_run(staging, run_id, [CHAT])
    ingest(db, staging, run_id)
    tokens = _stage_auto_run(staging, run_id, [CHAT, CODE])
    ingest(db, staging, run_id)
    ingest(db, staging, run_id)
    return db, staging, tokens


def test_run_manifest_keeps_its_decisions_and_older_manifests_have_none(tmp_path):
    staging = Staging(str(tmp_path / "staging"))
    staging.write_run(_run_manifest("r", [CHAT, CODE]))
    assert [PilotDecision.from_dict(d) for d in staging.read_run("r").pilot] == [CHAT, CODE]
    older = dataclasses.asdict(_run_manifest("old", []))
    del older["pilot"]
    path = tmp_path / "staging" / "old" / "run.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(older))
    assert staging.read_run("old").pilot == []


def test_shard_manifest_keeps_method_and_kind_and_older_manifests_have_none():
    table = synthetic_results("chat/a.parquet", 3)
    manifest = dataclasses.replace(manifest_for("r", "chat/a.parquet", table), method="none", kind="chat")
    assert ShardManifest.from_dict(json.loads(json.dumps(manifest.to_dict()))) == manifest
    older = {k: v for k, v in manifest.to_dict().items() if k not in ("method", "kind")}
    assert (ShardManifest.from_dict(older).method, ShardManifest.from_dict(older).kind) == (None, None)


def test_ingest_records_each_kinds_decision_once_with_what_its_shards_did(tmp_path):
    db, _, tokens = _ingested_auto_run(tmp_path)
    assert query(db, "SELECT count(*) FROM pilot_decisions") == [(2,)]
    chat, code = _view(db, "auto-run")
    assert chat == {
        "kind": "chat", "ordinal": 0, "method": "none", "reason": CHAT.reason, "speedup": pytest.approx(0.8),
        "margin": MARGIN, "pilot_requests": 15, "pilot_basis": "full-batch steps",
        "pilot_none_tokens_per_s": pytest.approx(500.0), "pilot_specdec_tokens_per_s": pytest.approx(400.0),
        "shards_done": 2, "shards_failed": 0,
        "num_prompts": 12 + 7, "num_output_tokens": tokens["chat"], "tokens_per_engine_s": pytest.approx(1 / 0.02)}
    assert code == {
        "kind": "code", "ordinal": 1, "method": "specdec", "reason": CODE.reason, "speedup": None, "margin": MARGIN,
        "pilot_requests": None, "pilot_basis": None, "pilot_none_tokens_per_s": None, "pilot_specdec_tokens_per_s": None,
        "shards_done": 1, "shards_failed": 0, "num_prompts": 5, "num_output_tokens": tokens["code"],
        "tokens_per_engine_s": pytest.approx(1 / 0.005)}
    passes = query(db, "SELECT none_num_output_tokens, none_engine_s, none_start_s, none_tokens_per_s, "
                       "none_full_batch_s, none_full_batch_tokens, specdec_num_requests, specdec_engine_s, "
                       "specdec_start_s, specdec_tokens_per_s, specdec_full_batch_s, specdec_full_batch_tokens "
                       "FROM pilot_decisions WHERE kind = 'chat'")
    assert passes == [(400, 1.0, 30.0, 400.0, 0.5, 250, 7, 1.09375, 35.0, 320.0, 0.5, 200)]
    assert query(db, "SELECT shard_id, method, kind FROM shards ORDER BY shard_id") == [
        ("chat/c0.parquet", "none", "chat"), ("chat/c1.parquet", "none", "chat"),
        ("code/e0.parquet", "specdec", "code")]


def test_report_and_demo_query_show_each_kind_of_an_auto_run(tmp_path):
    db, staging, _ = _ingested_auto_run(tmp_path, "demo-auto")
    stage_run(staging, "other-auto", {"x.parquet": 3})  # another prefix, and no decisions
    ingest(db, staging, "other-auto")
    section = report(db, "demo-auto").split("== Method auto")[1].split("\n== ")[0]
    lines = section.splitlines()[3:]  # title, header, rule
    assert [line.split()[:3] for line in lines] == [["demo-auto", "chat", "none"], ["demo-auto", "code", "specdec"]]
    table = named_rows(db, "demo_pilot_by_kind", ["demo"])
    assert [(r["shard_kind"], r["ran"], r["pilot_requests"], r["prompts"]) for r in table] == [
        ("chat", "none", 15, 19), ("code", "specdec", None, 5)]
    assert [r["pilot_speedup"] for r in table] == [pytest.approx(0.8), None]
    assert [r["tokens_per_engine_s"] for r in table] == [pytest.approx(50.0), pytest.approx(200.0)]
    assert [r["pilot_basis"] for r in table] == ["full-batch steps", None]
    assert table[0]["pilot_none_tokens_per_s"] == pytest.approx(500.0)
    assert table[0]["pilot_specdec_tokens_per_s"] == pytest.approx(400.0)


def test_a_decision_staged_before_full_batch_steps_were_counted_shows_its_whole_shares(tmp_path):
    db, staging = str(tmp_path / "results.duckdb"), Staging(str(tmp_path / "staging"))
    older = decide("chat", PilotPass("none", 8, 400, 1.0), PilotPass("specdec", 7, 350, 1.09375), MARGIN).to_dict()
    for name in ("none", "specdec"):
        older[name] = {k: v for k, v in older[name].items() if not k.startswith("full_batch")}
    run = dataclasses.replace(_run_manifest("old", []), pilot=[older])
    staging.write_run(run)
    ingest(db, staging, "old")
    assert query(db, "SELECT none_full_batch_s, specdec_full_batch_s FROM pilot_decisions") == [(0.0, 0.0)]
    (row,) = query(db, "SELECT pilot_basis, pilot_none_tokens_per_s, pilot_specdec_tokens_per_s, speedup "
                       "FROM v_pilot_decisions")
    assert row == ("whole shares", pytest.approx(400.0), pytest.approx(320.0), pytest.approx(0.8))


def test_older_manifests_ingest_without_kinds_or_decisions(tmp_path):
    db, staging = str(tmp_path / "results.duckdb"), Staging(str(tmp_path / "staging"))
    stage_run(staging, "old", {"a.parquet": 4, "b.parquet": 3})
    run_json = tmp_path / "staging" / "old" / "run.json"
    run_json.write_text(json.dumps({k: v for k, v in json.loads(run_json.read_text()).items() if k != "pilot"}))
    for shard_id in ("a.parquet", "b.parquet"):
        marker = tmp_path / "staging" / "old" / "shards" / shard_key(shard_id) / "manifest.json"
        data = json.loads(marker.read_text())
        marker.write_text(json.dumps({k: v for k, v in data.items() if k not in ("method", "kind")}))
    ingest(db, staging, "old")
    assert query(db, "SELECT shard_id, method, kind FROM shards ORDER BY ALL") == [
        ("a.parquet", None, None), ("b.parquet", None, None)]
    assert query(db, "SELECT count(*) FROM pilot_decisions") == [(0,)]
    assert query(db, "SELECT count(*) FROM v_pilot_decisions") == [(0,)]


def test_a_database_from_before_the_pilot_gains_its_table_and_columns(tmp_path):
    path = tmp_path / "old.duckdb"
    con = duckdb.connect(str(path))
    apply_schema_up_to(con, "0026_shards_engine", views_left_out=("v_pilot_decisions",))
    con.execute("INSERT INTO runs (run_id, source, method, config_hash, config, status) "
                "VALUES ('old', 's', 'specdec', 'h', '{}', 'completed')")
    con.execute("INSERT INTO shards (run_id, shard_id, source_path, fingerprint, config_hash, status, num_prompts, "
                "num_rejected, num_output_tokens, num_steps, num_drafts, num_draft_tokens, num_accepted_tokens) "
                "VALUES ('old', 'a', 'a', 'fp', 'h', 'ingested', 1, 0, 90, 30, 20, 80, 60)")
    applied = migrate(con)
    assert applied == ["0027_shards_method", "0028_shards_kind", "0029_pilot_decisions", "0030_pilot_none_full_batch_s",
                       "0031_pilot_none_full_batch_tokens", "0032_pilot_specdec_full_batch_s",
                       "0033_pilot_specdec_full_batch_tokens", "v_pilot_decisions"]
    assert con.execute("SELECT shard_id, num_output_tokens, method, kind FROM shards").fetchall() == [
        ("a", 90, None, None)]
    assert con.execute("SELECT count(*) FROM v_pilot_decisions").fetchall() == [(0,)]
    con.close()
    db, _, _ = _ingested_auto_run(tmp_path)  # today's writer on a fresh file, for comparison
    assert [row["kind"] for row in _view(db, "auto-run")] == ["chat", "code"]
    staging = Staging(str(tmp_path / "staging"))
    ingest(str(path), staging, "auto-run")  # the upgraded file takes the same run
    assert [row["kind"] for row in _view(str(path), "auto-run")] == ["chat", "code"]
    con = connect_for_write(path)
    assert migrate(con) == []
    con.close()


def test_summary_says_each_kinds_engine_choice_with_the_pilots_figures():
    outcomes: list[ShardManifest] = []
    text = summary_markdown(_run_manifest("r", [CHAT, CODE]), outcomes)
    choice = text.split("## Engine choice\n")[1].splitlines()
    assert choice == [f"- {CHAT.reason}. Pilot: none 500.0, specdec 400.0 output tokens/s on full-batch steps.",
                      f"- {CODE.reason}."]
    assert "Engine choice" not in summary_markdown(_run_manifest("r", []), outcomes)
