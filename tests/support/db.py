"""Reading a DuckDB results file in tests: `query` opens it read-only, runs one statement with
`?` parameters and closes it again (DuckDB allows one writer process; a test must not hold the
file while the code under test writes it). `describe_schema` is what golden_schema.txt pins."""

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
