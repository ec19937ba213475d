"""`specdec sample`: a prompt shard of HumanEval's bundled prompts, joined to the core's CLI
through the entry-point group `specdec.commands` (the core reads prompt shards but bundles no
prompt set)."""

from __future__ import annotations

import argparse

from prompt_sets.humaneval import humaneval_rows
from prompt_sets.shards import write_shard

COMMANDS = ("sample",)


def add_parsers(sub: argparse._SubParsersAction) -> None:
    sample = sub.add_parser("sample", help="write a prompt shard of HumanEval's bundled prompts")
    sample.add_argument("--output", required=True, help="Parquet file")
    sample.add_argument("--limit", type=int, default=None, help="prompts")


def main(args: argparse.Namespace) -> int:
    print(f"wrote {write_shard(humaneval_rows(args.limit), args.output)}")
    return 0
