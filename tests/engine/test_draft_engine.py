"""`--method draft` on the real engine: a draft model made from the bundled model's first
layers (same tokenizer, embeddings and head; support.model_variants) drafts, vLLM verifies,
and greedy output is identical to `none`; a draft with another vocabulary is refused before
any engine starts, naming both sizes."""

from __future__ import annotations

import pytest

from bench.engine_hooks import run_batches
from specdec import engine_cache
from specdec.engine_cache import close_engines
from specdec.generate import generate_rows
from specdec.models import ModelError
from specdec.params import GenerationParams
from specdec.prompts import PromptRow
from specdec.types import SamplingOptions
from support import model_variants
from support.prompt_requests import prompt_requests

pytestmark = pytest.mark.slow

K = 2  # every drafted token costs the CPU's verification: a short draft keeps the test short

COMMON = dict(max_tokens=24, batch_size=16, kv_cache_gib=1.0, max_model_len=1024, prompt_format="raw")


@pytest.fixture(scope="module")
def rows(humaneval_rows):
    return [PromptRow(i, r["id"], r["prompt"], None, None) for i, r in enumerate(humaneval_rows[:16])]


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    folder = tmp_path_factory.mktemp("models")
    return model_variants.draft_model(folder), model_variants.other_vocab_model(folder)


def _generate(params: GenerationParams, rows):
    return generate_rows(rows, [], params, "humaneval", params.config_hash(), params.recorded_config())


def test_a_draft_model_speculates_losslessly(rows, models, humaneval_rows, engine_factory, engine_config):
    draft, _ = models
    try:
        drafted = _generate(GenerationParams(method="draft", draft_model=str(draft), k_max=K, **COMMON), rows)
    finally:
        close_engines()
    # `none` on the suite's shared engine, the same prompts tokenized the same way (raw)
    requests = prompt_requests(humaneval_rows[:16], engine_factory("none").tokenizer, COMMON["max_tokens"],
                               engine_config.max_model_len)
    plain = run_batches(engine_factory("none"), requests, SamplingOptions(temperature=0.0))
    assert {r["id"]: r["output_token_ids"] for r in drafted.results.to_pylist()} == {
        r.id: list(r.output_token_ids) for r in plain}
    stats = drafted.stats
    # vLLM's per-request record of every step: K-token drafts, some of them accepted
    assert stats.num_draft_tokens == K * stats.num_drafts > 0
    assert 0 <= stats.num_accepted_tokens <= stats.num_draft_tokens
    assert len(stats.accepted_per_pos) == K and sorted(stats.accepted_per_pos, reverse=True) == stats.accepted_per_pos
    assert stats.num_steps == stats.num_output_tokens - stats.num_accepted_tokens


def test_a_draft_with_another_vocabulary_fails_before_an_engine_starts(rows, models):
    _, other = models
    starts = engine_cache.ENGINE_STARTS
    with pytest.raises(ModelError, match=r"vocabulary of 32000 tokens, the target .* 49152"):
        _generate(GenerationParams(method="draft", draft_model=str(other), **COMMON), rows)
    assert engine_cache.ENGINE_STARTS == starts
