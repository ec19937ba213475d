"""The one generate path: validated prompt rows -> results table + quarantined rows.

`specdec generate` and the pipeline's generate task both call `generate_rows`: the same
tokenize policy (specdec.prompts), the same engine reuse (specdec.engine_cache) and the same
rule for bad input: a row that cannot run is quarantined with its reason, the others run.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence
from typing import Any

import pyarrow as pa

from specdec.engine_cache import close_engines, get_engine
from specdec.engines.stall import EngineStalled
from specdec.params import GenerationParams
from specdec.prompts import InputError, PromptRow, RejectedRow, tokenize_rows
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

    @property
    def tokens_per_s(self) -> float:
        return self.stats.num_output_tokens / self.generate_s if self.generate_s > 0 else 0.0


def generate_rows(rows: Sequence[PromptRow], rejected: Sequence[RejectedRow], params: GenerationParams,
                  source: str, config_hash: str, config: dict[str, Any], show_progress: bool = False,
                  strict: bool = False) -> Generation:
    """Generate every valid row; `rejected` (from validation) joins the quarantine.
    `source` names the file or shard in every message. `strict`: a row that cannot be
    tokenized within the model length fails the call before anything is generated."""
    if not rows:  # zero-row input, or every row rejected: no engine needed
        table = results_to_table([], params.method, config_hash, config)
        return Generation(table, ShardStats.aggregate([]), list(rejected), 0.0, 0.0)
    engine, engine_start_s = get_engine(params)
    requests, too_long = tokenize_rows(rows, engine.tokenizer, params.max_tokens,
                                       engine.engine_config.max_model_len, source, params.prompt_format)
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
    table = results_to_table(results, params.method, config_hash, config)
    stats = ShardStats.aggregate(r.stats for r in results)
    return Generation(table, stats, [*rejected, *too_long], engine_start_s, generate_s)
