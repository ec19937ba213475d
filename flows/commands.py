"""The pipeline's `specdec` commands, joined to the core's CLI through the entry-point group
`specdec.commands`:

- `specdec run`: the speculative-generation flow from the command line (options derived from
  FlowParams). Without PREFECT_API_URL, Prefect runs it against its embedded server.
- `specdec report` / `specdec sql`: read-only views of the results database (`--plots`: as
  PNG charts, tasks/charts.py).
- `specdec store-bench`: add `specdec bench --json` records to a DuckDB file.
- `specdec demo`: the demo (flows.demo): every run in this one process, on one engine.

Loading this module imports neither prefect nor duckdb: where the pipeline's packages are
missing, the commands say what to install instead of failing at start-up.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from specdec.cli import PipelineMissing
from specdec.cli_options import add_model_options, model_from_args

COMMANDS = ("run", "report", "sql", "store-bench", "demo")


def add_parsers(sub: argparse._SubParsersAction) -> None:
    from flows.params import FlowParams

    run = sub.add_parser("run", help="run the speculative-generation flow over a folder or S3 prefix of shards")
    add_model_options(run, FlowParams, exclude=("s3_credentials_block",))

    rep = sub.add_parser("report", help="print the main analysis views of a results database")
    rep.add_argument("--db", required=True)
    rep.add_argument("--run", default=None, help="only this run id")
    rep.add_argument("--plots", default=None, metavar="DIR",
                     help="also write PNG charts of the views here (acceptance by position, K, speed-up, timeline)")

    sql = sub.add_parser("sql", help="run a read-only SQL query on a results database")
    sql.add_argument("--db", required=True)
    sql.add_argument("query")
    sql.add_argument("--param", action="append", default=[], help="value for a ? placeholder (repeatable)")

    store = sub.add_parser("store-bench", help="add `specdec bench --json` records to a DuckDB file")
    store.add_argument("--json", required=True, help="records written by specdec bench --json")
    store.add_argument("--db", required=True, help="DuckDB file (table bench_results, view v_bench_speedup)")

    from flows import demo

    demo.add_arguments(sub.add_parser("demo", help="where speculation pays: code edits and chat, with and without"))


def main(args: argparse.Namespace) -> int:
    try:
        import duckdb
    except ModuleNotFoundError as exc:
        raise PipelineMissing(str(exc)) from exc
    try:
        if args.command == "run":
            return run_flow(args)
        if args.command == "demo":
            from flows import demo

            return demo.run(args)
        if args.command == "report":
            from tasks.report import report

            print(report(args.db, args.run))
            if args.plots:
                from tasks.charts import chart_lines, write_charts

                try:
                    written = write_charts(args.db, Path(args.plots), args.run)
                except ModuleNotFoundError as exc:  # matplotlib, part of the pipeline's extra
                    raise PipelineMissing(str(exc)) from exc
                print("\n".join(chart_lines(written)))
            return 0
        if args.command == "sql":
            from tasks.report import run_sql

            print(run_sql(args.db, args.query, args.param))
            return 0
        if args.command == "store-bench":
            from tasks.bench_store import store

            rows = json.loads(Path(args.json).read_text())
            print(f"bench {store(args.db, rows)}: added {len(rows)} rows to {args.db} (table bench_results)")
            return 0
    except (FileNotFoundError, duckdb.Error) as exc:
        print(f"specdec: error: {exc}", file=sys.stderr)
        return 2
    return 1


def run_flow(args: argparse.Namespace) -> int:
    if not os.environ.get("PREFECT_API_URL"):
        print("specdec: no PREFECT_API_URL set: using Prefect's embedded server", file=sys.stderr)
        # Its first start migrates a fresh database: slower than Prefect's 20 s default on 2
        # cores. Set before Prefect is imported: it reads its settings at import.
        os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "180")
    try:
        import prefect  # noqa: F401
    except ModuleNotFoundError as exc:
        raise PipelineMissing(str(exc)) from exc
    from flows.params import FlowParams

    params = model_from_args(FlowParams, args)
    from flows.generation import speculative_generation

    result = speculative_generation(**params.model_dump())
    print(f"run_id {result['run_id']}: {result['num_prompts']} prompt(s) in {result['num_shards']} shard(s) -> {params.db}")
    return 0
