"""`specdec run`: the speculative-generation flow from the command line.

Without PREFECT_API_URL, Prefect runs the flow against its embedded (ephemeral) server: no
set-up needed. With it, the run is recorded on that server like any other flow run.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from flows.params import FlowParams


def params_from_args(args: argparse.Namespace) -> FlowParams:
    return FlowParams(
        source=args.source, shard_glob=args.shard_glob, db=args.db, staging=args.staging,
        run_name=args.run_name, model=args.model, method=args.method, k_max=args.k_max,
        ngram_min=args.ngram_min, ngram_max=args.ngram_max, draft_model=args.draft_model,
        budget=args.budget, cache_file=args.cache_file,
        max_tokens=args.max_tokens, temperature=args.temperature, top_p=args.top_p,
        top_k=args.top_k, seed=args.seed, batch_size=args.batch_size,
        max_model_len=args.max_model_len, kv_cache_gib=args.kv_cache_gib, dtype=args.dtype,
        enforce_eager=not args.compile,
    )


def flow_kwargs(params: FlowParams) -> dict[str, Any]:
    return params.model_dump()


def use_embedded_server_if_unset() -> None:
    if not os.environ.get("PREFECT_API_URL"):
        print("specdec: no PREFECT_API_URL set: using Prefect's embedded server", file=sys.stderr)
        # Its first start migrates a fresh database: slower than Prefect's 20 s default on 2 cores.
        os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "180")


def run_flow(params: FlowParams) -> int:
    use_embedded_server_if_unset()
    from flows.generation import speculative_generation

    result = speculative_generation(**flow_kwargs(params))
    print(f"run_id {result['run_id']}: {result['num_prompts']} prompt(s) in {result['num_shards']} shard(s) -> {params.db}")
    return 0
