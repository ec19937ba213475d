"""vLLM's built-in `suffix` method (arctic-inference's suffix tree, built at set-up by
packaging/suffix_tree, built by scripts/install.sh) through the real engine: the replay with
our ArcticSuffixProposer accepts exactly what the engine accepts, greedy output is unchanged
and it really drafts. The proposer without an engine: tests/unit/test_suffix_baseline.py."""

from __future__ import annotations

import pytest

try:
    import arctic_inference.suffix_decoding  # noqa: F401
except ImportError as exc:
    pytest.skip(
        f"arctic_inference.suffix_decoding is not installed ({exc}); "
        "run scripts/install.sh VENV: it builds packaging/suffix_tree from the arctic-inference sdist",
        allow_module_level=True,
    )

from bench.engine_hooks import run_batches
from bench.drafters import ArcticSuffixProposer, FixedK
from bench.replay import ReplayRequest
from specdec.config import SpecConfig
from specdec.types import GenerationRequest, SamplingOptions
from support.engine_calls import counters
from support.greedy_checks import assert_same_greedy_outputs
from support.prompt_requests import prompt_requests
from support.replay_requests import replay

pytestmark = pytest.mark.slow

MAX_TOKENS = 64
K_MAX = 4
GREEDY = SamplingOptions(temperature=0.0)


# --- replay with ArcticSuffixProposer == the real engine's `--method suffix` ----------------



def _num_generated_tokens(engine) -> int:
    return sum(int(m.value) for m in engine.llm.get_metrics() if m.name == "vllm:generation_tokens")


def test_replay_accepts_exactly_what_the_suffix_engine_accepted(engine_factory, humaneval_rows):
    plain = engine_factory("none")
    tok = plain.tokenizer
    subset = prompt_requests(humaneval_rows[:6], tok, MAX_TOKENS, plain.engine_config.max_model_len)
    # Reference with look-ahead: vLLM verifies (and caches) tokens past the stop point.
    lookahead = [GenerationRequest(r.id, r.prompt_token_ids, MAX_TOKENS + K_MAX + 1) for r in subset]
    reference = run_batches(engine_factory("none"), lookahead, SamplingOptions(temperature=0.0, ignore_eos=True))
    eos = frozenset({tok.eos_token_id})
    # A newly started suffix engine: its global response tree starts empty, as the replay's
    # does, and vLLM's metrics registry follows it (the newest engine only). The test below
    # shares it.
    engine = engine_factory("suffix", k_max=K_MAX, fresh=True)
    assert _num_generated_tokens(engine) == 0, "needs a suffix engine that has not generated yet"
    # One request at a time, so responses enter the global tree in the replay's order.
    results = run_batches(engine, subset, SamplingOptions(temperature=0.0), batch_size=1)
    assert _num_generated_tokens(engine) > 0  # the coldness check above reads a real counter
    replayed = replay(
        [
            ReplayRequest(r.id, r.prompt_token_ids, ref.output_token_ids, MAX_TOKENS, eos)
            for r, ref in zip(subset, reference, strict=True)
        ],
        FixedK(SpecConfig(method="suffix", k_max=K_MAX),
               ArcticSuffixProposer(max_model_len=engine.engine_config.max_model_len)),
    )
    assert sum(r.stats.num_accepted_tokens for r in results) > 0
    for real, sim in zip(results, replayed, strict=True):
        assert sim.output_token_ids == real.output_token_ids, real.id
        assert sim.per_step_drafted == real.per_step_drafted, real.id
        assert sim.per_step_accepted == real.per_step_accepted, real.id
        assert sim.stats.num_accepted_tokens == real.stats.num_accepted_tokens, real.id


# --- greedy identity and drafting through vLLM's counters ----------------------------------


@pytest.fixture(scope="module")
def requests(engine_factory, humaneval_rows):
    plain = engine_factory("none")
    assert len(humaneval_rows) >= 16
    return prompt_requests(humaneval_rows[:16], plain.tokenizer, MAX_TOKENS, plain.engine_config.max_model_len)


def test_suffix_greedy_output_identical_to_no_speculation(engine_factory, requests):
    plain = run_batches(engine_factory("none"), requests, GREEDY)
    engine = engine_factory("suffix", k_max=K_MAX)
    before = counters(engine)
    results = run_batches(engine, requests, GREEDY)
    delta = counters(engine) - before
    total = assert_same_greedy_outputs(plain, results, "suffix")
    # suffix decoding's drafts are in vLLM's counters too
    assert delta.num_drafts == total.num_drafts
    assert delta.num_accepted_tokens == total.num_accepted_tokens
    # drafts are variable-length, never above K
    assert all(0 < d <= K_MAX for r in results for d in r.per_step_drafted)
