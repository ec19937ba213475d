"""Generation results as an Arrow table (the CLI's and the pipeline's output schema)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import pyarrow as pa

from specdec.stats import LEGACY_NAMES
from specdec.types import GenerationResult

RESULT_SCHEMA = pa.schema(
    [
        ("id", pa.string()),
        ("completion", pa.string()),
        ("output_token_ids", pa.list_(pa.int32())),
        ("num_output_tokens", pa.int32()),
        ("finish_reason", pa.string()),
        ("num_steps", pa.int32()),
        ("num_drafts", pa.int32()),
        ("num_draft_tokens", pa.int32()),
        ("num_accepted_tokens", pa.int32()),
        ("acceptance_rate", pa.float64()),
        ("tokens_per_forward", pa.float64()),
        ("accepted_per_pos", pa.list_(pa.int32())),
        ("k_histogram", pa.list_(pa.int32())),
        ("num_fallback_steps", pa.int32()),
        ("method", pa.string()),
        ("config_hash", pa.string()),
    ]
)


def with_current_names(table: pa.Table) -> pa.Table:
    """A results table as an older worker staged it, with today's column names (a fleet is
    upgraded one worker at a time, so ingest meets both)."""
    names = table.column_names
    if not any(old in names for old in LEGACY_NAMES):
        return table
    for old, new in LEGACY_NAMES.items():
        if old in names and new in names:  # both written: today's name wins
            table = table.drop_columns([old])
    return table.rename_columns([LEGACY_NAMES.get(n, n) for n in table.column_names])


def results_to_table(
    results: Sequence[GenerationResult], method: str, config_hash: str, config: dict[str, Any]
) -> pa.Table:
    rows = []
    for res in results:
        row = {
            "id": res.id,
            "completion": res.completion,
            "output_token_ids": res.output_token_ids,
            "finish_reason": res.finish_reason,
            "method": method,
            "config_hash": config_hash,
        }
        row.update(res.stats.to_columns())
        rows.append(row)
    table = pa.Table.from_pylist(rows, schema=RESULT_SCHEMA)
    meta = {b"specdec.config": json.dumps(config, sort_keys=True).encode(), b"specdec.config_hash": config_hash.encode()}
    return table.replace_schema_metadata(meta)
