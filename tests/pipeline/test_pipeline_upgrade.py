"""Upgrades (no engine): a results database and staged shards written by the pipeline at
commit 573b56b (before `mean_accepted_length` became `tokens_per_forward`, and before samples
per prompt keyed outputs and request_stats by (id, sample)).

fixtures/sql_573b56b/ is that commit's sql/ tree, kept as it was: the old database is built
from its migrations and insert queries exactly as its migrator and ingest did, then opened
with today's `connect_for_write`, which migrates it in place. Staged shards are written as a
573b56b worker wrote them (old Parquet column, old manifest stats dict), because a fleet is
upgraded one worker at a time and today's ingest meets both."""

from __future__ import annotations

import dataclasses
import hashlib
import io
import json
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from specdec.stats import ShardStats
from support.db import describe_schema, query
from tasks.db import connect_for_write
from tasks.ingest import ingest
from tasks.staging import ShardManifest, Staging, shard_key
from support.synthetic_staging import manifest_for, synthetic_results

OLD_SQL = Path(__file__).with_name("fixtures") / "sql_573b56b"
GOLDEN = Path(__file__).with_name("golden_schema.txt")
TABLES = ("runs", "shards", "outputs", "request_stats", "position_stats", "quarantine", "bench_results")

# specdec/results_table.py RESULT_SCHEMA at 573b56b.
OLD_RESULT_SCHEMA = pa.schema([
    ("id", pa.string()), ("completion", pa.string()), ("output_token_ids", pa.list_(pa.int32())),
    ("num_output_tokens", pa.int32()), ("finish_reason", pa.string()), ("num_steps", pa.int32()),
    ("num_drafts", pa.int32()), ("num_draft_tokens", pa.int32()), ("num_accepted_tokens", pa.int32()),
    ("acceptance_rate", pa.float64()), ("mean_accepted_length", pa.float64()),
    ("accepted_per_pos", pa.list_(pa.int32())), ("k_histogram", pa.list_(pa.int32())),
    ("num_fallback_steps", pa.int32()), ("method", pa.string()), ("config_hash", pa.string()),
])
QUARANTINE_SCHEMA = pa.schema([("row_index", pa.int32()), ("id", pa.string()), ("stage", pa.string()),
                               ("reason", pa.string()), ("num_rows", pa.int64())])


def _request(i: int, out: int, steps: int, drafts: int, accepted_per_pos: list[int]) -> dict:
    accepted = sum(accepted_per_pos)
    return {"id": f"q{i}", "completion": f"completion {i}", "output_token_ids": list(range(out)),
            "num_output_tokens": out, "finish_reason": "length", "num_steps": steps, "num_drafts": drafts,
            "num_draft_tokens": 4 * drafts, "num_accepted_tokens": accepted,
            "acceptance_rate": accepted / (4 * drafts) if drafts else 0.0, "mean_accepted_length": out / steps,
            "accepted_per_pos": accepted_per_pos, "k_histogram": [steps - drafts, 0, 0, 0, drafts],
            "num_fallback_steps": steps - drafts, "method": "specdec", "config_hash": "h573"}


def old_results() -> pa.Table:
    """Three requests as a 573b56b worker staged them (tokens per forward 2.0, 1.5, 1.0)."""
    rows = [_request(0, 12, 6, 5, [3, 2, 1, 0]), _request(1, 9, 6, 4, [2, 1, 0, 0]), _request(2, 4, 4, 0, [0] * 4)]
    return pa.Table.from_pylist(rows, schema=OLD_RESULT_SCHEMA)


def old_shard_stats(results: pa.Table) -> dict:
    """ShardStats.to_dict() at 573b56b: the sums plus acceptance_rate and mean_accepted_length."""
    sums = {c: sum(results.column(c).to_pylist()) for c in (
        "num_output_tokens", "num_steps", "num_drafts", "num_draft_tokens", "num_accepted_tokens",
        "num_fallback_steps")}
    return {"num_requests": results.num_rows, **sums,
            "accepted_per_pos": [sum(p) for p in zip(*results.column("accepted_per_pos").to_pylist())],
            "k_histogram": [sum(k) for k in zip(*results.column("k_histogram").to_pylist())],
            "acceptance_rate": sums["num_accepted_tokens"] / sums["num_draft_tokens"],
            "mean_accepted_length": sums["num_output_tokens"] / sums["num_steps"]}


# --- a database written at 573b56b ------------------------------------------------------

def _old_checksum(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]  # tasks/db.py at 573b56b


def _old_migrate(con: duckdb.DuckDBPyConnection) -> None:
    """tasks/db.py migrate() at 573b56b: every migration, then every view, each recorded."""
    con.execute((OLD_SQL / "bookkeeping/schema_migrations.sql").read_text())
    for folder, kind in (("migrations", "migration"), ("views", "view")):
        for path in sorted((OLD_SQL / folder).glob("*.sql")):
            text = path.read_text()
            con.execute("BEGIN TRANSACTION")
            con.execute(text)
            con.execute("INSERT OR REPLACE INTO schema_migrations (name, kind, checksum) VALUES (?, ?, ?)",
                        [path.stem, kind, _old_checksum(text)])
            con.execute("COMMIT")


def _old_query(name: str) -> str:
    return (OLD_SQL / "queries" / f"{name}.sql").read_text()


def build_573b56b_db(path: Path) -> None:
    """A run with one ingested and one failed shard, outputs, request and position stats,
    quarantined rows and a bench row, inserted with 573b56b's queries."""
    con = duckdb.connect(str(path))
    try:
        _old_migrate(con)
        con.execute(_old_query("upsert_run"), [
            "r573", "nightly", "flow-1", "s3://prompts/", "specdec", "h573", json.dumps({"method": "specdec"}),
            "completed", 2, "2026-11-30 10:00:00", "2026-11-30 10:05:00", 300.0, 20.0, "1 shard failed"])
        con.register("staged_results", old_results())
        for name in ("insert_outputs", "insert_request_stats", "insert_position_stats"):
            con.execute(_old_query(name), ["r573", "a.parquet"])
        con.register("staged_quarantine", pa.Table.from_pylist([
            {"row_index": 7, "id": "dup", "stage": "validate", "reason": "null or empty prompt", "num_rows": 1},
        ], schema=QUARANTINE_SCHEMA))
        con.execute(_old_query("insert_quarantine"), ["r573", "a.parquet"])
        con.register("staged_quarantine", pa.Table.from_pylist([
            {"row_index": None, "id": None, "stage": "read", "reason": "not Parquet", "num_rows": None},
        ], schema=QUARANTINE_SCHEMA))
        con.execute(_old_query("insert_quarantine"), ["r573", "b.parquet"])
        stats = old_shard_stats(old_results())
        for shard_id, status, error, prompts in (("a.parquet", "ingested", None, 3), ("b.parquet", "failed", "bad", 0)):
            counters = [stats[c] if status == "ingested" else 0 for c in (
                "num_output_tokens", "num_steps", "num_drafts", "num_draft_tokens", "num_accepted_tokens")]
            con.execute(_old_query("insert_shard"), [
                "r573", shard_id, f"s3://prompts/{shard_id}", f"fp-{shard_id}", "h573", status, error,
                prompts, 1 if status == "ingested" else 0, *counters, 0.5, 20.0, 10.0, 0.2, 0.1,
                "2026-11-30 10:01:00", 4 if status == "ingested" else None, "host:1"])
        con.execute(_old_query("insert_bench_result"), [
            "b1", "2026-11-30 11:00:00", "specdec", "replay", "code", 8, 4, 100, 2.25, 0.6, None, True, "cold"])
    finally:
        con.close()


# Columns the upgrade adds to a table, after `id`, with the value old rows get (one sample each).
ADDED_BY_SAMPLES = {"outputs": {"sample": 0, "num_samples": 1}, "request_stats": {"sample": 0}}
# Columns the upgrade appends to a table, NULL for old rows: engine time (not attributed),
# what vLLM resolved for a shard's engine, and the shard's method and kind (not recorded).
APPENDED = {"request_stats": ["engine_s"], "shards": ["engine_s", "engine", "method", "kind"],
            "runs": ["engine_busy_s"]}


def as_upgraded(table: str, columns: list[str], rows: list[tuple]) -> tuple[list[str], list[tuple]]:
    """An old table's columns and rows as the upgrade should leave them."""
    added = ADDED_BY_SAMPLES.get(table, {})
    at = columns.index("id") + 1 if added else len(columns)
    values = tuple(added.values())
    appended = APPENDED.get(table, [])
    nulls = (None,) * len(appended)
    upgraded = [row[:at] + values + row[at:] + nulls for row in rows]
    return columns[:at] + list(added) + columns[at:] + appended, sorted(upgraded) if added else upgraded


def snapshot(con: duckdb.DuckDBPyConnection) -> dict[str, tuple[list[str], list[tuple]]]:
    out = {}
    for table in TABLES:
        cur = con.execute(f"SELECT * FROM {table} ORDER BY ALL")
        out[table] = ([d[0] for d in cur.description], cur.fetchall())
    return out


def test_573b56b_database_upgrades_in_place_with_rows_intact(tmp_db):
    build_573b56b_db(tmp_db)
    con = duckdb.connect(str(tmp_db), read_only=True)
    before, recorded = snapshot(con), con.execute("SELECT * FROM schema_migrations ORDER BY name").fetchall()
    con.close()
    assert all(rows for _, rows in before.values())  # every table holds rows to keep
    assert "mean_accepted_length" in before["request_stats"][0]

    con = connect_for_write(tmp_db)  # today's writer: migrates
    after = snapshot(con)
    for table in TABLES:
        old_columns, old_rows = before[table]
        renamed = [c.replace("mean_accepted_length", "tokens_per_forward") for c in old_columns]
        assert after[table] == as_upgraded(table, renamed, old_rows), table
    values = con.execute("SELECT id, tokens_per_forward FROM request_stats ORDER BY id").fetchall()
    assert values == [("q0", 2.0), ("q1", 1.5), ("q2", 1.0)]
    migrations = con.execute("SELECT * FROM schema_migrations ORDER BY name").fetchall()
    old_names = {r[0] for r in recorded if r[1] == "migration"}
    assert [r for r in migrations if r[0] in old_names] == [r for r in recorded if r[1] == "migration"]  # untouched
    assert describe_schema(con) == GOLDEN.read_text()  # the same schema as a fresh database
    summary = con.execute("SELECT tokens_per_forward FROM v_run_summary WHERE run_id = 'r573'").fetchone()[0]
    assert summary == pytest.approx(25 / 16)
    # old outputs are one sample each, and still add up
    assert con.execute("SELECT input_rows, output_rows, quarantined_rows, output_samples, expected_samples, balanced "
                       "FROM v_run_accounting").fetchall() == [(4, 3, 1, 3, 3, True)]
    assert con.execute("SELECT count(*) FROM v_sample_agreement WHERE num_samples = 1 AND agreement = 1").fetchone() == (3,)
    tables = {t for (t,) in con.execute("SELECT table_name FROM information_schema.tables").fetchall()}
    assert not {"outputs_before_samples", "request_stats_before_samples"} & tables
    con.close()


def test_upgraded_database_takes_new_ingests(tmp_db, staging_dir):
    build_573b56b_db(tmp_db)
    staging = Staging(str(staging_dir))
    table = synthetic_results("c.parquet", 6)
    engine = {"tensor_parallel_size": 4, "quantization": "awq", "enable_prefix_caching": False}
    staging.write_shard(dataclasses.replace(manifest_for("r1", "c.parquet", table), engine=engine), table)
    assert ingest(str(tmp_db), staging, "r1").num_rows == 6
    (recorded,) = query(tmp_db, "SELECT engine FROM shards WHERE run_id = 'r1'")[0]
    assert json.loads(recorded) == engine  # what the worker's engine resolved, as staged
    got = query(tmp_db, "SELECT id, tokens_per_forward FROM request_stats WHERE run_id = 'r1' ORDER BY id")
    assert got == sorted(zip(table.column("id").to_pylist(), table.column("tokens_per_forward").to_pylist()))
    assert query(tmp_db, "SELECT count(*) FROM request_stats WHERE run_id = 'r573'") == [(3,)]


# --- staged shards written by a 573b56b worker ------------------------------------------

def _old_manifest(run_id: str, shard_id: str, results_sha256: str, stats: dict) -> dict:
    """ShardManifest as a 573b56b worker serialised it (stats: an untyped dict)."""
    return {"run_id": run_id, "shard_id": shard_id, "source_path": f"s3://prompts/{shard_id}",
            "fingerprint": f"fp-{shard_id}", "config_hash": "h573", "status": "generated", "error": None,
            "num_prompts": 3, "num_rejected": 0, "stats": stats, "read_s": 0.1, "engine_start_s": 0.0,
            "generate_s": 2.0, "stage_s": 0.1, "generated_at": "2026-11-30T10:01:00", "rejected": [],
            "num_input_rows": 3, "worker": "old-host:1", "results_sha256": results_sha256}


def stage_like_573b56b(staging_dir: Path, run_id: str, shard_id: str, manifest_edit=None) -> pa.Table:
    results = old_results()
    buf = io.BytesIO()
    pq.write_table(results, buf)
    folder = staging_dir / run_id / "shards" / shard_key(shard_id)
    folder.mkdir(parents=True)
    (folder / "results.parquet").write_bytes(buf.getvalue())
    manifest = _old_manifest(run_id, shard_id, hashlib.sha256(buf.getvalue()).hexdigest(), old_shard_stats(results))
    if manifest_edit:
        manifest_edit(manifest)
    (folder / "manifest.json").write_text(json.dumps(manifest, sort_keys=True))
    return results


def _older_still(manifest: dict) -> None:
    """A manifest from before worker, num_input_rows, results_sha256, fallback steps and K."""
    for key in ("worker", "num_input_rows", "results_sha256"):
        del manifest[key]
    for key in ("num_fallback_steps", "accepted_per_pos", "k_histogram", "acceptance_rate"):
        del manifest["stats"][key]


def test_ingest_accepts_shards_staged_by_a_573b56b_worker(tmp_db, staging_dir):
    old = stage_like_573b56b(staging_dir, "r1", "old/a.parquet")
    stage_like_573b56b(staging_dir, "r1", "older.parquet", _older_still)
    staging = Staging(str(staging_dir))
    new = synthetic_results("new.parquet", 4)
    staging.write_shard(manifest_for("r1", "new.parquet", new), new)  # an upgraded worker, same run

    report = ingest(str(tmp_db), staging, "r1")
    assert (report.num_shards, report.num_rows) == (3, 10)
    for shard_id in ("old/a.parquet", "older.parquet"):
        got = query(tmp_db, "SELECT id, tokens_per_forward FROM request_stats WHERE shard_id = ? ORDER BY id",
                    [shard_id])
        assert got == list(zip(old.column("id").to_pylist(), old.column("mean_accepted_length").to_pylist()))
        # no sample column staged: each result is sample 0 of 1
        assert query(tmp_db, "SELECT DISTINCT sample, num_samples FROM outputs WHERE shard_id = ?", [shard_id]) == [
            (0, 1)]
        assert query(tmp_db, "SELECT DISTINCT sample FROM request_stats WHERE shard_id = ?", [shard_id]) == [(0,)]
        shard = query(tmp_db, "SELECT num_output_tokens, num_steps, num_drafts, num_draft_tokens, num_accepted_tokens "
                              "FROM shards WHERE shard_id = ?", [shard_id])
        assert shard == [(25, 16, 9, 36, 9)]
        # no engine time staged: not attributed, NULL for the request and the shard
        assert query(tmp_db, "SELECT count(engine_s) FROM request_stats WHERE shard_id = ?", [shard_id]) == [(0,)]
        assert query(tmp_db, "SELECT engine_s FROM shards WHERE shard_id = ?", [shard_id]) == [(None,)]
        assert query(tmp_db, "SELECT engine FROM shards WHERE shard_id = ?", [shard_id]) == [(None,)]  # not recorded
    assert query(tmp_db, "SELECT sum(num_accepted_tokens) FROM position_stats WHERE shard_id = 'older.parquet'") == [
        (9,)]


def test_old_manifest_stats_read_as_shard_stats(staging_dir):
    stage_like_573b56b(staging_dir, "r1", "a.parquet")
    stage_like_573b56b(staging_dir, "r1", "b.parquet", _older_still)
    staging = Staging(str(staging_dir))
    full, partial = staging.read_manifest("r1", "a.parquet"), staging.read_manifest("r1", "b.parquet")
    assert full.stats == ShardStats(num_requests=3, num_output_tokens=25, num_steps=16, num_drafts=9,
                                    num_draft_tokens=36, num_accepted_tokens=9, num_fallback_steps=7,
                                    accepted_per_pos=[5, 3, 1, 0], k_histogram=[7, 0, 0, 0, 9])
    assert partial.stats == ShardStats(num_requests=3, num_output_tokens=25, num_steps=16, num_drafts=9,
                                       num_draft_tokens=36, num_accepted_tokens=9)
    assert full.stats.tokens_per_forward == pytest.approx(25 / 16)
    assert (partial.worker, partial.results_sha256) == (None, "")


def test_manifest_stats_round_trip_through_json(staging_dir):
    staging = Staging(str(staging_dir))
    table = synthetic_results("a.parquet", 5)
    written = staging.write_shard(manifest_for("r1", "a.parquet", table), table)
    assert isinstance(written.stats, ShardStats)
    assert staging.read_manifest("r1", "a.parquet") == written
    on_disk = json.loads((staging_dir / "r1" / "shards" / "a.parquet" / "manifest.json").read_text())
    assert on_disk["stats"]["tokens_per_forward"] == pytest.approx(written.stats.tokens_per_forward)
    with pytest.raises(TypeError, match="ShardStats"):
        ShardManifest(run_id="r1", shard_id="a", source_path="a", fingerprint="f", config_hash="h",
                      status="generated", stats=on_disk["stats"])
