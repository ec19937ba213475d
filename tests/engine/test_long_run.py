"""Many shards through one engine: after every generate call each per-request structure of
the driver is empty again, the drafter's inside vLLM's worker hold at most one batch (the
call's last requests, finished at the next call's first step), and the bounded ones (the
cross-request cache's tokens, sequences and nodes, the step-time samples) stay within their
bounds, the cache at its bound once it is full. One engine start (a specdec engine,
the default compiled drafter, with a small cache bound; the Python drafter's structures:
tests/unit/test_controller_replay.py).
The memory figure over 200 shards comes from a command: python -m lab.memory_bench."""

from __future__ import annotations

import pytest

from bench.engine_hooks import run_batches
from prompt_sets.humaneval import humaneval_rows
from specdec.types import SamplingOptions
from support.engine_state import state_sizes
from support.prompt_requests import prompt_requests

pytestmark = pytest.mark.slow
CACHE_TOKENS = 1_000  # a few finished requests (~100-token prompts + 24 new tokens) fill it
NUM_SHARDS, SHARD_SIZE = 8, 4


def test_per_request_state_is_empty_after_every_shard_and_bounded_state_stays_bounded(engine_factory):
    engine = engine_factory("specdec", cache_max_tokens=CACHE_TOKENS)
    tok = engine.tokenizer
    rows = humaneval_rows(limit=NUM_SHARDS * SHARD_SIZE)
    history = []
    for shard in range(NUM_SHARDS):
        part = rows[shard * SHARD_SIZE : (shard + 1) * SHARD_SIZE]
        requests = prompt_requests(part, tok, 24, engine.engine_config.max_model_len, prompt_chars=300)
        assert len(run_batches(engine, requests, SamplingOptions(temperature=0.0))) == SHARD_SIZE
        sizes = state_sizes(engine)
        per_request = {name: size for name, (size, bound) in sizes.items() if bound is None}
        assert set(per_request) >= {"driver_request_states", "driver_unfinished"}, sizes
        assert all(size == 0 for size in per_request.values()), (shard, per_request)
        assert {"live_requests", "own_sequences", "step_drafts"} <= set(sizes), sizes
        assert 0 < sizes["live_requests"][0] <= sizes["live_requests"][1], sizes  # the last batch, at most
        assert all(size <= bound for size, bound in sizes.values() if bound is not None), (shard, sizes)
        history.append(sizes)
    tokens = [h["cache_tokens"][0] for h in history]
    sequences = [h["cache_sequences"][0] for h in history]
    # The cache filled up and then evicted: it holds fewer requests than it was given.
    assert max(tokens) > CACHE_TOKENS // 2 and sequences[-1] < NUM_SHARDS * SHARD_SIZE, (tokens, sequences)
