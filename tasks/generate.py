"""Generate one shard with the process's engine.

The vLLM engine costs ~25-60 s to start on CPU, so each worker process starts it once and
reuses it for every shard it handles: a module-level cache keyed by the engine and
speculation configs. A different config replaces the cached engine (one engine per process
fits in memory; two may not).
"""

from __future__ import annotations

import dataclasses
import gc
import logging
import time
from typing import Any

import pyarrow as pa

from specdec.config import EngineConfig, SpecConfig
from specdec.prompts import InputError, RejectedRow, to_requests
from specdec.results_table import results_to_table
from specdec.stats import ShardStats
from specdec.types import GenerationRequest, SamplingOptions
from tasks.shards import LoadedShard

log = logging.getLogger(__name__)

_ENGINES: dict[tuple[EngineConfig, SpecConfig], Any] = {}
ENGINE_STARTS = 0  # engines started by this process (tests check reuse)


def get_engine(engine_cfg: EngineConfig, spec: SpecConfig) -> tuple[Any, float]:
    """(engine, seconds spent starting it now: 0.0 when reused)."""
    global ENGINE_STARTS
    key = (engine_cfg, spec)
    if key in _ENGINES:
        return _ENGINES[key], 0.0
    _ENGINES.clear()
    gc.collect()
    from specdec.engines.vllm_engine import VllmEngine

    started = time.perf_counter()
    engine = VllmEngine(engine_cfg, spec)
    _ENGINES[key] = engine
    ENGINE_STARTS += 1
    return engine, time.perf_counter() - started


@dataclasses.dataclass
class ShardGeneration:
    results: pa.Table
    stats: ShardStats
    rejected: list[RejectedRow]  # validation + too-long prompts
    engine_start_s: float
    generate_s: float

    @property
    def tokens_per_s(self) -> float:
        return self.stats.num_output_tokens / self.generate_s if self.generate_s > 0 else 0.0


def build_requests(shard: LoadedShard, tokenizer: Any, max_tokens: int, max_model_len: int
                   ) -> tuple[list[GenerationRequest], list[RejectedRow]]:
    """Requests for the valid rows; a too-long prompt rejects that row, not the shard."""
    requests: list[GenerationRequest] = []
    rejected = list(shard.rejected)
    source = f"shard {shard.ref.uri}"
    for row in shard.rows:
        try:
            requests.extend(to_requests([row], tokenizer, max_tokens, max_model_len, source))
        except InputError as exc:
            rejected.append(RejectedRow(row.index, row.id, str(exc), "tokenize"))
        except Exception as exc:  # e.g. a chat template refusing the turns: that row only, never the batch
            reason = f"{source}: row {row.index} (id={row.id!r}): cannot tokenize: {type(exc).__name__}: {exc}"
            rejected.append(RejectedRow(row.index, row.id, reason, "tokenize"))
    return requests, rejected


def generate_shard(shard: LoadedShard, engine_cfg: EngineConfig, spec: SpecConfig,
                   sampling: SamplingOptions, max_tokens: int, config: dict[str, Any],
                   config_hash: str) -> ShardGeneration:
    if not shard.rows:  # zero-row shard, or every row rejected: no engine needed
        table = results_to_table([], spec.method, config_hash, config)
        return ShardGeneration(table, ShardStats.aggregate([]), list(shard.rejected), 0.0, 0.0)
    engine, engine_start_s = get_engine(engine_cfg, spec)
    requests, rejected = build_requests(shard, engine.tokenizer, max_tokens, engine_cfg.max_model_len)
    started = time.perf_counter()
    results = engine.generate(requests, sampling) if requests else []
    generate_s = time.perf_counter() - started
    table = results_to_table(results, spec.method, config_hash, config)
    stats = ShardStats.aggregate(r.stats for r in results)
    return ShardGeneration(table, stats, rejected, engine_start_s, generate_s)
