"""Synthetic staged shard results (no engine): for the ingest tests and lab/ingest_bench.py.

Built column-wise with numpy so a million rows take seconds, with internally consistent
statistics (accepted <= drafted, per-position counts non-increasing).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from specdec.results_table import RESULT_SCHEMA
from specdec.stats import ShardStats
from tasks.staging import RunManifest, ShardManifest, Staging


def _lists(values: np.ndarray, width: int) -> pa.Array:
    offsets = np.arange(0, values.size + 1, width, dtype=np.int32) if width else np.zeros(values.size + 1, np.int32)
    return pa.ListArray.from_arrays(pa.array(offsets), pa.array(values.ravel(), pa.int32()))


def synthetic_results(shard_id: str, num_rows: int, k_max: int = 4, seed: int = 0,
                      method: str = "specdec", config_hash: str = "synthetic", samples: int = 1,
                      engine_s_per_token: float = 0.01) -> pa.Table:
    """`num_rows` results: `num_rows // samples` prompts with `samples` samples each; each
    request's engine seconds are `engine_s_per_token` per output token (0: not attributed)."""
    if num_rows % samples:
        raise ValueError(f"num_rows={num_rows} is not a multiple of samples={samples}")
    rng = np.random.default_rng(seed)
    n_steps = rng.integers(1, 48, num_rows).astype(np.int32)
    n_drafts = (n_steps - 1).astype(np.int32)  # every decode step after prefill drafted
    per_pos = np.zeros((num_rows, k_max), np.int32)
    remaining = n_drafts.copy()
    for pos in range(k_max):  # each position accepted at most as often as the one before
        remaining = rng.binomial(remaining, 0.7).astype(np.int32)
        per_pos[:, pos] = remaining
    accepted = per_pos.sum(axis=1).astype(np.int32)
    n_out = (n_steps + accepted).astype(np.int32)  # one target token per forward + accepted
    draft_tokens = (n_drafts * k_max).astype(np.int32)
    k_hist = np.zeros((num_rows, k_max + 1), np.int32)
    k_hist[:, k_max] = n_drafts
    tokens = rng.integers(0, 49152, int(n_out.sum())).astype(np.int32)
    tok_offsets = np.concatenate([[0], np.cumsum(n_out)]).astype(np.int32)
    ids = [f"{shard_id}/{i // samples}" for i in range(num_rows)]
    columns = {
        "id": pa.array(ids, pa.string()),
        "sample": pa.array(np.arange(num_rows, dtype=np.int32) % samples),
        "num_samples": pa.array(np.full(num_rows, samples, np.int32)),
        "completion": pa.array([f"completion {i}" for i in range(num_rows)], pa.string()),
        "output_token_ids": pa.ListArray.from_arrays(pa.array(tok_offsets), pa.array(tokens)),
        "num_output_tokens": pa.array(n_out),
        "finish_reason": pa.array(["length"] * num_rows, pa.string()),
        "num_steps": pa.array(n_steps),
        "num_drafts": pa.array(n_drafts),
        "num_draft_tokens": pa.array(draft_tokens),
        "num_accepted_tokens": pa.array(accepted),
        "acceptance_rate": pa.array(np.where(draft_tokens > 0, accepted / np.maximum(draft_tokens, 1), 0.0)),
        "tokens_per_forward": pa.array(n_out / n_steps),
        "accepted_per_pos": _lists(per_pos, k_max),
        "k_histogram": _lists(k_hist, k_max + 1),
        "num_fallback_steps": pa.array(np.zeros(num_rows, np.int32)),
        "engine_s": pa.array(n_out * engine_s_per_token, pa.float64()),
        "method": pa.array([method] * num_rows, pa.string()),
        "config_hash": pa.array([config_hash] * num_rows, pa.string()),
    }
    return pa.Table.from_pydict(columns, schema=RESULT_SCHEMA)


def table_stats(results: pa.Table) -> ShardStats:
    """The shard totals of a results table (column sums), as a worker reports them."""
    sums = {c: int(pc.sum(results.column(c)).as_py() or 0) for c in
            ("num_output_tokens", "num_steps", "num_drafts", "num_draft_tokens", "num_accepted_tokens",
             "num_fallback_steps")}
    return ShardStats(num_requests=results.num_rows, accepted_per_pos=_list_sums(results.column("accepted_per_pos")),
                      k_histogram=_list_sums(results.column("k_histogram")),
                      engine_s=float(pc.sum(results.column("engine_s")).as_py() or 0.0), **sums)


def _list_sums(column: pa.ChunkedArray) -> list[int]:
    """Element-wise sums of a list column (position i summed over rows), without Python loops."""
    values = pc.list_flatten(column).to_numpy(zero_copy_only=False).astype(np.int64)
    lengths = pc.fill_null(pc.list_value_length(column), 0).to_numpy(zero_copy_only=False)
    positions = np.arange(values.size) - np.repeat(np.cumsum(lengths) - lengths, lengths)
    return np.bincount(positions, weights=values).astype(np.int64).tolist() if values.size else []


def manifest_for(run_id: str, shard_id: str, results: pa.Table, fingerprint: str = "fp",
                 config_hash: str = "synthetic", generate_s: float = 1.0) -> ShardManifest:
    return ShardManifest(
        run_id=run_id, shard_id=shard_id, source_path=f"synthetic/{shard_id}", fingerprint=fingerprint,
        config_hash=config_hash, status="generated", num_prompts=len(pc.unique(results.column("id"))),
        stats=table_stats(results), generate_s=generate_s, generated_at="2026-01-01T00:00:00",
    )


def stage_run(staging: Staging, run_id: str, shards: dict[str, int], method: str = "specdec",
              fingerprint: str = "fp", samples: int | None = None, generate_s: float = 1.0,
              engine_s_per_token: float = 0.01, wall_s: float = 60.0, engine_start_s: float = 5.0,
              engine_busy_s: float | None = None) -> None:
    """A completed run of synthetic shards ({shard id: rows}), staged as a flow stages it.
    `samples`: the run's setting, recorded in its config as a flow records it (None: a run
    from before samples existed) and given to every prompt of its shards."""
    config = {"method": method} if samples is None else {"params": {"method": method, "samples": samples}}
    staging.write_run(RunManifest(
        run_id=run_id, run_name=None, flow_run_id=None, source="synthetic", method=method,
        config_hash="h-" + method, config=config, status="completed",
        num_shards=len(shards), started_at="2026-01-01T00:00:00", finished_at="2026-01-01T00:01:00",
        wall_s=wall_s, engine_start_s=engine_start_s, engine_busy_s=engine_busy_s,
    ))
    for i, (shard_id, rows) in enumerate(shards.items()):
        table = synthetic_results(shard_id, rows, seed=i, method=method, samples=samples or 1,
                                  engine_s_per_token=engine_s_per_token)
        manifest = manifest_for(run_id, shard_id, table, fingerprint=f"{fingerprint}-{shard_id}",
                                config_hash="h-" + method, generate_s=generate_s)
        manifest.num_input_rows = manifest.num_prompts
        staging.write_shard(manifest, table)
