"""`specdec` console entry point.

Other packages add commands through the entry-point group `specdec.commands`: each entry point
names an object with `COMMANDS` (names), `add_parsers(sub)` and `main(args) -> int`."""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence
from importlib.metadata import entry_points
from typing import Any

from pydantic import ValidationError

from specdec import engine_cache, generate_command, interrupts
from specdec.config import ConfigError
from specdec.models import ModelError
from specdec.prompts import InputError

COMMAND_GROUP = "specdec.commands"
# Named here only to say what to install when the group does not provide them.
PIPELINE_COMMANDS = ("run", "report", "sql")
PIPELINE_HINT = "install it with pip install 'specdec[pipeline]' (Prefect, DuckDB)"


class PipelineMissing(RuntimeError):
    """A pipeline command was asked for where the pipeline cannot be imported."""


def extensions() -> list[Any]:
    return [ep.load() for ep in entry_points(group=COMMAND_GROUP)]


def build_parser(providers: Sequence[Any]) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="specdec", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    generate_command.add_parser(sub)
    for provider in providers:
        provider.add_parsers(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    logging.basicConfig(level=logging.WARNING, format="specdec: %(levelname)s: %(message)s")
    providers = extensions()
    provided = {name for p in providers for name in p.COMMANDS}
    if argv and argv[0] in PIPELINE_COMMANDS and argv[0] not in provided:
        print(f"specdec: error: specdec {argv[0]} is a pipeline command: {PIPELINE_HINT}", file=sys.stderr)
        return 2
    args = build_parser(providers).parse_args(argv)
    with interrupts.handled(kill=engine_cache.kill_engines):
        try:
            return _dispatch(providers, args)
        except interrupts.Interrupted as exc:
            # A second signal while the engine shuts down kills it by PID (interrupts.handled).
            print(f"specdec: {exc}: shutting the engine down", file=sys.stderr)
            engine_cache.close_engines()
            return exc.exit_code


def _dispatch(providers: Sequence[Any], args: argparse.Namespace) -> int:
    try:
        for provider in providers:
            if args.command in provider.COMMANDS:
                return provider.main(args)
        if args.command == "generate":
            return generate_command.run(args)
        return 1
    except PipelineMissing as exc:
        print(f"specdec: error: specdec {args.command} is a pipeline command: {PIPELINE_HINT} ({exc})",
              file=sys.stderr)
        return 2
    except ValidationError as exc:
        print(f"specdec: error: invalid parameters:\n{exc}", file=sys.stderr)
        return 2
    except (ConfigError, InputError, ModelError) as exc:
        print(f"specdec: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
