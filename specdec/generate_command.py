"""`specdec generate`: one Parquet file of prompts in, one of results out, and the rows that
could not run in a quarantine file beside it. Exit status: 0 when at least one row completed;
1 when none did; 2 for unusable input and, with `--strict`, for any bad row."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from specdec.cli_options import add_model_options, model_from_args
from specdec.console import console
from specdec.generate import generate_rows
from specdec.interrupts import temporary_path
from specdec.params import GenerationParams
from specdec.prompts import InputError, read_prompt_table, validate_rows
from specdec.quarantine import quarantine_path, quarantine_table
from specdec.summary import RunSummary


def add_parser(sub: argparse._SubParsersAction) -> None:
    gen = sub.add_parser("generate", help="generate completions for a Parquet file of prompts")
    gen.add_argument("--input", required=True, help="Parquet with columns id, prompt [, messages, max_tokens, samples]")
    gen.add_argument("--output", required=True, help="Parquet file to write")
    gen.add_argument("--strict", action="store_true",
                     help="fail on any bad row (exit 2, nothing generated) instead of quarantining it")
    gen.add_argument("--verbose", action="store_true",
                     help="show the engine's logs here instead of in OUTPUT.log (beside the output)")
    add_model_options(gen, GenerationParams)


def run(args: argparse.Namespace) -> int:
    params = model_from_args(GenerationParams, args)
    source, output = str(args.input), Path(args.output)
    rows, rejected = validate_rows(read_prompt_table(source), source)
    if args.strict and rejected:
        raise InputError(_describe(source, rejected))
    with console(None if args.verbose else output.with_suffix(".log")) as term:
        if term.log_path is not None:
            term.line(f"specdec: engine logs go to {term.log_path} (--verbose shows them here)")
        term.status(f"generating {len(rows)} row(s) from {source} (the engine starts first)")
        out = generate_rows(rows, rejected, params, source, params.config_hash(), params.recorded_config(),
                            show_progress=args.verbose, strict=args.strict)
        term.line(f"generated {out.stats.num_output_tokens} tokens for {out.num_prompts} row(s) in "
                  f"{out.generate_s:.1f} s ({out.tokens_per_s:.1f} tokens/s)")
    # The quarantine file first: the output, renamed into place last, marks a finished run.
    _write_quarantine(out.quarantined, source, output)
    _write_atomically(out.results, output)
    if out.decision is not None:
        print(f"auto: {out.decision.reason}")
    method = f"auto -> {out.method}" if params.method == "auto" else out.method
    print(RunSummary(method, params.config_hash(), out.results.num_rows, out.engine_start_s,
                     out.generate_s, out.stats).render())
    samples = f" ({out.results.num_rows} samples)" if out.results.num_rows != out.num_prompts else ""
    print(f"wrote {output}: {out.num_prompts} completed{samples}")
    if out.results.num_rows == 0:
        print(f"specdec: error: {source}: no row could be generated", file=sys.stderr)
        return 1
    return 0


def _write_quarantine(quarantined, source: str, output: Path) -> None:
    path = quarantine_path(output)
    if not quarantined:
        path.unlink(missing_ok=True)  # a file from an earlier run would describe other rows
        return
    _write_atomically(quarantine_table(quarantined, None, source), path)
    print(f"wrote {path}: {len(quarantined)} quarantined", file=sys.stderr)
    print(_describe(source, quarantined), file=sys.stderr)


def _describe(source: str, rejected) -> str:
    shown = "\n".join(f"  {r.reason}" if r.reason.startswith(source) else f"  row {r.index} (id={r.id!r}): {r.reason}"
                      for r in rejected[:20])
    more = f"\n  ... and {len(rejected) - 20} more" if len(rejected) > 20 else ""
    return f"{source}: {len(rejected)} bad row(s):\n{shown}{more}"


def _write_atomically(table: pa.Table, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with temporary_path(path) as tmp:
        pq.write_table(table, tmp)
