"""The demo's pieces without an engine: its shard kinds and its final table."""

from __future__ import annotations

import pyarrow.parquet as pq
import pytest

from flows.demo_shards import CODE_EDITS, DEMO_KINDS, code_edit_rows, demo_shards
from prompt_sets.humaneval import humaneval_items
from support.db import named_rows
from support.synthetic_staging import stage_run
from tasks.ingest import ingest
from tasks.staging import Staging


def test_code_edit_prompts_hold_the_solution_and_take_turns_over_the_edits():
    rows = code_edit_rows(limit=6)
    items = {item["task_id"]: item for item in humaneval_items()}
    assert [r["id"].rsplit("/", 1)[1] for r in rows] == list(CODE_EDITS) * 2
    for row in rows:
        item = items[row["id"].split("/", 1)[1].rsplit("/", 1)[0]]
        assert item["canonical_solution"].strip() in row["prompt"]  # the answer restates it
        if row["id"].endswith("/rename"):
            assert "Rename the variable `" in row["prompt"] and "_in` everywhere" in row["prompt"]
    docstrings = [r["prompt"] for r in rows if r["id"].endswith("/docstrings")]
    assert docstrings and all('"""' not in p for p in docstrings)  # taken out: adding one is the edit


def test_demo_shards_write_one_folder_per_kind(tmp_path):
    paths = demo_shards(tmp_path, per_shard=3, shards_per_kind=2)
    assert [p.relative_to(tmp_path).as_posix() for p in paths] == [
        "code-edit/code-edit-000.parquet", "code-edit/code-edit-001.parquet", "chat/chat-000.parquet",
        "chat/chat-001.parquet"]
    assert {p.parent.name for p in paths} == set(DEMO_KINDS)
    ids = [pq.read_table(p).column("id").to_pylist() for p in paths]
    assert [len(i) for i in ids] == [3, 3, 3, 3] and len(set(ids[0] + ids[1])) == 6 and len(set(ids[2] + ids[3])) == 6
    assert all(i.startswith("sharegpt/") for i in ids[2] + ids[3])


def test_final_table_gives_each_kind_its_speedup_against_its_own_none_run(tmp_path):
    db, staging = str(tmp_path / "demo.duckdb"), Staging(str(tmp_path / "staging"))
    # engine seconds per output token: code edits 4x cheaper with speculation, chat the same
    runs = {"demo-code-edit": ("specdec", "code", 0.005), "demo-code-edit-none": ("none", "code", 0.02),
            "demo-chat": ("specdec", "chat", 0.01), "demo-chat-none": ("none", "chat", 0.01),
            "other-chat": ("specdec", "chat", 0.001)}  # another prefix: not the demo's
    for run_id, (method, kind, rate) in runs.items():
        stage_run(staging, run_id, {f"{kind}.parquet": 8}, method=method, fingerprint=kind, engine_s_per_token=rate)
        ingest(db, staging, run_id)
    table = named_rows(db, "demo_speedup_by_kind", ["demo"])
    assert [(r["shard_kind"], r["prompts"]) for r in table] == [("code-edit", 8), ("chat", 8)]
    assert [r["speedup"] for r in table] == [pytest.approx(4.0), pytest.approx(1.0)]
    assert all(r["run_tokens_per_s"] is not None and r["none_run_tokens_per_s"] for r in table)
