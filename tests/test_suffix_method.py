"""vLLM's built-in `suffix` method (arctic-inference's suffix tree, built at set-up by
packaging/suffix_tree, built by scripts/install.sh) through the real engine: greedy output is unchanged and it
really drafts."""

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

from greedy_checks import assert_same_greedy_outputs
from specdec.types import GenerationRequest, SamplingOptions

MAX_TOKENS = 64
K_MAX = 4
GREEDY = SamplingOptions(temperature=0.0)


def test_arctic_vllm_plugin_is_not_registered():
    """Arctic's own vLLM plugin patches vLLM internals for other vLLM builds: it must stay off."""
    from importlib.metadata import entry_points

    plugins = [ep.value for ep in entry_points(group="vllm.general_plugins")]
    assert not [v for v in plugins if v.startswith("arctic_inference")], plugins


@pytest.fixture(scope="module")
def requests(engine_factory, humaneval_rows):
    tok = engine_factory("none").tokenizer
    assert len(humaneval_rows) >= 16
    return [GenerationRequest(r["id"], tuple(tok.encode(r["prompt"])), MAX_TOKENS) for r in humaneval_rows[:16]]


@pytest.mark.slow
def test_suffix_greedy_output_identical_to_no_speculation(engine_factory, requests):
    plain = engine_factory("none").generate(requests, GREEDY)
    engine = engine_factory("suffix", k_max=K_MAX)
    before = engine.counters()
    results = engine.generate(requests, GREEDY)
    delta = engine.counters() - before
    total = assert_same_greedy_outputs(plain, results, "suffix")
    # suffix decoding's drafts are in vLLM's counters too
    assert delta.num_drafts == total.num_drafts
    assert delta.num_accepted_tokens == total.num_accepted_tokens
    # drafts are variable-length, never above K
    assert all(0 < d <= K_MAX for r in results for d in r.per_step_drafted)
