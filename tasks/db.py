"""DuckDB access: SQL files from sql/, the migration runner, connections.

Migrations (sql/migrations/NNNN_*.sql) are applied once each, in order, and recorded in
`schema_migrations` with a checksum; editing an applied migration is an error (add a new
one instead). Views (sql/views/v_*.sql) are `CREATE OR REPLACE` and re-applied whenever
their file changes. Only the ingest task opens the database for writing; report and sql
open it read-only.
"""

from __future__ import annotations

import functools
import hashlib
from pathlib import Path

import duckdb

SQL_DIR = Path(__file__).resolve().parents[1] / "sql"


class MigrationError(RuntimeError):
    """The database's recorded migrations do not match the files in sql/migrations."""


@functools.cache
def load_sql(name: str) -> str:
    """Text of sql/queries/<name>.sql (or another sql/ subfolder when `name` has one)."""
    path = SQL_DIR / (name if "/" in name else f"queries/{name}")
    return path.with_suffix(".sql").read_text(encoding="utf-8")


def _checksum(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _files(folder: str) -> list[Path]:
    return sorted((SQL_DIR / folder).glob("*.sql"))


def migrate(con: duckdb.DuckDBPyConnection) -> list[str]:
    """Apply pending migrations and changed views; return the names applied."""
    con.execute(load_sql("bookkeeping/schema_migrations"))
    recorded = dict(con.execute("SELECT name, checksum FROM schema_migrations").fetchall())
    applied: list[str] = []
    for path in _files("migrations"):
        text = path.read_text(encoding="utf-8")
        name, digest = path.stem, _checksum(text)
        if name in recorded:
            if recorded[name] != digest:
                raise MigrationError(
                    f"migration {path.name} changed after it was applied; add a new migration instead"
                )
            continue
        _apply(con, name, "migration", text, digest)
        applied.append(name)
    for path in _files("views"):
        text = path.read_text(encoding="utf-8")
        name, digest = path.stem, _checksum(text)
        if recorded.get(name) != digest:
            _apply(con, name, "view", text, digest)
            applied.append(name)
    return applied


def _apply(con: duckdb.DuckDBPyConnection, name: str, kind: str, text: str, digest: str) -> None:
    # One transaction per file: a failed migration leaves no half-applied state behind.
    con.execute("BEGIN TRANSACTION")
    try:
        con.execute(text)
        con.execute(
            "INSERT OR REPLACE INTO schema_migrations (name, kind, checksum) VALUES (?, ?, ?)",
            [name, kind, digest],
        )
        con.execute("COMMIT")
    except BaseException:
        con.execute("ROLLBACK")
        raise


def connect_for_write(db: str | Path) -> duckdb.DuckDBPyConnection:
    """The writer connection (ingest only): creates the file and brings the schema up to date."""
    path = Path(db)
    path.parent.mkdir(parents=True, exist_ok=True)
    con = duckdb.connect(str(path))
    migrate(con)
    return con


def connect_read_only(db: str | Path) -> duckdb.DuckDBPyConnection:
    path = Path(db)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such DuckDB file (run the pipeline first)")
    return duckdb.connect(str(path), read_only=True)
