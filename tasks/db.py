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
import importlib.resources
import os
import time
from collections.abc import Callable
from pathlib import Path

import duckdb


def _sql_dir() -> Path:
    """The installed SQL files: the package `tasks.sql`, which is the repo's top-level sql/
    folder mapped into `tasks` by pyproject.toml, so that wheels carry it."""
    try:
        root = Path(str(importlib.resources.files("tasks.sql")))
    except ModuleNotFoundError as exc:
        raise ImportError(
            "the SQL files (package tasks.sql) are not installed: reinstall specdec "
            "(in a checkout: pip install -e '.[pipeline]')"
        ) from exc
    if not (root / "migrations").is_dir():
        raise ImportError(f"the installed package tasks.sql ({root}) has no migrations/ folder")
    return root


SQL_DIR = _sql_dir()


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


class DatabaseLockedError(RuntimeError):
    """Another process kept the DuckDB file locked for longer than the wait budget."""


# Rows per row group in what the writer adds. DuckDB writes an insert of at least one row group
# straight to the file, compressed, and commits it by reference; a smaller insert into a
# non-empty table (a shard under the default 122,880 rows) is copied into the table, logged
# whole to the WAL and compressed again at checkpoint: about a third more CPU per row.
WRITE_ROW_GROUP_SIZE = 16_384
# The writer attaches the file under a fixed name; views bind to their own catalog, so
# readers that open the file with duckdb.connect(path) see them unchanged.
ATTACH_FOR_WRITE = f"ATTACH ? AS specdec (ROW_GROUP_SIZE {WRITE_ROW_GROUP_SIZE})"
USE_WRITTEN = "USE specdec"

# How long ingest waits for another process (a notebook, `duckdb` CLI, a second run) to let
# go of the file before giving up; DuckDB allows one writer process and never queues.
LOCK_WAIT_S = float(os.environ.get("SPECDEC_DB_LOCK_WAIT_S", "600"))


def connect_for_write(db: str | Path, wait_s: float | None = None,
                      on_wait: Callable[[str], None] | None = None) -> duckdb.DuckDBPyConnection:
    """The writer connection (ingest only): creates the file and brings the schema up to date.

    While another process holds the file, retries with backoff (1 s doubling to 30 s) for
    `wait_s` (default LOCK_WAIT_S), reporting each wait through `on_wait`. The lock is taken
    before anything is read or written, so waiting never touches the file's contents."""
    path = Path(db)
    path.parent.mkdir(parents=True, exist_ok=True)
    budget = LOCK_WAIT_S if wait_s is None else wait_s
    deadline, delay = time.monotonic() + budget, 1.0
    while True:
        try:
            con = _attach_for_write(path)
            break
        except duckdb.IOException as exc:
            if "lock" not in str(exc).lower():
                raise
            left = deadline - time.monotonic()
            if left <= 0:
                raise DatabaseLockedError(
                    f"DuckDB file {path} is still locked by another process after {budget:.0f} s; "
                    f"close the other connection and re-run (nothing was written): {exc}") from exc
            pause = min(delay, left)
            if on_wait:
                on_wait(f"DuckDB file {path} is locked by another process; retrying in {pause:.1f} s "
                        f"({left:.0f} s left): {exc}")
            time.sleep(pause)
            delay = min(delay * 2, 30.0)
    migrate(con)
    return con


def _attach_for_write(path: Path) -> duckdb.DuckDBPyConnection:
    """`path` attached with WRITE_ROW_GROUP_SIZE (an attach option, not a setting) and in use,
    so unqualified names resolve as they would after duckdb.connect(path)."""
    con = duckdb.connect()
    try:
        con.execute(ATTACH_FOR_WRITE, [str(path)])
        con.execute(USE_WRITTEN)
    except BaseException:
        con.close()
        raise
    return con


def write_cursor(con: duckdb.DuckDBPyConnection) -> duckdb.DuckDBPyConnection:
    """A second connection to the writer's database file, with its own transaction (a cursor
    starts in the in-memory catalog the file is attached to)."""
    cursor = con.cursor()
    cursor.execute(USE_WRITTEN)
    return cursor


def connect_read_only(db: str | Path) -> duckdb.DuckDBPyConnection:
    path = Path(db)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such DuckDB file (run the pipeline first)")
    return duckdb.connect(str(path), read_only=True)
