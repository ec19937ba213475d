"""Per-source draft counts in the shard and run totals: added per generate call, summed over
shards, and kept through a manifest's JSON (older manifests without them read as empty)."""

from __future__ import annotations

import pytest

from specdec.stats import DRAFT_SOURCES, RunStats, ShardStats


def test_source_counts_add_up_in_the_order_of_draft_sources():
    shard = ShardStats()
    shard.add_source_counts({"history": (10, 8), "own": (5, 1)})
    shard.add_source_counts({"history": (2, 2), "live": (3, 0)})
    position = {source: i for i, source in enumerate(DRAFT_SOURCES)}
    assert shard.drafted_by_source[position["history"]] == 12 and shard.accepted_by_source[position["history"]] == 10
    assert shard.drafted_by_source[position["own"]] == 5 and shard.drafted_by_source[position["live"]] == 3
    assert sum(shard.drafted_by_source) == 20 and sum(shard.accepted_by_source) == 11

    other = ShardStats()
    other.add_source_counts({"sibling": (4, 4)})
    run = RunStats.aggregate([shard, other])
    assert sum(run.accepted_by_source) == 15 and run.accepted_by_source[position["sibling"]] == 4


def test_an_unknown_source_is_refused():
    with pytest.raises(ValueError, match="unknown draft sources"):
        ShardStats().add_source_counts({"oracle": (1, 1)})


def test_source_counts_survive_the_manifest_json_and_older_manifests_have_none():
    shard = ShardStats()
    shard.add_source_counts({"cache": (7, 3)})
    again = ShardStats.from_dict(shard.to_dict())
    assert (again.drafted_by_source, again.accepted_by_source) == (shard.drafted_by_source, shard.accepted_by_source)
    older = {k: v for k, v in shard.to_dict().items() if not k.endswith("_by_source")}
    assert ShardStats.from_dict(older).drafted_by_source == []
