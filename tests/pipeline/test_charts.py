"""`specdec report --plots`: a PNG per question, each drawn from its query's rows (sql/queries/
chart_*.sql) in a real DuckDB file filled by ingest from synthetic staged runs (no engine);
a chart whose query has no rows is named, not drawn empty."""

from __future__ import annotations

import base64
import dataclasses
import io
import time
from datetime import datetime, timedelta

import pytest

from support.synthetic_staging import stage_run
from tasks.charts import CHARTS, charts_markdown, draw_charts
from tasks.db import connect_read_only, load_sql
from tasks.ingest import ingest
from tasks.staging import Staging

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
RUN_START = datetime(2026, 1, 1)  # stage_run's runs start then
# run id: (method, shard kind, engine seconds per output token): code edits 4x cheaper with speculation
RUNS = {"demo-code-edit": ("specdec", "code", 0.005), "demo-code-edit-none": ("none", "code", 0.02),
        "demo-chat": ("specdec", "chat", 0.01), "demo-chat-none": ("none", "chat", 0.01)}


def _spread_in_time(staging: Staging, run_id: str, shard_ids: list[str], step_s: float) -> None:
    """The shards finish one after another, `step_s` apart (stage_run stamps them all alike)."""
    for i, shard_id in enumerate(shard_ids, 1):
        manifest = staging.read_manifest(run_id, shard_id)
        finished = (RUN_START + timedelta(seconds=10 + i * step_s)).isoformat()
        staging.write_shard(dataclasses.replace(manifest, generated_at=finished),
                            staging.read_results(run_id, shard_id))


@pytest.fixture
def results_db(tmp_path):
    db, staging = tmp_path / "specdec.duckdb", Staging(str(tmp_path / "staging"))
    for run_id, (method, kind, rate) in RUNS.items():
        shards = {f"{kind}-{i}.parquet": 8 for i in range(3)}
        stage_run(staging, run_id, shards, method=method, fingerprint=kind, engine_s_per_token=rate)
        _spread_in_time(staging, run_id, list(shards), step_s=rate * 1000)
        ingest(str(db), staging, run_id)
    return db


def _rows(db, query: str, run_id: str | None = None) -> list[tuple]:
    con = connect_read_only(db)
    try:
        return con.execute(load_sql(query), [run_id, run_id]).fetchall()
    finally:
        con.close()


def test_report_plots_writes_a_png_per_chart_from_its_non_empty_query(results_db, tmp_path, capfd):
    from specdec import cli

    plots = tmp_path / "plots"
    assert cli.main(["report", "--db", str(results_db), "--plots", str(plots)]) == 0
    printed = capfd.readouterr().out
    assert "== Acceptance by draft position" in printed  # the tables first, as without --plots
    for chart in CHARTS:
        path = plots / f"{chart.name}.png"
        assert f"wrote {path}: {chart.title}" in printed
        assert path.read_bytes().startswith(PNG_MAGIC) and path.stat().st_size > 10_000
        assert _rows(results_db, chart.query), chart.query
    assert sorted(p.name for p in plots.iterdir()) == sorted(f"{c.name}.png" for c in CHARTS)


def test_the_charts_draw_what_the_views_say(results_db):
    speedups = {label: round(speedup, 3) for label, speedup, _, _ in _rows(results_db, "chart_speedup_vs_none")}
    assert speedups == {"demo-code-edit": 4.0, "demo-chat": 1.0}  # specdec runs only, against their own none
    assert {r[0] for r in _rows(results_db, "chart_k_usage")} == {"demo-code-edit", "demo-chat"}
    by_position = _rows(results_db, "chart_acceptance_by_position", "demo-chat")
    assert [r[1] for r in by_position] == [1, 2, 3, 4] and by_position[0][3] == pytest.approx(by_position[0][2])
    timeline = _rows(results_db, "chart_run_timeline", "demo-code-edit")
    # shards 5 s apart, from 10 s after the start; 5 s of engine start left out of the throughput
    assert [r[1] for r in timeline] == [15.0, 20.0, 25.0]
    summary = _rows(results_db, "report_run_summary", "demo-code-edit")[0]
    assert timeline[-1][2] == pytest.approx(summary[6] / (25.0 - 5.0))


def test_a_chart_without_rows_is_named_not_drawn(results_db, tmp_path, capfd):
    from specdec import cli

    plots = tmp_path / "plots"
    assert cli.main(["report", "--db", str(results_db), "--run", "demo-chat-none", "--plots", str(plots)]) == 0
    printed = capfd.readouterr().out
    # a run without speculation: no drafts, no K; its speed-up pair and timeline are drawn
    assert "no chart: Acceptance by draft position: no rows from chart_acceptance_by_position" in printed
    assert "no chart: Speculation length K per step" in printed
    assert sorted(p.name for p in plots.iterdir()) == ["run_timeline.png", "speedup_vs_none.png"]
    drawn = {d.chart.name: d.png for d in draw_charts(results_db, "demo-chat-none")}
    assert drawn["k_usage"] is None and drawn["speedup_vs_none"].startswith(PNG_MAGIC)


def test_the_demo_ends_with_its_charts_under_its_output_folder(results_db):
    from flows import demo
    from specdec.console import Console

    terminal = io.StringIO()
    demo._final_tables(Console(terminal, io.StringIO()), results_db.parent, time.perf_counter())
    for chart in CHARTS:
        path = results_db.parent / "plots" / f"{chart.name}.png"
        assert f"demo: wrote {path}: {chart.title}" in terminal.getvalue()
        assert path.read_bytes().startswith(PNG_MAGIC)


def test_the_run_summary_embeds_its_charts_as_png_data(results_db):
    markdown = charts_markdown(results_db, "demo-code-edit")
    images = [part.split("](data:image/png;base64,", 1) for part in markdown.split("\n\n") if part.startswith("![")]
    assert [title.removeprefix("![") for title, _ in images] == [c.title for c in CHARTS]
    assert all(base64.b64decode(data.rstrip(")")).startswith(PNG_MAGIC) for _, data in images)


@pytest.mark.slow  # starts the session's Prefect server
def test_a_flow_runs_summary_artifact_embeds_its_charts(tmp_path, prefect_api, echo_engine):
    from prefect import get_client

    from flows.generation import speculative_generation
    from support.shards import write_shard

    write_shard(tmp_path / "src/a.parquet", [{"id": f"a{i}", "prompt": f"prompt a {i}"} for i in range(4)])
    run_id = speculative_generation(source=str(tmp_path / "src"), db=str(tmp_path / "r.duckdb"),
                                    staging=str(tmp_path / "staging"), max_tokens=8, k_max=2)["run_id"]
    with get_client(sync_client=True) as client:
        (markdown,) = [a.data for a in client.read_artifacts() if a.key == f"summary-{run_id}"]
    assert markdown.startswith(f"# Run `{run_id}`: completed") and "\n\n## Charts\n\n" in markdown
    timeline = next(c for c in CHARTS if c.name == "run_timeline")
    data = markdown.split(f"![{timeline.title}](data:image/png;base64,", 1)[1].split(")", 1)[0]
    assert base64.b64decode(data).startswith(PNG_MAGIC)
