"""`specdec` console entry point."""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from specdec.bench import command as bench_command
from specdec.bench import propose_speed
from specdec.config import METHODS, ConfigError
from specdec.models import ModelError
from specdec.prompts import InputError


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="specdec", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    gen = sub.add_parser("generate", help="generate completions for a Parquet file of prompts")
    gen.add_argument("--input", required=True, help="Parquet with columns id, prompt [, messages, max_tokens]")
    gen.add_argument("--output", required=True, help="Parquet file to write")
    add_engine_args(gen)

    sample = sub.add_parser("sample", help="write a prompt shard from a bundled dataset")
    sample.add_argument("--dataset", choices=["humaneval"], default="humaneval")
    sample.add_argument("--output", required=True)
    sample.add_argument("--limit", type=int, default=None)
    propose_speed.add_parser(sub)
    bench_command.add_parser(sub)
    _pipeline_commands().add_parsers(sub, add_engine_args)
    return parser


def _pipeline_commands():
    # run/report/sql live in flows/ (specdec/ must not import prefect or duckdb).
    return importlib.import_module("flows.cli_commands")


def add_engine_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", default=None, help="Hugging Face model folder (default: bundled SmolLM2-135M-Instruct)")
    parser.add_argument("--method", choices=METHODS, default="specdec")
    parser.add_argument("--draft-model", default=None, help="draft model folder for --method draft")
    parser.add_argument("--k-max", type=int, default=4, help="most draft tokens per step")
    parser.add_argument("--ngram-min", type=int, default=2)
    parser.add_argument("--ngram-max", type=int, default=5)
    parser.add_argument("--no-budget", dest="budget", action="store_false",
                        help="specdec: draft up to K whatever verification costs (no batch budget)")
    parser.add_argument("--cache-file", default=None,
                        help="specdec: load the cross-request draft cache from this file and save it back")
    parser.add_argument("--max-tokens", type=int, default=128, help="default per-request limit")
    parser.add_argument("--temperature", type=float, default=0.0)
    parser.add_argument("--top-p", type=float, default=1.0)
    parser.add_argument("--top-k", type=int, default=0)
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--batch-size", type=int, default=16, help="most requests running at once")
    parser.add_argument("--max-model-len", type=int, default=2048)
    parser.add_argument("--kv-cache-gib", type=float, default=2.0)
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--compile", action="store_true", help="use vLLM compilation (slow start)")


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command in _pipeline_commands().COMMANDS:
        return _pipeline_commands().main(args)
    try:
        if args.command == "generate":
            from specdec.generate_command import run_generate

            return run_generate(args)
        if args.command == "bench":
            return bench_command.run(args)
        if args.command == "bench-propose":
            return propose_speed.run(args)
        if args.command == "sample":
            from specdec.datasets import humaneval_rows, write_shard

            path = write_shard(humaneval_rows(args.limit), args.output)
            print(f"wrote {path}")
            return 0
    except (ConfigError, InputError, ModelError) as exc:
        print(f"specdec: error: {exc}", file=sys.stderr)
        return 2
    return 1


if __name__ == "__main__":
    sys.exit(main())
