"""The bench's commands, joined to the core's CLI through the entry-point group `specdec.commands`: `specdec bench`
(bench/compare.py) and `specdec bench-run` (bench/throughput.py). Both run in the console as `specdec generate` does:
library logs and engine processes' output go to a log file, the bench's own lines to the terminal."""

from __future__ import annotations

import argparse
import contextlib
from pathlib import Path

from bench import compare, throughput
from specdec.console import console
from specdec.models import specdec_home

COMMANDS = ("bench", "bench-run")


def add_parsers(sub: argparse._SubParsersAction) -> None:
    compare.add_parser(sub)
    throughput.add_run_parser(sub)
    for name in COMMANDS:
        sub.choices[name].add_argument("--log", default=None, help="file for the engine's and libraries' logs "
                                       f"(default: beside --json as .log, else logs/{name}.log in the specdec home)")
        sub.choices[name].add_argument("--verbose", action="store_true", help="show the engine's logs here instead")


def log_path(args: argparse.Namespace) -> Path | None:
    if args.verbose:
        return None
    if args.log or args.json:
        return Path(args.log or Path(args.json).with_suffix(".log"))
    return specdec_home() / "logs" / f"{args.command}.log"


def main(args: argparse.Namespace) -> int:
    with console(log_path(args)) as term:
        if term.log_path is not None:
            term.line(f"specdec {args.command}: engine logs go to {term.log_path} (--verbose shows them here)")
        with contextlib.redirect_stdout(term.out):
            return compare.run(args) if args.command == "bench" else throughput.run_bench_run(args)
