"""The `specdec` command line: unusable input fails fast with the file and row named; bad
rows fail the run with --strict; the quarantine file has the DuckDB table's columns; `specdec
sample` joins through the entry-point group. A real run (quarantine beside the output,
documented columns) is tests/engine/test_cli_generate.py."""

from __future__ import annotations

import pyarrow.parquet as pq
import pytest

from specdec.cli import main
from specdec.quarantine import QUARANTINE_SCHEMA, quarantine_table
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
    import duckdb
    import pyarrow as pa

    from specdec.prompts import RejectedRow
    from tasks.db import migrate

    con = duckdb.connect()  # in memory, migrated as ingest migrates a database
    migrate(con)
    columns = con.execute("SELECT column_name, data_type FROM information_schema.columns "
                          "WHERE table_name = 'quarantine' ORDER BY ordinal_position").fetchall()
    duckdb_type = {pa.string(): "VARCHAR", pa.int32(): "INTEGER", pa.int64(): "BIGINT", pa.timestamp("us"): "TIMESTAMP"}
    assert columns == [(field.name, duckdb_type[field.type]) for field in QUARANTINE_SCHEMA]
    # A quarantine file's rows go into the table column by column and come back as they were.
    rejected = [RejectedRow(3, "b", "null or empty prompt"), RejectedRow(5, None, "too long", "tokenize")]
    table = quarantine_table(rejected, "run-1", "rows.parquet")
    con.register("quarantine_file", table)
    con.execute("INSERT INTO quarantine SELECT * FROM quarantine_file")
    assert con.execute("SELECT * FROM quarantine ORDER BY row_index").fetchall() == [
        tuple(row.values()) for row in table.to_pylist()]


def test_sample_writes_a_shard_of_humaneval_prompts(tmp_path, capsys):
    out = tmp_path / "he.parquet"
    assert main(["sample", "--output", str(out), "--limit", "3"]) == 0
    assert capsys.readouterr().out == f"wrote {out}\n"
    assert pq.read_table(out).column("id").to_pylist() == ["HumanEval/0", "HumanEval/1", "HumanEval/2"]
