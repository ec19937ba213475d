"""`specdec generate`: one Parquet file of prompts in, one Parquet file of results out."""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import pyarrow.parquet as pq

from specdec.config import EngineConfig, SpecConfig, config_hash
from specdec.prompts import InputError, read_prompt_table, to_requests, validate_rows
from specdec.results_table import results_to_table
from specdec.stats import ShardStats
from specdec.summary import RunSummary
from specdec.types import SamplingOptions


def configs_from_args(args: argparse.Namespace) -> tuple[EngineConfig, SpecConfig, SamplingOptions]:
    spec = SpecConfig(
        method=args.method,
        k_max=args.k_max,
        ngram_min=args.ngram_min,
        ngram_max=args.ngram_max,
        draft_model=args.draft_model,
        budget=args.budget,
        cache_file=args.cache_file,
    )
    engine = EngineConfig(
        model=args.model,
        dtype=args.dtype,
        max_model_len=args.max_model_len,
        kv_cache_gib=args.kv_cache_gib,
        enforce_eager=not args.compile,
        max_num_seqs=args.batch_size,
        seed=args.seed or 0,
    )
    sampling = SamplingOptions(
        temperature=args.temperature, top_p=args.top_p, top_k=args.top_k, seed=args.seed
    )
    return engine, spec, sampling


def run_generate(args: argparse.Namespace) -> int:
    engine_cfg, spec, sampling = configs_from_args(args)
    source = str(args.input)
    rows, rejected = validate_rows(read_prompt_table(source), source)
    if rejected:
        details = "\n".join(f"  row {r.index} (id={r.id!r}): {r.reason}" for r in rejected[:20])
        raise InputError(f"{source}: {len(rejected)} invalid row(s):\n{details}")

    from specdec.engines.vllm_engine import VllmEngine

    started = time.perf_counter()
    engine = VllmEngine(engine_cfg, spec)
    engine_start_s = time.perf_counter() - started
    requests = to_requests(rows, engine.tokenizer, args.max_tokens, engine_cfg.max_model_len, source)

    started = time.perf_counter()
    results = engine.generate(requests, sampling, show_progress=True)
    generate_s = time.perf_counter() - started

    used = {"spec": spec.to_dict(), "engine": engine_cfg.__dict__, "sampling": sampling.__dict__}
    digest = config_hash(used)
    table = results_to_table(results, spec.method, digest, used)
    _write_atomically(table, Path(args.output))
    summary = RunSummary(
        spec.method, digest, len(results), engine_start_s, generate_s,
        ShardStats.aggregate(r.stats for r in results),
    )
    print(summary.render())
    print(f"wrote {args.output}")
    return 0


def _write_atomically(table, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    pq.write_table(table, tmp)
    os.replace(tmp, path)
