"""The one generate path: validated prompt rows -> results table + quarantined rows.

`specdec generate` and the pipeline's generate task both call `generate_rows`: the same
tokenize policy (specdec.prompts), the same engine reuse (specdec.engine_cache) and the same
rule for bad input: a row that cannot run is quarantined with its reason, the others run.
A row runs as one request per sample; results are keyed by (id, sample).
"""

from __future__ import annotations

import collections
import dataclasses
import time
from collections.abc import Sequence
from typing import Any

import pyarrow as pa

from specdec.engine_cache import close_engines, get_engine
from specdec.engines.stall import EngineStalled
from specdec.params import GenerationParams
from specdec.prompts import InputError, PromptRow, RejectedRow, reject_greedy_samples, tokenize_rows
from specdec.results_table import results_to_table
from specdec.stats import ShardStats


@dataclasses.dataclass
class Generation:
    """What one generate call produced."""

    results: pa.Table
    stats: ShardStats
    quarantined: list[RejectedRow]  # rows that did not run, validation and tokenize alike
    engine_start_s: float
    generate_s: float
    num_prompts: int = 0  # rows that ran; results hold one row per (id, sample)

    @property
    def tokens_per_s(self) -> float:
        return self.stats.num_output_tokens / self.generate_s if self.generate_s > 0 else 0.0


def generate_rows(rows: Sequence[PromptRow], rejected: Sequence[RejectedRow], params: GenerationParams,
                  source: str, config_hash: str, config: dict[str, Any], show_progress: bool = False,
                  strict: bool = False) -> Generation:
    """Generate every valid row; `rejected` (from validation) joins the quarantine.
    `source` names the file or shard in every message. `strict`: a row that cannot be
    tokenized within the model length fails the call before anything is generated."""
    rows, greedy = reject_greedy_samples(rows, params.temperature, source)
    if strict and greedy:
        raise InputError(f"{source}: {len(greedy)} row(s) cannot run: " + "; ".join(r.reason for r in greedy[:5]))
    if not rows:  # zero-row input, or every row rejected: no engine needed
        table = results_to_table([], params.method, config_hash, config)
        return Generation(table, ShardStats.aggregate([]), [*rejected, *greedy], 0.0, 0.0)
    engine, engine_start_s = get_engine(params)
    requests, too_long = tokenize_rows(rows, engine.tokenizer, params.max_tokens, engine.engine_config.max_model_len,
                                       source, params.prompt_format, params.samples, params.seed)
    if strict and too_long:
        raise InputError(f"{source}: {len(too_long)} row(s) cannot run: " + "; ".join(r.reason for r in too_long[:5]))
    started = time.perf_counter()
    try:
        results = engine.generate(requests, params.sampling(), show_progress=show_progress,
                                  stall_timeout_s=params.stall_timeout_s) if requests else []
    except EngineStalled as exc:
        close_engines()  # free it now; the next call starts a new engine
        raise EngineStalled(f"{source}: {exc}; a new engine starts for the next call") from exc
    generate_s = time.perf_counter() - started
    for request, result in zip(requests, results, strict=True):  # engines answer in request order
        assert (result.id, result.sample) == (request.id, request.sample), (result.id, result.sample, request.id)
    num_samples = collections.Counter(r.id for r in requests)  # what each row asked for
    table = results_to_table(results, params.method, config_hash, config, num_samples)
    stats = ShardStats.aggregate(r.stats for r in results)
    take_source_counts = getattr(engine, "take_source_counts", None)  # test engines have none
    if take_source_counts is not None:
        stats.add_source_counts(take_source_counts())
    return Generation(table, stats, [*rejected, *greedy, *too_long], engine_start_s, generate_s, len(num_samples))
