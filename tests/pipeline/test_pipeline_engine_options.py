"""The engine options users set reach vLLM's engine from `specdec generate`, `specdec run` and
the flow run in-process, read back from what each path recorded of the engine vLLM started
(its resolved config: the Parquet file's metadata, DuckDB's shards.engine), not from our own
parameters. The three paths ask for the same engine, so one start serves them all (the
process's engine cache). A deployment run on a Prefect worker: test_pipeline_e2e.py; tensor
parallelism: tests/engine/test_sharded_engine.py."""

from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest

from prompt_sets.humaneval import humaneval_rows
from support.db import query
from support.shards import write_shard

pytestmark = pytest.mark.slow

# Non-default settings the CPU build takes: batched tokens (vLLM's default 8192 here), prefix
# caching (on by default), max_logprobs through engine_args (20 by default), the KV cache.
OPTIONS = {"max_num_batched_tokens": 1024, "enable_prefix_caching": False, "engine_args": {"max_logprobs": 5},
           "kv_cache_gib": 1.0, "max_tokens": 8, "batch_size": 4, "method": "none"}
CLI_OPTIONS = ["--max-num-batched-tokens", "1024", "--no-enable-prefix-caching", "--engine-args", '{"max_logprobs": 5}',
               "--kv-cache-gib", "1", "--max-tokens", "8", "--batch-size", "4", "--method", "none"]


def check_resolved(engine: dict, where: str) -> None:
    """What vLLM resolved holds each option as given."""
    got = {name: engine.get(name) for name in ("max_num_batched_tokens", "enable_prefix_caching", "max_logprobs",
                                               "kv_cache_memory_bytes", "tensor_parallel_size")}
    assert got == {"max_num_batched_tokens": 1024, "enable_prefix_caching": False, "max_logprobs": 5,
                   "kv_cache_memory_bytes": 2**30, "tensor_parallel_size": 1}, where


def shards_engine(db) -> list[dict]:
    rows = query(db, "SELECT engine FROM shards WHERE status = 'ingested' ORDER BY shard_id")
    assert len(rows) == 2, rows  # both shards generated
    return [json.loads(engine) for (engine,) in rows]


def test_engine_options_reach_vllm_from_generate_run_and_the_flow(tmp_path, prefect_api):
    from flows.generation import speculative_generation
    from specdec import cli, engine_cache

    rows = humaneval_rows(limit=4)
    write_shard(tmp_path / "src/a.parquet", rows[:2])
    write_shard(tmp_path / "src/b.parquet", rows[2:])
    starts = engine_cache.ENGINE_STARTS
    try:
        out = tmp_path / "generate.parquet"
        assert cli.main(["generate", "--input", str(tmp_path / "src/a.parquet"), "--output", str(out),
                         *CLI_OPTIONS]) == 0
        check_resolved(json.loads(pq.read_schema(out).metadata[b"specdec.engine"]), "specdec generate")

        assert cli.main(["run", "--source", str(tmp_path / "src"), "--db", str(tmp_path / "run.duckdb"),
                         "--staging", str(tmp_path / "run-staging"), *CLI_OPTIONS]) == 0
        for engine in shards_engine(tmp_path / "run.duckdb"):
            check_resolved(engine, "specdec run")

        speculative_generation(source=str(tmp_path / "src"), db=str(tmp_path / "flow.duckdb"),
                               staging=str(tmp_path / "flow-staging"), **OPTIONS)
        for engine in shards_engine(tmp_path / "flow.duckdb"):
            check_resolved(engine, "flow")
        assert engine_cache.ENGINE_STARTS - starts == 1  # the three paths asked for one engine
    finally:
        engine_cache.close_engines()
