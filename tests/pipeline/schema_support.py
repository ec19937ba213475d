"""The DuckDB schema as text (tables, views, columns, primary keys): what golden_schema.txt pins."""

from __future__ import annotations

import duckdb


def describe_schema(con: duckdb.DuckDBPyConnection) -> str:
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
