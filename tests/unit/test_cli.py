"""The `specdec` command line: unusable input fails fast with the file and row named; bad
rows fail the run with --strict; the quarantine file has the DuckDB table's columns. A real
run (quarantine beside the output, documented columns) is tests/engine/test_cli_generate.py."""

from __future__ import annotations

import pytest

from specdec.cli import main
from specdec.quarantine import QUARANTINE_SCHEMA
from support.shards import write_shard


def test_missing_prompt_column_names_the_file(tmp_path, capsys):
    src = str(write_shard(tmp_path / "bad.parquet", [{"id": "a", "text": "hi"}]))
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
    src = str(write_shard(tmp_path / "rows.parquet", rows))
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


def test_quarantine_file_has_the_duckdb_quarantine_table_columns():
    from tasks.db import SQL_DIR

    text = (SQL_DIR / "migrations" / "0008_quarantine.sql").read_text()
    for name in QUARANTINE_SCHEMA.names:
        assert f"    {name} " in text, name
