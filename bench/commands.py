"""The bench's commands, joined to the core's CLI through the entry-point group `specdec.commands`:
`specdec bench` (methods side by side, bench/compare.py) and `specdec bench-run` (a run of many
shards through the real engine, stream against sequential shards, bench/run_engine.py)."""

from __future__ import annotations

import argparse

from bench import compare, run_engine

COMMANDS = ("bench", "bench-run")


def add_parsers(sub: argparse._SubParsersAction) -> None:
    compare.add_parser(sub)
    run_engine.add_parser(sub)


def main(args: argparse.Namespace) -> int:
    if args.command == "bench":
        return compare.run(args)
    return run_engine.run(args)
