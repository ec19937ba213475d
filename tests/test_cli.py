"""The `specdec` command line: unusable input fails fast with the file and row named; bad
rows are quarantined beside the output (or fail the run with --strict); a real run writes the
documented output columns."""

from __future__ import annotations

import json
import subprocess
import sys

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from specdec.cli import main
from specdec.quarantine import QUARANTINE_SCHEMA
from specdec.results_table import RESULT_SCHEMA


def write(path, rows, schema=None):
    pq.write_table(pa.Table.from_pylist(rows, schema=schema), path)
    return str(path)


def test_missing_prompt_column_names_the_file(tmp_path, capsys):
    src = write(tmp_path / "bad.parquet", [{"id": "a", "text": "hi"}])
    assert main(["generate", "--input", src, "--output", str(tmp_path / "o.parquet")]) == 2
    err = capsys.readouterr().err
    assert "bad.parquet" in err and "missing column 'prompt'" in err


def test_strict_fails_on_bad_rows_naming_each_before_any_engine(tmp_path, capsys):
    rows = [
        {"id": "a", "prompt": "ok", "messages": None},
        {"id": "b", "prompt": "", "messages": None},
        {"id": "a", "prompt": "dup", "messages": None},
        {"id": "c", "prompt": None, "messages": "{not json"},
    ]
    src = write(tmp_path / "rows.parquet", rows)
    assert main(["generate", "--input", src, "--output", str(tmp_path / "o.parquet"), "--strict"]) == 2
    err = capsys.readouterr().err
    assert "rows.parquet: 3 bad row(s)" in err
    assert "row 1 (id='b'): null or empty prompt" in err
    assert "row 2 (id='a'): duplicate id 'a'" in err
    assert "row 3 (id='c'): messages is not valid JSON" in err
    assert not (tmp_path / "o.parquet").exists()


def test_not_parquet_is_a_clear_error(tmp_path, capsys):
    src = tmp_path / "notes.parquet"
    src.write_text("hello")
    assert main(["generate", "--input", str(src), "--output", str(tmp_path / "o.parquet")]) == 2
    assert "cannot read as Parquet" in capsys.readouterr().err


def test_unknown_method_is_rejected_before_anything_runs(tmp_path, capsys):
    with pytest.raises(SystemExit):
        main(["generate", "--input", "x", "--output", "y", "--method", "magic"])
    assert "invalid choice: 'magic'" in capsys.readouterr().err


@pytest.mark.slow
def test_generate_end_to_end_through_the_console_script(tmp_path):
    """Good rows complete; a bad row and a too-long row go to the quarantine file beside the
    output, with the DuckDB quarantine table's columns; the exit code is 0."""
    rows = [
        {"id": "code", "prompt": "def add(a, b):\n    return a + b\n\ndef sub(a, b):\n", "messages": None, "max_tokens": 24},
        {"id": "chat", "prompt": None, "messages": json.dumps([{"role": "user", "content": "Say hello."}]), "max_tokens": None},
        {"id": "empty", "prompt": " ", "messages": None, "max_tokens": None},
        {"id": "long", "prompt": "word " * 300, "messages": None, "max_tokens": None},
    ]
    src = write(tmp_path / "p.parquet", rows)
    out = tmp_path / "out.parquet"
    proc = subprocess.run(
        [sys.executable, "-m", "specdec.cli", "generate", "--input", src, "--output", str(out),
         "--method", "specdec", "--max-tokens", "16", "--batch-size", "2", "--kv-cache-gib", "1",
         "--max-model-len", "256"],
        capture_output=True, text=True, timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "tokens / forward" in proc.stdout and "acceptance rate" in proc.stdout
    table = pq.read_table(out)
    assert table.schema.names == RESULT_SCHEMA.names
    got = {r["id"]: r for r in table.to_pylist()}
    assert set(got) == {"code", "chat"}
    assert 1 <= got["code"]["num_output_tokens"] <= 24
    assert 1 <= got["chat"]["num_output_tokens"] <= 16
    assert all(r["method"] == "specdec" and len(r["config_hash"]) == 16 for r in got.values())
    assert b"specdec.config" in table.schema.metadata
    quarantined = pq.read_table(tmp_path / "out.quarantine.parquet")
    assert quarantined.schema.names == QUARANTINE_SCHEMA.names
    assert [(r["row_index"], r["id"], r["stage"]) for r in quarantined.to_pylist()] == [
        (2, "empty", "validate"), (3, "long", "tokenize")]
    assert "exceeds the model length 256" in quarantined.column("reason")[1].as_py()
    assert "2 completed" in proc.stdout and "2 quarantined" in proc.stderr


def test_quarantine_file_has_the_duckdb_quarantine_table_columns():
    from tasks.db import SQL_DIR

    text = (SQL_DIR / "migrations" / "0008_quarantine.sql").read_text()
    for name in QUARANTINE_SCHEMA.names:
        assert f"    {name} " in text, name


def test_bench_warm_prompts_are_checked_before_any_engine_starts(tmp_path, capsys):
    src = write(tmp_path / "p.parquet", [{"id": f"r{i}", "prompt": f"say {i}", "messages": None} for i in range(3)])
    assert main(["bench", "--engine", "vllm", "--input", src, "--warm-prompts", "1"]) == 2
    assert "--warm-prompts needs --limit" in capsys.readouterr().err
    assert main(["bench", "--engine", "vllm", "--input", src, "--limit", "2", "--warm-prompts", "5"]) == 2
    assert "fewer than --limit 2 plus --warm-prompts 5" in capsys.readouterr().err
    assert main(["bench", "--engine", "vllm", "--input", src, "--limit", "3", "--methods", "none,specdec[warm]"]) == 2
    assert "specdec[warm] needs --warm-prompts" in capsys.readouterr().err
