"""Bad input: every kind has a clear outcome, either an error naming the shard (the shard is
quarantined as a whole and the run goes on) or a quarantined row naming shard, row and
reason; every other row proceeds and input rows = output rows + quarantined rows.

The validation and ingest code run directly (fast); one flow run through the real engine
takes a mixed set of bad shards end to end."""

from __future__ import annotations

import json
import os

import pyarrow as pa
import pytest
from pydantic import ValidationError

import specdec.engine_cache as engine_cache
import specdec.generate as generate_mod
from flows.params import FlowParams
from specdec.config import ConfigError
from specdec.params import GenerationParams
from specdec.prompts import tokenize_rows
from support.db import query
from support.processes import assert_loopback_only
from support.shards import PROMPT_SCHEMA, write_invalid_utf8, write_shard, write_truncated
from tasks.ingest import ingest
from tasks.prompt_shards import ShardInputError, ShardRef, read_shard
from tasks.staging import Staging
from support.synthetic_staging import manifest_for, synthetic_results

FULL_SCHEMA = pa.schema([("id", pa.string()), ("prompt", pa.string()), ("messages", pa.string()),
                         ("max_tokens", pa.int64())])
CHAT = json.dumps([{"role": "user", "content": "Say hi."}])
TOO_LONG = "word " * 8300  # > 8192 tokens, the default model's context


def read(path):
    return read_shard(ShardRef(path.name, str(path)), str(path.parent))


@pytest.mark.parametrize("case, make, reason, num_rows", [
    ("missing prompt", lambda p: write_shard(p, [{"id": "a", "text": "x"}]),
     "missing column 'prompt'", 1),
    ("missing id", lambda p: write_shard(p, [{"prompt": "x"}, {"prompt": "y"}]),
     "missing column 'id'", 2),
    ("id not a string", lambda p: write_shard(p, pa.table({"id": [1, 2], "prompt": ["x", "y"]})),
     "column 'id' has type int64", 2),
    ("prompt not a string", lambda p: write_shard(p, pa.table({"id": ["a"], "prompt": [3.5]})),
     "column 'prompt' has type double", 1),
    ("not Parquet", lambda p: p.write_bytes(b"id,prompt\na,hello\n"), "cannot read as Parquet", None),
    ("truncated Parquet", lambda p: write_truncated(p, [{"id": f"t{i}", "prompt": "x" * 50} for i in range(20)]),
     "cannot read as Parquet", None),
])
def test_shard_level_problems_name_the_shard(tmp_path, case, make, reason, num_rows):
    path = tmp_path / "bad.parquet"
    make(path)
    with pytest.raises(ShardInputError, match=reason) as info:
        read(path)
    assert str(path) in str(info.value), case
    assert info.value.num_input_rows == num_rows, case


def test_row_level_problems_are_quarantined_and_the_other_rows_proceed(tmp_path):
    rows = [
        {"id": "ok", "prompt": "hello", "messages": None, "max_tokens": None},
        {"id": "null-prompt", "prompt": None, "messages": None, "max_tokens": None},
        {"id": "empty-prompt", "prompt": "", "messages": None, "max_tokens": None},
        {"id": "blank-prompt", "prompt": " \n\t", "messages": None, "max_tokens": None},
        {"id": "ok", "prompt": "same id again", "messages": None, "max_tokens": None},
        {"id": None, "prompt": "no id", "messages": None, "max_tokens": None},
        {"id": "bad-json", "prompt": None, "messages": "[{'role': 'user'", "max_tokens": None},
        {"id": "bad-turns", "prompt": None, "messages": json.dumps({"role": "user"}), "max_tokens": None},
        {"id": "zero-max", "prompt": "x", "messages": None, "max_tokens": 0},
        {"id": "negative-max", "prompt": "x", "messages": None, "max_tokens": -5},
        {"id": "huge-max", "prompt": "x", "messages": None, "max_tokens": 1 << 40},
        {"id": "chat", "prompt": None, "messages": CHAT, "max_tokens": 4},
    ]
    shard = read(write_shard(tmp_path / "rows.parquet", rows, FULL_SCHEMA))
    assert [r.id for r in shard.rows] == ["ok", "chat"]
    reasons = {r.index: r.reason for r in shard.rejected}
    expected = {1: "null or empty prompt", 2: "null or empty prompt", 3: "null or empty prompt",
                4: "duplicate id 'ok'", 5: "null or empty id", 6: "messages is not valid JSON",
                7: "messages must be a non-empty JSON list", 8: "max_tokens=0 outside",
                9: "max_tokens=-5 outside", 10: f"max_tokens={1 << 40} outside"}
    assert set(reasons) == set(expected)
    for index, text in expected.items():
        assert text in reasons[index], (index, reasons[index])
    assert all(r.stage == "validate" for r in shard.rejected)
    assert len(shard.rows) + len(shard.rejected) == shard.num_input_rows == len(rows)


def test_invalid_utf8_and_lone_surrogates_reject_only_their_rows(tmp_path):
    shard = read(write_invalid_utf8(tmp_path / "utf8.parquet"))
    assert [(r.id, r.prompt) for r in shard.rows] == [("u0", "fine prompt")]
    assert [(r.index, r.id) for r in shard.rejected] == [(1, "u1"), (2, "u2")]
    assert all("prompt: invalid UTF-8 at byte" in r.reason for r in shard.rejected)


def test_prompt_longer_than_the_context_is_quarantined_before_the_engine(tmp_path, tokenizer):
    rows = [{"id": "ok", "prompt": "hi", "messages": None, "max_tokens": None},
            {"id": "long", "prompt": TOO_LONG, "messages": None, "max_tokens": None},
            {"id": "long-output", "prompt": "hi", "messages": None, "max_tokens": 100_000}]
    shard = read(write_shard(tmp_path / "long.parquet", rows, FULL_SCHEMA))
    requests, rejected = tokenize_rows(shard.rows, tokenizer, 8, 2048, f"shard {shard.ref.uri}", "raw")
    assert [r.id for r in requests] == ["ok"]
    assert [(r.index, r.id, r.stage) for r in rejected] == [(1, "long", "tokenize"), (2, "long-output", "tokenize")]
    assert "row 1 (id='long')" in rejected[0].reason and "exceeds the model length 2048" in rejected[0].reason
    assert "long.parquet" in rejected[1].reason and "max_tokens=100000" in rejected[1].reason


def test_zero_row_shard_completes_without_an_engine(tmp_path, monkeypatch):
    shard = read(write_shard(tmp_path / "empty.parquet", [], PROMPT_SCHEMA))
    monkeypatch.setattr(generate_mod, "get_engine", lambda *a: pytest.fail("no engine for zero rows"))
    params = GenerationParams(max_tokens=8)
    out = generate_mod.generate_rows(shard.rows, shard.rejected, params, "empty", "hash", {})
    assert (shard.num_input_rows, out.results.num_rows, out.quarantined) == (0, 0, [])


def test_duplicate_ids_across_shards_are_quarantined_once_at_the_end_of_the_run(tmp_db, staging_dir):
    staging = Staging(str(staging_dir))
    drafts_generated = 0
    for shard_id, ids in (("b.parquet", ["x", "b1", "z"]), ("a.parquet", ["x", "a1", "a2"]), ("c.parquet", ["z", "x", "c2"])):
        table = synthetic_results(shard_id, 3).set_column(0, "id", pa.array(ids))
        drafts_generated += sum(table.column("num_drafts").to_pylist())
        manifest = manifest_for("r1", shard_id, table, fingerprint=shard_id)
        manifest.num_input_rows = 3
        staging.write_shard(manifest, table)
    report = ingest(str(tmp_db), staging, "r1", dedupe=True)
    # shard-level figures describe the engine's work, quarantined duplicates included
    assert query(tmp_db, "SELECT sum(num_drafts) FROM shards") == [(drafts_generated,)]
    assert query(tmp_db, "SELECT sum(num_drafts) FROM position_stats WHERE pos = 0") == [(drafts_generated,)]
    assert report.num_duplicates == 3  # x in b and c (first in a), z in c (first in b)
    assert query(tmp_db, "SELECT count(*), count(DISTINCT id) FROM outputs") == [(6, 6)]
    assert query(tmp_db, "SELECT count(*) FROM request_stats") == [(6,)]
    assert query(tmp_db, "SELECT shard_id, id, stage, reason FROM quarantine ORDER BY 1, 2") == [
        ("b.parquet", "x", "dedupe", "duplicate id x: already in shard a.parquet"),
        ("c.parquet", "x", "dedupe", "duplicate id x: already in shard a.parquet"),
        ("c.parquet", "z", "dedupe", "duplicate id z: already in shard b.parquet"),
    ]
    assert ingest(str(tmp_db), staging, "r1", dedupe=True).num_duplicates == 0  # idempotent
    assert query(tmp_db, "SELECT input_rows, output_rows, quarantined_rows, balanced FROM v_run_accounting") == [
        (9, 6, 3, True)]


def test_unknown_method_or_missing_model_folder_fail_before_any_shard(tmp_path):
    with pytest.raises(ValidationError, match="method"):
        FlowParams(source=str(tmp_path), method="medusa")
    params = FlowParams(source=str(tmp_path), model=str(tmp_path / "no-such-model"))
    with pytest.raises(ConfigError, match="no-such-model.*not a model folder"):
        params.check_model_folders()


@pytest.mark.slow
def test_flow_with_a_mixed_bad_shard_set_accounts_for_every_row(tmp_path, prefect_api, engine_factory, monkeypatch):
    """The real engine (the session's shared one where the config matches), a real Prefect
    server and DuckDB file: bad shards are named and quarantined, the rest completes."""
    from flows.generation import speculative_generation

    src = tmp_path / "src"
    write_shard(src / "a-good.parquet", [{"id": f"g{i}", "prompt": f"def add_{i}(a, b):"} for i in range(3)])
    write_shard(src / "b-rows.parquet", [
        {"id": "b0", "prompt": "Hello", "messages": None, "max_tokens": None},
        {"id": "b1", "prompt": None, "messages": None, "max_tokens": None},
        {"id": "b0", "prompt": "again", "messages": None, "max_tokens": None},
        {"id": "b3", "prompt": None, "messages": "not json", "max_tokens": None},
        {"id": "b4", "prompt": "x", "messages": None, "max_tokens": 0},
        {"id": "b5", "prompt": TOO_LONG, "messages": None, "max_tokens": None},
        {"id": "g1", "prompt": "same id as a-good", "messages": None, "max_tokens": None},
        {"id": "b7", "prompt": None, "messages": CHAT, "max_tokens": 4},
    ], FULL_SCHEMA)
    write_invalid_utf8(src / "c-utf8.parquet")
    write_shard(src / "d-no-prompt.parquet", [{"id": "d0", "text": "x"}, {"id": "d1", "text": "y"}])
    write_shard(src / "e-empty.parquet", [], PROMPT_SCHEMA)
    (src / "f-not.parquet").write_bytes(b"PAR1 but not really")
    write_truncated(src / "g-truncated.parquet", [{"id": f"t{i}", "prompt": "x" * 50} for i in range(20)])

    params = dict(source=str(src), db=str(tmp_path / "r.duckdb"), staging=str(tmp_path / "staging"),
                  run_name="bad-mix", max_tokens=8, batch_size=16, kv_cache_gib=1.0)
    p = FlowParams(**params)
    monkeypatch.setitem(engine_cache._ENGINES, engine_cache.engine_configs(p.generation_params()),
                        engine_factory("specdec"))
    with pytest.raises(RuntimeError, match="3 shard") as info:
        speculative_generation(**params)
    for name in ("d-no-prompt.parquet", "f-not.parquet", "g-truncated.parquet"):
        assert name in str(info.value)
    db = tmp_path / "r.duckdb"
    assert query(db, "SELECT shard_id, id FROM outputs ORDER BY 1, 2") == [
        ("a-good.parquet", "g0"), ("a-good.parquet", "g1"), ("a-good.parquet", "g2"),
        ("b-rows.parquet", "b0"), ("b-rows.parquet", "b7"), ("c-utf8.parquet", "u0")]
    assert query(db, "SELECT shard_id, row_index, stage FROM quarantine WHERE row_index IS NOT NULL ORDER BY 1, 2") == [
        ("b-rows.parquet", 1, "validate"), ("b-rows.parquet", 2, "validate"), ("b-rows.parquet", 3, "validate"),
        ("b-rows.parquet", 4, "validate"), ("b-rows.parquet", 5, "tokenize"),
        ("c-utf8.parquet", 1, "validate"), ("c-utf8.parquet", 2, "validate")]
    assert query(db, "SELECT shard_id, id, stage FROM quarantine WHERE row_index IS NULL ORDER BY 1") == [
        ("b-rows.parquet", "g1", "dedupe"), ("d-no-prompt.parquet", None, "read"),
        ("f-not.parquet", None, "read"), ("g-truncated.parquet", None, "read")]
    assert query(db, "SELECT shard_id, status, num_prompts FROM shards WHERE shard_id LIKE 'e-%'") == [
        ("e-empty.parquet", "ingested", 0)]
    assert query(db, "SELECT status FROM runs") == [("failed",)]
    # 3 + 8 + 3 + 2 + 0 readable input rows = 6 outputs + 10 quarantined; two shards unreadable
    assert query(db, "SELECT input_rows, output_rows, quarantined_rows, balanced, shards_unreadable, "
                     "shards_quarantined FROM v_run_accounting") == [(16, 6, 10, True, 2, 3)]
    # vLLM's own sockets (the engine's worker processes are children of this one): loopback only
    assert_loopback_only(os.getpid())
