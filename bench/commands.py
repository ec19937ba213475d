"""The bench's commands, joined to the core's CLI through the entry-point group `specdec.commands`:
`specdec bench` (methods side by side, bench/compare.py) and `specdec bench-run` (a run of many
shards through the real engine, stream against sequential shards, bench/run_engine.py).

Both run inside the console (specdec.console), as `specdec generate` does: vLLM's INFO lines,
progress bars and the engine processes' output go to a log file, the bench's own lines (what it
prints) and warnings to the terminal; `--verbose` redirects nothing."""

from __future__ import annotations

import argparse
import contextlib
from pathlib import Path

from bench import compare, run_engine
from specdec.console import console

COMMANDS = ("bench", "bench-run")


def add_parsers(sub: argparse._SubParsersAction) -> None:
    compare.add_parser(sub)
    run_engine.add_parser(sub)
    for name in COMMANDS:
        parser = sub.choices[name]
        parser.add_argument("--log", default=None,
                            help=f"file for the engine's and libraries' logs (default: beside --json as .log, "
                                 f"else logs/{name}.log in the specdec home)")
        parser.add_argument("--verbose", action="store_true", help="show the engine's logs here instead")


def log_path(args: argparse.Namespace) -> Path | None:
    """Where the libraries' output goes; None with --verbose (the terminal)."""
    if args.verbose:
        return None
    if args.log:
        return Path(args.log)
    if args.json:
        return Path(args.json).with_suffix(".log")
    from specdec.models import specdec_home

    return specdec_home() / "logs" / f"{args.command}.log"


def main(args: argparse.Namespace) -> int:
    with console(log_path(args)) as term:
        if term.log_path is not None:
            term.line(f"specdec {args.command}: engine logs go to {term.log_path} (--verbose shows them here)")
        # The bench prints its own lines (tables, progress, files written): those are the terminal's.
        with contextlib.redirect_stdout(term.out):
            if args.command == "bench":
                return compare.run(args)
            return run_engine.run(args)
