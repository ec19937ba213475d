"""`specdec bench`: methods side by side on the same prompts, in one run."""

from __future__ import annotations

import argparse
import dataclasses
import json
from pathlib import Path

from specdec.bench.throughput import BenchRecord, render_table, run_method
from specdec.config import METHODS, ConfigError, EngineConfig, SpecConfig
from specdec.datasets import humaneval_rows
from specdec.prompts import InputError, read_prompt_table, to_requests, validate_rows


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("bench", help="compare methods side by side (tokens/s, acceptance)")
    p.add_argument("--engine", choices=["vllm"], default="vllm")
    p.add_argument("--input", default=None, help="prompt Parquet file (default: 16 HumanEval prompts)")
    p.add_argument("--methods", default="none,ngram,specdec")
    p.add_argument("--batch-sizes", default="1,16")
    p.add_argument("--k", type=int, default=4, help="K bound for every method")
    p.add_argument("--max-tokens", type=int, default=96)
    p.add_argument("--limit", type=int, default=16, help="prompts to use")
    p.add_argument("--model", default=None)
    p.add_argument("--json", default=None, help="write the records here")


def run(args: argparse.Namespace) -> int:
    methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    for m in methods:
        if m not in METHODS:
            raise ConfigError(f"unknown method {m!r} in --methods; choose from {', '.join(METHODS)}")
    if "none" in methods:  # the reference runs first
        methods.remove("none")
        methods.insert(0, "none")
    batch_sizes = [int(b) for b in args.batch_sizes.split(",")]
    engine_cfg = EngineConfig(model=args.model)
    rows, dataset = _rows(args)
    from transformers import AutoTokenizer

    from specdec.models import resolve_model

    tokenizer = AutoTokenizer.from_pretrained(resolve_model(args.model))
    requests = to_requests(rows[: args.limit], tokenizer, args.max_tokens, engine_cfg.max_model_len, dataset)
    warmup = to_requests(rows[-2:], tokenizer, 8, engine_cfg.max_model_len, dataset)
    records: list[BenchRecord] = []
    reference = None
    for method in methods:
        spec = SpecConfig(method=method, k_max=args.k)
        print(f"== {method}: starting a fresh engine", flush=True)
        recs, outputs = run_method(spec, engine_cfg, requests, warmup, batch_sizes, dataset, reference)
        if method == "none":
            reference = outputs
        records.extend(recs)
        print(render_table(records), flush=True)
    print(f"\n{dataset}: {len(requests)} prompts, max_tokens={args.max_tokens}, K<={args.k}, greedy")
    print(render_table(records))
    if args.json:
        Path(args.json).write_text(json.dumps([dataclasses.asdict(r) for r in records], indent=2))
    return 0


def _rows(args: argparse.Namespace):
    if args.input is None:
        from specdec.prompts import PromptRow

        items = humaneval_rows(limit=args.limit + 2)
        return [PromptRow(i, r["id"], r["prompt"], None, None) for i, r in enumerate(items)], "humaneval"
    rows, rejected = validate_rows(read_prompt_table(args.input), args.input)
    if rejected:
        first = rejected[0]
        raise InputError(f"{args.input}: {len(rejected)} invalid row(s), first: row {first.index}: {first.reason}")
    return rows, Path(args.input).stem
