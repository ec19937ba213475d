"""Generation results as an Arrow table (the CLI's and the pipeline's output schema)."""

from __future__ import annotations

import collections
import json
from collections.abc import Mapping, Sequence
from typing import Any

import pyarrow as pa

from specdec.types import GenerationResult

RESULT_SCHEMA = pa.schema([
    ("id", pa.string()),
    ("sample", pa.int32()),  # which of the row's samples: rows are keyed by (id, sample)
    ("num_samples", pa.int32()),  # how many samples the row asked for
    ("completion", pa.string()), ("output_token_ids", pa.list_(pa.int32())), ("num_output_tokens", pa.int32()),
    ("finish_reason", pa.string()), ("num_steps", pa.int32()), ("num_drafts", pa.int32()),
    ("num_draft_tokens", pa.int32()), ("num_accepted_tokens", pa.int32()), ("acceptance_rate", pa.float64()),
    ("tokens_per_forward", pa.float64()), ("accepted_per_pos", pa.list_(pa.int32())),
    ("k_histogram", pa.list_(pa.int32())), ("num_fallback_steps", pa.int32()),
    ("engine_s", pa.float64()),  # engine seconds attributed to the request; 0.0: not attributed
    ("method", pa.string()), ("config_hash", pa.string()),
])


def results_to_table(results: Sequence[GenerationResult], method: str, config_hash: str, config: dict[str, Any],
                     num_samples: Mapping[str, int] | None = None, engine: Mapping[str, Any] | None = None) -> pa.Table:
    """One row per result; `num_samples`: samples each row id asked for (default: the results
    of that id); `engine`: what vLLM resolved for the engine that generated them, written to
    the schema metadata beside the config (key specdec.engine, JSON)."""
    if num_samples is None:
        num_samples = collections.Counter(res.id for res in results)
    rows = [{"id": res.id, "sample": res.sample, "num_samples": num_samples[res.id], "completion": res.completion,
             "output_token_ids": res.output_token_ids, "finish_reason": res.finish_reason, "method": res.method or method,
             "config_hash": config_hash, "engine_s": res.engine_s, **res.stats.to_columns()} for res in results]
    table = pa.Table.from_pylist(rows, schema=RESULT_SCHEMA)
    meta = {b"specdec.config": json.dumps(config, sort_keys=True).encode(), b"specdec.config_hash": config_hash.encode(),
            b"specdec.engine": json.dumps(dict(engine or {}), sort_keys=True).encode()}
    return table.replace_schema_metadata(meta)
