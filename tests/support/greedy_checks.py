"""Shared assertion for the real-engine greedy identity tests."""

from __future__ import annotations

from specdec.stats import ShardStats


def assert_same_greedy_outputs(plain, results, method: str, drafted: bool = True) -> ShardStats:
    """Speculative results are token-identical to plain ones and (`drafted`) speculation really ran."""
    assert sum(len(r.output_token_ids) for r in plain) >= 16 * 48  # mostly full 64-token outputs
    for ref, got in zip(plain, results, strict=True):
        assert got.id == ref.id
        assert got.output_token_ids == ref.output_token_ids, f"{method} diverged on {ref.id}"
    total = ShardStats.aggregate(r.stats for r in results)
    if drafted:
        assert total.num_drafts > 0 and total.num_accepted_tokens > 0, f"{method} did not speculate"
    return total
