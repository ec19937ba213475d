"""`specdec run | report | sql`: the pipeline's commands, kept out of specdec/ (which must not
import prefect or duckdb). This module imports neither at load time, so `specdec generate`
keeps working where the pipeline extras are not installed."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable

COMMANDS = ("run", "report", "sql")


def add_parsers(sub: argparse._SubParsersAction, add_engine_args: Callable[[argparse.ArgumentParser], None]) -> None:
    run = sub.add_parser("run", help="run the speculative-generation flow over a folder or S3 prefix of shards")
    run.add_argument("--source", required=True, help="folder or s3://bucket/prefix of prompt shards")
    run.add_argument("--db", default="out/specdec.duckdb", help="DuckDB file for the results")
    run.add_argument("--staging", default="out/staging", help="folder or s3:// prefix for per-shard results")
    run.add_argument("--shard-glob", default="*.parquet")
    run.add_argument("--run-name", default=None, help="run id (default: derived from source + config)")
    add_engine_args(run)

    rep = sub.add_parser("report", help="print the main analysis views of a results database")
    rep.add_argument("--db", required=True)
    rep.add_argument("--run", default=None, help="only this run id")

    sql = sub.add_parser("sql", help="run a read-only SQL query on a results database")
    sql.add_argument("--db", required=True)
    sql.add_argument("query")
    sql.add_argument("--param", action="append", default=[], help="value for a ? placeholder (repeatable)")


def main(args: argparse.Namespace) -> int:
    import duckdb

    try:
        if args.command == "report":
            from flows.report import report

            print(report(args.db, args.run))
            return 0
        if args.command == "sql":
            from flows.report import run_sql

            print(run_sql(args.db, args.query, args.param))
            return 0
        if args.command == "run":
            return _run(args)
    except (FileNotFoundError, duckdb.Error) as exc:
        print(f"specdec: error: {exc}", file=sys.stderr)
        return 2
    return 1


def _run(args: argparse.Namespace) -> int:
    from pydantic import ValidationError

    from flows.run_command import params_from_args, run_flow

    try:
        params = params_from_args(args)
    except ValidationError as exc:
        print(f"specdec: invalid flow parameters:\n{exc}", file=sys.stderr)
        return 2
    return run_flow(params)
