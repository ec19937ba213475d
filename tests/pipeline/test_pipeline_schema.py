"""Golden schema: the DuckDB schema after all migrations is pinned in golden_schema.txt.

A schema change must come with a new migration and an updated golden file
(regenerate with SPECDEC_UPDATE_GOLDEN=1). A database from an older commit upgrades in place:
test_pipeline_upgrade.py."""

from __future__ import annotations

import os
from pathlib import Path

import duckdb
import pytest

from support.db import describe_schema
from tasks.db import MigrationError, SQL_DIR, _apply, _checksum, connect_for_write, migrate

GOLDEN = Path(__file__).with_name("golden_schema.txt")


def test_schema_after_migrations_matches_golden(tmp_db):
    con = connect_for_write(tmp_db)
    actual = describe_schema(con)
    if os.environ.get("SPECDEC_UPDATE_GOLDEN"):
        GOLDEN.write_text(actual)
    assert actual == GOLDEN.read_text()


def test_migrations_are_recorded_and_applied_once(tmp_db):
    con = connect_for_write(tmp_db)
    names = [r[0] for r in con.execute("SELECT name FROM schema_migrations WHERE kind = 'migration' ORDER BY name").fetchall()]
    assert names == sorted(p.stem for p in (SQL_DIR / "migrations").glob("*.sql"))
    assert migrate(con) == []  # a second run applies nothing


def test_editing_an_applied_migration_is_refused(tmp_db):
    con = connect_for_write(tmp_db)
    con.execute("UPDATE schema_migrations SET checksum = 'changed' WHERE name = '0001_runs'")
    with pytest.raises(MigrationError, match="0001_runs"):
        migrate(con)


def test_every_sql_file_holds_one_statement():
    for path in SQL_DIR.rglob("*.sql"):
        statements = [s for s in duckdb.extract_statements(path.read_text())]
        assert len(statements) == 1, path.name


def test_rejected_rows_of_an_older_database_move_into_quarantine(tmp_db):
    con = duckdb.connect(str(tmp_db))
    con.execute((SQL_DIR / "bookkeeping/schema_migrations.sql").read_text())
    for path in sorted((SQL_DIR / "migrations").glob("*.sql")):
        if path.stem >= "0008":  # a database from before the quarantine table
            break
        _apply(con, path.stem, "migration", path.read_text(), _checksum(path.read_text()))
    con.execute("INSERT INTO rejected_rows VALUES ('r1', 'a.parquet', 3, 'x', 'null or empty prompt')")
    migrate(con)
    assert con.execute("SELECT run_id, shard_id, row_index, id, stage, reason, num_rows FROM quarantine").fetchall() == [
        ("r1", "a.parquet", 3, "x", "validate", "null or empty prompt", 1)]
    assert con.execute("SELECT count(*) FROM information_schema.tables WHERE table_name = 'rejected_rows'").fetchone() == (0,)
