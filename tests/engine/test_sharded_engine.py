"""A model split over two tensor-parallel ranks on vLLM's CPU build (one core each, bound by
the engine adapter): specdec's greedy output is identical to `none` and to one rank, the
per-request statistics add up to the drafter's counts (taken from the one rank that drafts,
not summed over ranks), and the draft cache file is written by that rank alone.

SmolLM2-135M has 9 query and 3 key-value heads, which two ranks cannot split; the test model
adds heads that contribute nothing (support.model_variants.tp2_model)."""

from __future__ import annotations

import pytest

from specdec.engine_cache import close_engines, engines
from specdec.generate import generate_rows
from specdec.params import GenerationParams
from specdec.prompts import PromptRow
from support import model_variants

pytestmark = pytest.mark.slow

MAX_TOKENS = 32
COMMON = dict(max_tokens=MAX_TOKENS, batch_size=16, kv_cache_gib=1.0, max_model_len=1024, prompt_format="raw")


@pytest.fixture(scope="module")
def rows(humaneval_rows):
    return [PromptRow(i, r["id"], r["prompt"], None, None) for i, r in enumerate(humaneval_rows[:16])]


@pytest.fixture(scope="module")
def tp2_model(tmp_path_factory):
    return str(model_variants.tp2_model(tmp_path_factory.mktemp("models")))


def _generate(params: GenerationParams, rows):
    out = generate_rows(rows, [], params, "humaneval", params.config_hash(), params.recorded_config())
    return {r["id"]: r["output_token_ids"] for r in out.results.to_pylist()}, out


@pytest.fixture(scope="module")
def runs(rows, tp2_model, tmp_path_factory):
    cache_file = str(tmp_path_factory.mktemp("cache") / "drafts.bin")
    try:
        specdec = GenerationParams(model=tp2_model, tensor_parallel_size=2, budget=False, cache_file=cache_file,
                                   **COMMON)
        sharded = _generate(specdec, rows)
        engine = engines()[0]
        resolved = dict(engine.resolved)
        saved = engine.llm.collective_rpc(_save_cache_replies, args=(cache_file,))
        # the same engine with drafting off: what `none` outputs on two ranks
        none_sharded = _generate(GenerationParams(model=tp2_model, tensor_parallel_size=2, method="none", **COMMON),
                                 rows)
        one_rank = _generate(GenerationParams(model=tp2_model, method="none", **COMMON), rows)
    finally:
        close_engines()
    return sharded, none_sharded, one_rank, resolved, saved


def _save_cache_replies(worker, path):
    """Each rank's reply to the drafter's save: the sequences it wrote (0: it holds no drafter)."""
    from specdec.engines import vllm_proposer

    return vllm_proposer.save_cache(worker, path)


def test_two_ranks_draft_losslessly(runs):
    (sharded, out), (none_sharded, _), (one_rank, _), resolved, _ = runs
    assert resolved["tensor_parallel_size"] == 2 and resolved["distributed_executor_backend"] == "mp"
    assert sharded == none_sharded == one_rank
    assert out.stats.num_draft_tokens > 0  # it did speculate


def test_the_statistics_come_from_the_drafting_rank_alone(runs):
    (_, out), *_ = runs
    stats = out.stats
    # one rank's counts: summing both ranks would count every draft twice
    assert sum(stats.drafted_by_source) == stats.num_draft_tokens
    assert sum(stats.accepted_by_source) == stats.num_accepted_tokens
    assert stats.num_accepted_tokens <= stats.num_draft_tokens
    assert stats.num_output_tokens == sum(len(t) for t in runs[0][0].values())


def test_one_rank_writes_the_cache_file(runs):
    *_, saved = runs
    assert len(saved) == 2 and saved[1] == 0 < saved[0]  # vLLM uses rank 0's drafts: it alone drafts
