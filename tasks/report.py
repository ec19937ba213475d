"""`specdec report` and `specdec sql`: read-only views of the results database as text tables."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tasks.db import connect_read_only, load_sql

REPORT_SECTIONS = (
    ("Runs", "report_run_summary"),
    ("Shards: acceptance and throughput", "report_shard_acceptance"),
    ("Acceptance by draft position", "report_acceptance_by_position"),
    ("Speculation length K per step", "report_k_usage"),
    ("Speed-up against runs without speculation", "report_method_comparison"),
    ("Speed-up per samples setting", "report_samples_speedup"),
    ("Accepted draft tokens by source (history: earlier runs of the same prompts)", "report_draft_sources"),
    ("Method auto: the engine per shard kind and what its pilot measured", "report_pilot_decisions"),
)


def render_table(columns: Sequence[str], rows: Sequence[Sequence[Any]], max_width: int = 48) -> str:
    cells = [[_fmt(v, max_width) for v in row] for row in rows]
    widths = [max([len(c)] + [len(r[i]) for r in cells]) for i, c in enumerate(columns)]
    numeric = [all(isinstance(row[i], (int, float)) or row[i] is None for row in rows) for i in range(len(columns))]

    def line(values: Sequence[str]) -> str:
        return "  ".join(v.rjust(w) if num else v.ljust(w) for v, w, num in zip(values, widths, numeric)).rstrip()

    out = [line(columns), line(["-" * w for w in widths])]
    out.extend(line(r) for r in cells)
    if not rows:
        out.append("(no rows)")
    return "\n".join(out)


def _fmt(value: Any, max_width: int) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.3f}"
    text = str(value).replace("\n", "\\n")
    return text if len(text) <= max_width else text[: max_width - 1] + "…"


def report(db: str, run_id: str | None = None) -> str:
    con = connect_read_only(db)
    try:
        parts = []
        for title, query in REPORT_SECTIONS:
            cur = con.execute(load_sql(query), [run_id, run_id])
            columns = [d[0] for d in cur.description]
            parts.append(f"== {title}\n{render_table(columns, cur.fetchall())}")
        return "\n\n".join(parts)
    finally:
        con.close()


def run_sql(db: str, query: str, params: Sequence[Any] = ()) -> str:
    con = connect_read_only(db)
    try:
        cur = con.execute(query, list(params))
        if cur.description is None:
            return "(no result)"
        return render_table([d[0] for d in cur.description], cur.fetchall())
    finally:
        con.close()
