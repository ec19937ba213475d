"""The database part of the reference (docs/reference.md): every table and view as the
migrations leave them (applied to an in-memory DuckDB), with the SQL files' own comments.
Also the small Markdown table helper the whole reference uses."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from pathlib import Path

import duckdb

from tasks.db import SQL_DIR, migrate


def leading_comment(text: str) -> str:
    lines = []
    for line in text.splitlines():
        if not line.startswith("--"):
            break
        lines.append(line[2:].strip())
    return " ".join(lines)


def _sql_files(folder: str) -> list[Path]:
    return sorted((SQL_DIR / folder).glob("*.sql"))


_CREATE = re.compile(r"CREATE TABLE (?:IF NOT EXISTS )?(\w+)", re.I)
_COLUMN_NOTE = re.compile(r"^\s*(\w+)\s+[A-Z][^-]*?--\s*(.+)$")
_ADD_COLUMN = re.compile(r"ALTER TABLE (\w+) ADD COLUMN (\w+)[^;]*;[ \t]*(?:--\s*(.*))?", re.I)
_RENAME = re.compile(r"ALTER TABLE (\w+) RENAME COLUMN (\w+) TO (\w+)", re.I)
_CHANGES = r"(?:ALTER TABLE|INSERT INTO|UPDATE|DELETE FROM)\s+{}\b"


def table_notes() -> tuple[dict[str, str], dict[tuple[str, str], str], dict[str, list[str]]]:
    """From the SQL files, in the order applied: table -> leading comment of the file that
    creates it; (table, column) -> the column's comment; table -> later migrations that
    change it."""
    files = _sql_files("bookkeeping") + _sql_files("migrations")
    described: dict[str, str] = {}
    notes: dict[tuple[str, str], str] = {}
    changed: dict[str, list[str]] = {}
    for path in files:
        text = path.read_text(encoding="utf-8")
        comment = leading_comment(text)
        current = None
        for line in text.splitlines():
            created = _CREATE.search(line)
            if created:
                current = created.group(1)
                described.setdefault(current, comment)
                continue
            if current and line.strip().startswith(")"):
                current = None
            note = _COLUMN_NOTE.match(line) if current else None
            if note and note.group(1).upper() not in ("PRIMARY", "UNIQUE", "FOREIGN", "CHECK"):
                notes[(current, note.group(1))] = note.group(2).strip()
        for table_name, column, inline in _ADD_COLUMN.findall(text):
            notes[(table_name, column)] = inline.strip() or comment
        for table_name, old, new in _RENAME.findall(text):
            before = notes.pop((table_name, old), "")
            notes[(table_name, new)] = (before + "; " if before else "") + f"named `{old}` before {path.stem}"
        for table_name in described:
            if re.search(_CHANGES.format(table_name), text, re.I) and path.parent.name == "migrations":
                if not _CREATE.search(text) or _CREATE.search(text).group(1) != table_name:
                    changed.setdefault(table_name, []).append(path.stem)
    return described, notes, changed


def schema_sections() -> str:
    con = duckdb.connect(":memory:")
    try:
        migrate(con)
        return _schema_text(con)
    finally:
        con.close()


def _schema_text(con: duckdb.DuckDBPyConnection) -> str:
    described, notes, changed = table_notes()
    kinds = con.execute(
        "SELECT table_name, table_type FROM information_schema.tables ORDER BY table_name").fetchall()
    keys = {t: list(cols) for t, cols in con.execute(
        "SELECT table_name, constraint_column_names FROM duckdb_constraints() "
        "WHERE constraint_type = 'PRIMARY KEY'").fetchall()}
    tables = ["## Tables", "",
              "Created by the migrations in `sql/migrations/` (applied once each, in order, by",
              "`tasks.db.migrate`; only the pipeline's ingest writes them).", ""]
    views = ["## Views", "",
             "From `sql/views/` (re-applied whenever their file changes). Query them with",
             "`specdec sql --db FILE \"SELECT ...\"`.", ""]
    for name, kind in kinds:
        columns = con.execute(
            "SELECT column_name, data_type, is_nullable FROM information_schema.columns "
            "WHERE table_name = ? ORDER BY ordinal_position", [name]).fetchall()
        if kind == "VIEW":
            sql_file = SQL_DIR / "views" / f"{name}.sql"
            about = leading_comment(sql_file.read_text(encoding="utf-8")) if sql_file.is_file() else ""
            views += [f"### {name}", "", about, ""]
            views += table(["Column", "Type"], [[f"`{c}`", t] for c, t, _ in columns]) + [""]
            continue
        about = [described.get(name, "")]
        if name in keys:
            about.append("Primary key: " + ", ".join(f"`{c}`" for c in keys[name]) + ".")
        if changed.get(name):
            about.append("Changed by " + ", ".join(f"`{m}`" for m in changed[name]) + ".")
        tables += [f"### {name}", "", " ".join(a for a in about if a), ""]
        tables += table(["Column", "Type", "Null", "Note"],
                        [[f"`{c}`", t, "" if n == "NO" else "yes", notes.get((name, c), "")]
                         for c, t, n in columns]) + [""]
    migrations = ["## Migrations", "",
                  "Applied in order, each once, recorded in `schema_migrations` with a checksum.",
                  "A schema change is a new numbered file; an applied one is never edited.", ""]
    migrations += table(["Migration", "What it does"],
                        [[f"`{p.stem}`", leading_comment(p.read_text(encoding="utf-8"))]
                         for p in _sql_files("migrations")])
    return "\n".join(tables + views + migrations) + "\n"


# --- markdown ------------------------------------------------------------------------------


def table(header: Sequence[str], rows: Iterable[Sequence[str]]) -> list[str]:
    def line(cells: Sequence[str]) -> str:
        return "| " + " | ".join(_cell(c) for c in cells) + " |"

    return [line(header), "|" + "|".join("---" for _ in header) + "|"] + [line(r) for r in rows]


def _cell(text: str) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")

