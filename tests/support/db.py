"""Reading a DuckDB results file in tests: `query` opens it read-only, runs one statement with
`?` parameters and closes it again (DuckDB allows one writer process; a test must not hold the
file while the code under test writes it); `named_rows` does the same for a query of sql/queries,
as dicts. `apply_schema_up_to` builds an older database; `describe_schema` is what
golden_schema.txt pins."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import duckdb


def query(db: str | Path, sql: str, params: list[Any] | tuple[Any, ...] = ()) -> list[tuple]:
    """All rows of `sql` on the DuckDB file `db`, opened read-only for this one statement."""
    con = duckdb.connect(str(db), read_only=True)
    try:
        return con.execute(sql, list(params)).fetchall()
    finally:
        con.close()


def named_rows(db: str | Path, name: str, params: list[Any]) -> list[dict[str, Any]]:
    """The rows of the query sql/queries/`name`.sql on `db`, each a dict by column name."""
    from tasks.db import connect_read_only, load_sql

    con = connect_read_only(str(db))
    try:
        cur = con.execute(load_sql(name), params)
        return [dict(zip([d[0] for d in cur.description], row)) for row in cur.fetchall()]
    finally:
        con.close()


def apply_schema_up_to(con: duckdb.DuckDBPyConnection, last_migration: str, views_left_out: tuple[str, ...]) -> None:
    """The schema of a database migrated up to `last_migration` (inclusive), with today's views
    but `views_left_out` (those that need later columns)."""
    from tasks.db import SQL_DIR, _apply, _checksum

    con.execute((SQL_DIR / "bookkeeping/schema_migrations.sql").read_text())
    for folder, kind in (("migrations", "migration"), ("views", "view")):
        for file in sorted((SQL_DIR / folder).glob("*.sql")):
            if (kind == "migration" and file.stem > last_migration) or file.stem in views_left_out:
                continue
            _apply(con, file.stem, kind, file.read_text(), _checksum(file.read_text()))


def describe_schema(con: duckdb.DuckDBPyConnection) -> str:
    """The schema as text: tables, views, columns (type, NOT NULL), primary keys."""
    lines = []
    rows = con.execute(
        "SELECT table_name, table_type FROM information_schema.tables ORDER BY table_name"
    ).fetchall()
    for name, kind in rows:
        lines.append(f"{'VIEW' if kind == 'VIEW' else 'TABLE'} {name}")
        for col, dtype, nullable in con.execute(
            "SELECT column_name, data_type, is_nullable FROM information_schema.columns "
            "WHERE table_name = ? ORDER BY ordinal_position",
            [name],
        ).fetchall():
            lines.append(f"  {col} {dtype}{'' if nullable == 'YES' else ' NOT NULL'}")
    for table, cols in con.execute(
        "SELECT table_name, constraint_column_names FROM duckdb_constraints() "
        "WHERE constraint_type = 'PRIMARY KEY' ORDER BY table_name"
    ).fetchall():
        lines.append(f"PRIMARY KEY {table} ({', '.join(cols)})")
    return "\n".join(lines) + "\n"
