"""`specdec bench`: which method pays on my data, at which batch size, priced for which GPU:
`--engine replay` prices replayed steps on a cost model (bench/projection.py; with
`--run-shards`, whole runs: bench/run_replay.py), `--engine vllm` measures the real engine
(bench/throughput.py). Engine and prompt options are generate's, from the one parameter model."""

from __future__ import annotations

import argparse
import dataclasses
from typing import Any

from bench import cost_models
from bench.datasets import BUILTIN, load_rows
from bench.plots import write_outputs
from bench.reference import Workload
from specdec.cli_options import add_model_options, model_from_args
from specdec.config import ConfigError, EngineConfig
from specdec.engine_cache import engine_configs
from specdec.models import resolve_model
from specdec.params import GenerationParams
from specdec.prompts import reject_greedy_samples, tokenize_rows

REPLIES = "sharegpt-replies"  # run mode: ShareGPT's reply lengths
# Chosen per method and batch size by the bench itself; sampling options are the workload's (greedy by default).
NOT_BENCH_OPTIONS = ("method", "k_max", "budget", "cache_file", "cache_max_tokens", "batch_size", "stall_timeout_s")


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("bench", help="compare methods side by side (tokens/forward, tokens/s)")
    p.add_argument("--engine", choices=["replay", "vllm"], default="replay")
    p.add_argument("--input", action="append", default=None,
                   help=f"prompt Parquet file or folder, or a built-in set ({', '.join((*BUILTIN, REPLIES))}); repeatable")
    p.add_argument("--methods", default=None, help="comma list (default: all available)")
    p.add_argument("--batch-sizes", default="1,16", type=parse_ks, help="vllm engine: groups of this size, each run to "
                   "its end; replay: up to this many at once, the next joining as one finishes")
    p.add_argument("--k", default="4", help="K bounds to sweep, e.g. 1,3,5,7 or 1-8")
    p.add_argument("--cost", action="append", default=None, help="replay: price steps with this step-time model: "
                   f"{', '.join(cost_models.PRESETS)} or a JSON file; repeatable (default: {cost_models.H100_LLAMA3_8B})")
    p.add_argument("--host-s", type=float, default=None, help="replay: seconds per step that synchronous methods (all "
                   "but none) pay and none's async scheduling overlaps, on GPU cost models (default: the model's, "
                   f"{cost_models.h100_llama3_8b().host_s * 1e3:.3f} ms for {cost_models.H100_LLAMA3_8B}; 0: off)")
    p.add_argument("--auto-requests", default="2000", type=parse_ks, help="replay: price method auto (its pilot "
                   "included) on a shard kind of this many requests; comma list")
    p.add_argument("--rounds", type=int, default=3, help="vllm engine: interleaved rounds (medians and spread reported)")
    p.add_argument("--limit", type=int, default=None, help="prompts per dataset")
    p.add_argument("--min-prompts", type=int, default=16, help="vllm engine: prompts measured per batch size")
    p.add_argument("--epochs", type=int, default=1, help="run the workload this many times (new samples of the same "
                   "prompts), drafter states kept from one epoch to the next; only the last is measured")
    p.add_argument("--run-shards", default=None, type=parse_ks, help="replay: the run mode: the requests as sequential "
                   f"shards of these sizes, one stream and the fluid bound (input {REPLIES}: no drafting)")
    p.add_argument("--run-rows", default="256,1024", type=parse_ks, help="run mode: requests running at once")
    p.add_argument("--shard-io-s", type=float, default=0.0, help="run mode: seconds per shard outside the engine "
                   "(read, tokenize, stage): the sequential worker waits for them, the stream reads ahead")
    p.add_argument("--json", default=None, help="write the records here (specdec store-bench adds them to DuckDB)")
    p.add_argument("--plots", default=None, help="folder for PNG plots")
    add_model_options(p, GenerationParams, exclude=NOT_BENCH_OPTIONS)


def run(args: argparse.Namespace) -> int:
    ks = parse_ks(args.k)
    params = model_from_args(GenerationParams, args)
    engine_cfg, _ = engine_configs(params)
    if args.epochs < 1:
        raise ConfigError(f"--epochs must be at least 1, not {args.epochs}")
    if args.run_shards and args.engine != "replay":
        raise ConfigError("--run-shards needs --engine replay")
    records: list = []
    for source in args.input or ["humaneval"]:
        if source == REPLIES:
            from bench.datasets import sharegpt_reply_lengths
            from bench.run_replay import length_jobs, render_run_table, run_records

            if not args.run_shards:
                raise ConfigError(f"--input {REPLIES} is for the run mode (--run-shards)")
            lengths = sharegpt_reply_lengths(_tokenizer(params), args.limit or 4000, params.prompt_format)
            for cost in _costs(args, engine_cfg, ks):
                jobs, step_s = length_jobs(lengths, cost)
                replies = [r for rows in args.run_rows for r in run_records(
                    jobs, cost, step_s, rows, args.run_shards, args.shard_io_s, method="none", dataset=REPLIES)]
                print(render_run_table(replies))
                records += replies
            continue
        rows, dataset = load_rows(source, args.limit)
        requests, tokenizer, workload = _tokenize(rows, params, engine_cfg, dataset, args.epochs)
        if args.engine == "replay":
            records += _replayed(requests, tokenizer, workload, ks, dataset, engine_cfg, params, args)
        else:
            records += _vllm(requests, workload, ks, dataset, engine_cfg, params, args)
    write_outputs(records, args.json, args.plots)
    return 0


def parse_ks(text: str) -> list[int]:
    """`1,3,5` or `1-8` (or both, e.g. `1-4,8`), sorted."""
    ks: list[int] = []
    for part in text.split(","):
        low, _, high = part.partition("-")
        ks += range(int(low), int(high or low) + 1)
    return sorted(set(ks))


def _tokenize(rows, params: GenerationParams, engine_cfg: EngineConfig, dataset: str, epochs: int):
    """(requests, tokenizer, workload) of the rows that can run (generate's policy); the others reported."""
    tokenizer = _tokenizer(params)
    rows, greedy_samples = reject_greedy_samples(rows, params.temperature, dataset)
    row_samples = tuple((r.id, r.samples) for r in rows if r.samples is not None)
    one_each = [dataclasses.replace(r, samples=None) for r in rows]
    requests, left_out = tokenize_rows(one_each, tokenizer, params.max_tokens, engine_cfg.max_model_len, dataset,
                                       params.prompt_format)
    left_out = greedy_samples + left_out
    if left_out:
        print(f"{dataset}: {len(left_out)} row(s) left out:\n" + "\n".join(f"  {row.reason}" for row in left_out[:10]))
    workload = Workload(params.temperature, params.samples, params.top_p, params.top_k, params.seed or 0,
                        row_samples, epochs)
    return requests, tokenizer, workload


def _tokenizer(params: GenerationParams) -> Any:
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(resolve_model(params.model))


def _reference(requests, tokenizer, workload: Workload, engine_cfg: EngineConfig, params: GenerationParams) -> list:
    from bench.reference import reference

    cfg = dataclasses.replace(engine_cfg, max_num_seqs=64)
    return reference(requests, workload, cfg, resolve_model(params.model), tokenizer.eos_token_id)


def _replayed(requests, tokenizer, workload: Workload, ks, dataset, engine_cfg: EngineConfig,
              params: GenerationParams, args) -> list:
    """Every method's priced steps (bench/projection.py), or with --run-shards whole runs (bench/run_replay.py)."""
    from bench.drafters import all_methods
    from bench.projection import AutoPilot, project, render_projection_table
    from bench.run_replay import render_run_table, replayed_jobs, run_records

    *earlier, measured = _reference(requests, tokenizer, workload, engine_cfg, params)
    available = all_methods()
    if not args.run_shards:
        names = _method_names(args.methods, list(available), allowed=set(available))
        records = project(measured, dataset, [available[n] for n in names], ks, args.batch_sizes,
                          _costs(args, engine_cfg, ks), engine_cfg.max_model_len,
                          progress=lambda line: print(line, flush=True), warmup_epochs=earlier, workload=workload)
        pilots = [AutoPilot(params.pilot_requests, params.pilot_margin, params.pilot_min_requests, n)
                  for n in args.auto_requests]
        print(f"\n{render_projection_table(records, pilots)}")
        return records
    records = []
    for cost in _costs(args, engine_cfg, ks):
        for name in _method_names(args.methods, ["none", "specdec"], allowed=set(available)):
            for rows in args.run_rows:
                k = 0 if name == "none" else max(ks)
                jobs, step_s = replayed_jobs(measured, available[name], k, rows, cost, engine_cfg.max_model_len, earlier)
                records += run_records(jobs, cost, step_s, rows, args.run_shards, args.shard_io_s, method=name,
                                       dataset=dataset, **workload.record_fields())
    print(render_run_table(records))
    return records


def _costs(args, engine_cfg: EngineConfig, ks: list[int]) -> list[cost_models.CostModel]:
    asked = args.cost or [cost_models.H100_LLAMA3_8B]
    calibrated = cost_models.cpu_calibrated(engine_cfg, max(ks)) if cost_models.CPU_CALIBRATED in asked else None
    costs = [cost_models.resolve(c, calibrated, args.host_s) for c in asked]
    print("\n".join(cost.describe() for cost in costs))
    return costs


def _vllm(requests, workload: Workload, ks, dataset, engine_cfg, params: GenerationParams, args) -> list:
    from bench.drafters import arctic_available
    from bench.reference import epoch_requests
    from bench.throughput import DEFAULT_METHODS, engine_methods, render_table, run_rounds

    available = engine_methods(1, params.draft_model)
    default = [m for m in DEFAULT_METHODS if m != "suffix" or arctic_available()]
    names = _method_names(args.methods, default, allowed=set(available))
    names.sort(key=lambda n: n != "none")  # none first: the ratios are against it
    if args.rounds < 1:
        raise ConfigError(f"--rounds must be at least 1, not {args.rounds}")
    batch_sizes = args.batch_sizes
    warmup, measured = requests[-2:], requests[:-2] if len(requests) > 2 else requests
    epochs = [epoch_requests(measured, workload, e) for e in range(1, workload.epochs + 1)]
    if len(epochs[-1]) < max(batch_sizes):
        print(f"note: only {len(epochs[-1])} prompts to measure: batch {max(batch_sizes)} runs "
              f"{len(epochs[-1])} at once (use --limit {max(batch_sizes) + 2} or more)")
    records = []
    for k in ks:
        specs = engine_methods(k, params.draft_model)
        print(f"== {dataset} K={k}: {', '.join(names)} in {args.rounds} interleaved round(s)", flush=True)
        records += run_rounds({n: specs[n] for n in names}, engine_cfg, epochs, warmup, batch_sizes, args.rounds,
                              dataset, args.min_prompts, workload, progress=lambda line: print(line, flush=True))
        print(render_table(records), flush=True)
    return records


def _method_names(arg: str | None, default: list[str], allowed: set[str]) -> list[str]:
    names = [m.strip() for m in arg.split(",") if m.strip()] if arg else list(default)
    unknown = [m for m in names if m not in allowed]
    if unknown:
        raise ConfigError(f"unknown method(s) {unknown}; choose from {sorted(allowed)}")
    return names
