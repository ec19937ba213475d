"""PNG charts of a results database, one per question `specdec report` answers in tables:
acceptance by draft position, the K chosen per step, the speed-up against `none`, and
throughput and tokens per forward over a run. Each chart draws the rows of one query,
sql/queries/chart_<name>.sql, on the views; nothing is computed here but the drawing.

matplotlib draws through its Agg canvas (no display, no pyplot state): `specdec report --plots`
writes the PNG files, the run's Prefect summary embeds them (charts_markdown).
"""

from __future__ import annotations

import base64
import dataclasses
import io
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from tasks.db import connect_read_only, load_sql

Row = dict[str, Any]
DPI = 100
FIGSIZE = (7.5, 4.2)  # inches: 750 x 420 pixels, legible in a terminal image viewer and the Prefect UI


@dataclasses.dataclass(frozen=True)
class Chart:
    name: str  # the file <name>.png, drawn from the query chart_<name>
    title: str
    needs: str  # what the database lacks when the query has no rows
    draw: Callable[[Any, list[Row]], None]  # (matplotlib Figure, the query's rows)

    @property
    def query(self) -> str:
        return f"chart_{self.name}"


@dataclasses.dataclass(frozen=True)
class DrawnChart:
    chart: Chart
    png: bytes | None  # None: the query had no rows, nothing drawn

    def describe(self) -> str:
        return f"{self.chart.title}: no rows from {self.chart.query} ({self.chart.needs})"


def _by_run(rows: Sequence[Row]) -> dict[str, list[Row]]:
    runs: dict[str, list[Row]] = {}
    for row in rows:
        runs.setdefault(row["run_id"], []).append(row)
    return runs


def _legend(ax: Any, count: int) -> None:
    ax.legend(fontsize="small", ncol=1 + count // 8)


def _draw_acceptance(fig: Any, rows: list[Row]) -> None:
    ax = fig.subplots()
    runs = _by_run(rows)
    for run_id, points in runs.items():
        positions = [p["position"] for p in points]
        (line,) = ax.plot(positions, [p["acceptance_rate"] for p in points], marker="o", label=run_id)
        ax.plot(positions, [p["conditional_rate"] for p in points], linestyle="--", color=line.get_color())
    ax.set_xlabel("draft position (1: the first drafted token)")
    ax.set_ylabel("accepted / drafts")
    ax.set_ylim(0, 1.05)
    ax.xaxis.get_major_locator().set_params(integer=True)
    ax.set_title("solid: accepted at the position; dashed: given the one before was accepted", fontsize="small")
    _legend(ax, len(runs))


def _draw_k_usage(fig: Any, rows: list[Row]) -> None:
    ax = fig.subplots()
    runs = _by_run(rows)
    width = 0.8 / len(runs)
    for i, (run_id, points) in enumerate(runs.items()):
        ax.bar([p["k"] - 0.4 + width * (i + 0.5) for p in points], [p["share"] for p in points], width, label=run_id)
    ax.set_xlabel("K: draft tokens proposed in a step (0: no draft)")
    ax.set_ylabel("share of the run's steps")
    ax.set_xticks(sorted({r["k"] for r in rows}))
    _legend(ax, len(runs))


# v_method_comparison's speedup_basis: what the speed-up divides the output tokens by
SPEEDUP_BASIS = {"engine_s": "engine-second", "generate_s": "shard generate-second"}


def _draw_speedup(fig: Any, rows: list[Row]) -> None:
    ax = fig.subplots()
    ys = range(len(rows))
    bases = " or ".join(sorted({SPEEDUP_BASIS[r["speedup_basis"]] for r in rows}))
    engine = ax.barh([y + 0.2 for y in ys], [r["speedup"] for r in rows], 0.4, label=f"speed-up (tokens per {bases})")
    wall = ax.barh([y - 0.2 for y in ys], [r["run_speedup"] or 0 for r in rows], 0.4,
                   label="run speed-up (wall-clock tokens/s)")
    ax.bar_label(engine, fmt="%.2fx", padding=2, fontsize="small")
    ax.bar_label(wall, labels=[f"{r['run_speedup']:.2f}x" if r["run_speedup"] else "" for r in rows],
                 padding=2, fontsize="small")
    ax.axvline(1.0, color="black", linewidth=1)
    ax.set_yticks(list(ys), [r["label"] for r in rows])
    ax.invert_yaxis()
    ax.set_xlabel("against the same shards with --method none (1.0: as fast)")
    ax.set_xlim(0, max(max(r["speedup"], r["run_speedup"] or 0) for r in rows) * 1.2)
    fig.legend(fontsize="small", loc="outside lower center", ncols=2)


def _draw_timeline(fig: Any, rows: list[Row]) -> None:
    top, bottom = fig.subplots(2, 1, sharex=True)
    runs = _by_run(rows)
    for run_id, points in runs.items():
        seconds = [p["elapsed_s"] for p in points]
        (line,) = top.plot(seconds, [p["run_tokens_per_s"] for p in points], marker=".", label=run_id)
        bottom.plot(seconds, [p["tokens_per_forward"] for p in points], marker="o", markersize=4, linestyle="",
                    color=line.get_color())
    top.set_ylabel("tokens/s so far")
    bottom.set_ylabel("tokens per forward\n(each shard)")
    bottom.set_xlabel("seconds since the run started (a point per shard, as it finished)")
    for ax in (top, bottom):
        ax.margins(y=0.15)
        ax.set_ylim(bottom=0)
    _legend(top, len(runs))


CHARTS = (
    Chart("acceptance_by_position", "Acceptance by draft position", "a run with speculation", _draw_acceptance),
    Chart("k_usage", "Speculation length K per step", "a run with speculation", _draw_k_usage),
    Chart("speedup_vs_none", "Speed-up against runs without speculation",
          "runs of the same shards with speculation and with --method none", _draw_speedup),
    Chart("run_timeline", "Throughput and tokens per forward over the run", "an ingested shard", _draw_timeline),
)


def render(chart: Chart, rows: list[Row]) -> bytes:
    """The chart of `rows` as PNG bytes."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=FIGSIZE, dpi=DPI, layout="constrained")
    chart.draw(fig, rows)
    fig.suptitle(chart.title)
    out = io.BytesIO()
    fig.savefig(out, format="png")
    return out.getvalue()


def draw_charts(db: str | Path, run_id: str | None = None) -> list[DrawnChart]:
    """Every chart of the database (or of one run), read through one read-only connection."""
    con = connect_read_only(db)
    try:
        results = []
        for chart in CHARTS:
            cur = con.execute(load_sql(chart.query), [run_id, run_id])
            columns = [d[0] for d in cur.description]
            results.append((chart, [dict(zip(columns, row)) for row in cur.fetchall()]))
    finally:
        con.close()
    return [DrawnChart(chart, render(chart, rows) if rows else None) for chart, rows in results]


def write_charts(db: str | Path, folder: Path, run_id: str | None = None) -> list[tuple[DrawnChart, Path | None]]:
    """The charts as folder/<name>.png; a chart without rows is not written (its path None)."""
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for drawn in draw_charts(db, run_id):
        path = folder / f"{drawn.chart.name}.png" if drawn.png else None
        if path is not None:
            path.write_bytes(drawn.png)  # type: ignore[arg-type]
        written.append((drawn, path))
    return written


def chart_lines(written: Sequence[tuple[DrawnChart, Path | None]]) -> list[str]:
    """What a command prints: each file written, or why a chart was not drawn."""
    return [f"wrote {path}: {drawn.chart.title}" if path else f"no chart: {drawn.describe()}" for drawn, path in written]


def charts_markdown(db: str | Path, run_id: str) -> str:
    """The run's charts as markdown with the PNGs embedded as data URIs: both Prefect UIs
    render them as images (the V2 UI lets `data:image/` through to <img src>), and an artifact
    stores text only. Without matplotlib, or while another process holds the file, a line
    says why instead: the summary must not fail a run that completed."""
    import duckdb

    try:
        drawn_charts = draw_charts(db, run_id)
    except (ImportError, duckdb.Error) as exc:
        return f"Charts not drawn ({type(exc).__name__}: {exc}); `specdec report --db {db} --run {run_id} --plots DIR` draws them."
    parts = ["## Charts"]
    for drawn in drawn_charts:
        if drawn.png is None:
            parts.append(f"- {drawn.describe()}")
        else:
            parts.append(f"![{drawn.chart.title}](data:image/png;base64,{base64.b64encode(drawn.png).decode()})")
    return "\n\n".join(parts)
