"""Through the real vLLM engine with the default model: speculation never changes greedy
output, the replay simulator predicts exactly what the engine accepts, and per-request
statistics add up to vLLM's own counters."""

from __future__ import annotations

import pytest

from bench.engine_hooks import run_batches
from bench import engine_hooks
from bench.replay import ReplayRequest
from specdec.config import ConfigError, SpecConfig
from specdec.controller import DraftController
from specdec.stats import ShardStats
from specdec.step_cost import StepCost, fit_step_cost
from specdec.types import GenerationRequest, SamplingOptions
from support import engine_calls
from support.greedy_checks import assert_same_greedy_outputs
from support.prompt_requests import prompt_requests
from support.replay_requests import replay

pytestmark = pytest.mark.slow

MAX_TOKENS = 64
K_MAX = 4
GREEDY = SamplingOptions(temperature=0.0)


@pytest.fixture(scope="module")
def requests(tokenizer, humaneval_rows, engine_config):
    assert len(humaneval_rows) >= 16
    return prompt_requests(humaneval_rows, tokenizer, MAX_TOKENS, engine_config.max_model_len)


@pytest.fixture(scope="module")
def plain(engine_factory, requests):
    return run_batches(engine_factory("none"), requests, GREEDY)


@pytest.fixture(scope="module")
def speculative(engine_factory, requests):
    # Without the budget, so that it surely drafts: the budget may price every draft out on a
    # machine where verifying is dear (`budgeted` checks it apart).
    # newest: the counters reconciled below are read from vLLM's registry, which only follows
    # the newest engine (a shared one may have been started before others); this fixture
    # comes before `plain` in the first test's arguments, so a shared one can be kept
    engine = engine_factory("specdec", k_max=K_MAX, budget=False, newest=True)
    before = engine_calls.counters(engine)
    results = run_batches(engine, requests, GREEDY)
    return results, engine_calls.counters(engine) - before


@pytest.fixture(scope="module")
def budgeted(engine_factory, requests):
    engine = engine_factory("specdec", k_max=K_MAX)
    results = run_batches(engine, requests, GREEDY)
    # The budget's step-cost fit is read now, while this engine is surely up.
    return results, engine_calls.step_cost_fit(engine)


@pytest.mark.parametrize("method", ["specdec", "ngram"])
def test_greedy_output_identical_to_no_speculation(method, engine_factory, requests, speculative, plain):
    if method == "specdec":
        results, _ = speculative
    else:
        results = run_batches(engine_factory("ngram", k_max=K_MAX), requests, GREEDY)
    assert all(len(r.output_token_ids) >= 16 for r in plain)
    assert_same_greedy_outputs(plain, results, method)


def test_greedy_output_with_the_budget_identical_to_no_speculation(budgeted, plain):
    # However many tokens the budget lets each row draft, on this machine's prices (maybe none)
    results, _ = budgeted
    assert_same_greedy_outputs(plain, results, "specdec with its budget", drafted=False)


def test_replay_accepts_exactly_what_the_engine_accepted(engine_factory, requests):
    # Without the batch budget: its decisions depend on measured step times, which replay has not.
    engine = engine_factory("specdec", k_max=K_MAX, budget=False)
    engine_hooks.reset_proposer(engine)  # a cold cross-request cache, as the replay starts with
    subset = requests[:8]
    # One request at a time, so requests finish into the cache in the replay's order.
    results = run_batches(engine, subset, GREEDY, batch_size=1)
    # Reference with look-ahead: vLLM verifies (and counts) drafts past the stop point.
    lookahead = [GenerationRequest(r.id, r.prompt_token_ids, MAX_TOKENS + K_MAX + 1) for r in subset]
    reference = run_batches(engine_factory("none"), lookahead, SamplingOptions(temperature=0.0, ignore_eos=True))
    eos = frozenset({engine_factory("none").tokenizer.eos_token_id})
    replayed = replay(
        [
            ReplayRequest(r.id, r.prompt_token_ids, ref.output_token_ids, MAX_TOKENS, eos)
            for r, ref in zip(subset, reference, strict=True)
        ],
        DraftController(SpecConfig(method="specdec", k_max=K_MAX, budget=False)),
    )
    assert sum(r.stats.num_accepted_tokens for r in results) > 0
    for real, sim in zip(results, replayed, strict=True):
        assert sim.output_token_ids == real.output_token_ids, real.id
        assert sim.per_step_drafted == real.per_step_drafted, real.id
        assert sim.per_step_accepted == real.per_step_accepted, real.id
        assert sim.stats.num_accepted_tokens == real.stats.num_accepted_tokens
        assert sim.stats.k_histogram == real.stats.k_histogram, real.id


def test_a_prompt_cached_but_its_last_token_verifies_no_placeholder_drafts(engine_factory, requests):
    # Alone in the batch, the second request has every prompt token but the last in vLLM's
    # prefix cache: vLLM would pad it to K placeholder drafts (its K: twice this k_max).
    engine = engine_factory("specdec", k_max=K_MAX, budget=False)
    block = engine.llm.llm_engine.vllm_config.cache_config.block_size
    prompt = next(r.prompt_token_ids for r in requests if len(r.prompt_token_ids) > block)[:block + 1]
    twice = [GenerationRequest(f"cached-{i}", prompt, 8) for i in range(2)]
    results = run_batches(engine, twice, GREEDY, batch_size=1)
    assert results[0].output_token_ids == results[1].output_token_ids
    assert all(drafted <= K_MAX for r in results for drafted in r.per_step_drafted), results[1].per_step_drafted


def test_drafting_switched_off_runs_as_none_and_back_on_drafts_again(engine_factory, requests, plain):
    engine = engine_factory("specdec", k_max=K_MAX, budget=False)  # no budget: drafts whatever the step costs
    subset = requests[:4]
    engine_hooks.reset_proposer(engine)
    try:
        engine.set_drafting(False)  # what the engine cache does for a `none` run
        off = run_batches(engine, subset, GREEDY)
    finally:
        engine.set_drafting(True)
    assert [r.output_token_ids for r in off] == [r.output_token_ids for r in plain[:4]]
    assert [r.stats for r in off] == [r.stats for r in plain[:4]]  # recorded as `none` records them
    engine_hooks.reset_proposer(engine)
    assert sum(r.stats.num_draft_tokens for r in run_batches(engine, subset, GREEDY)) > 0
    with pytest.raises(ConfigError, match="only specdec"):
        engine_factory("none").set_drafting(False)


def test_per_request_stats_reconcile_with_vllm_counters(speculative):
    results, delta = speculative
    total = ShardStats.aggregate(r.stats for r in results)
    assert delta.num_drafts == total.num_drafts > 0
    assert delta.num_draft_tokens == total.num_draft_tokens
    assert delta.num_accepted_tokens == total.num_accepted_tokens
    # vLLM counts as many positions as the engine's K (twice this k_max, for the budget)
    assert list(delta.accepted_per_pos) == total.accepted_per_pos + [0] * (len(delta.accepted_per_pos) - K_MAX)
    for r in results:
        # the K histogram counts every decode step by its draft: the drafted ones are the
        # steps vLLM verified a draft for
        assert sum(r.stats.k_histogram) - r.stats.num_fallback_steps == r.stats.num_drafts, r.id
        assert r.stats.k_histogram[0] == r.stats.num_fallback_steps
        # one decode step per forward after the prefill's; each forward emits one token +
        # accepted ones (the last may overshoot the stop point by up to K accepted tokens)
        emitted = 1 + sum(r.stats.k_histogram) + r.stats.num_accepted_tokens
        assert r.stats.num_output_tokens <= emitted <= r.stats.num_output_tokens + K_MAX, r.id


def test_budget_engine_is_calibrated(budgeted):
    _, (cost, samples) = budgeted
    assert cost is not None, "the specdec engine started without a step-cost model"
    # The budget prices drafts with the fit of the steps this engine measured (how well a fit
    # recovers known coefficients: tests/unit/test_step_cost_fit.py; how well it predicts
    # these steps depends on what else ran on the cores meanwhile).
    model = StepCost(**cost)
    assert any(s.num_tokens > s.num_seqs for s in samples), "no step with drafts was measured"
    assert fit_step_cost(samples) == model
    # Verifying draft tokens takes time on any hardware (on its own, or as attention over
    # its row's context): a fit saying otherwise is broken.
    rows, context = 16, 200
    assert model.seconds(rows, 2 * rows, rows * context, rows * context) > model.seconds(rows, rows, rows * context)


def test_recalibration_measures_a_fresh_set_and_caches_it(engine_factory, tmp_path, monkeypatch):
    from specdec.engines import calibration

    engine = engine_factory("specdec", k_max=K_MAX)
    cfg = engine.engine_config
    # Cached under a home of its own: a set timed beside other tests' work must not become the
    # machine's (it would make drafts look dear to every later engine), nor stay in this one.
    monkeypatch.setenv("SPECDEC_HOME", str(tmp_path))
    try:
        steps, prefills = engine_calls.recalibrate(engine)
        runs = calibration.calibration_runs(cfg.max_num_seqs, K_MAX, cfg.max_model_len)
        assert len(prefills) == len(runs)
        # a new set in place of the loaded one, not added to it: at most one sample per decode step
        assert len(runs) <= len(steps) <= len(runs) * (calibration.STEPS - 1)
        forced = {s.num_tokens // s.num_seqs - 1 for s in steps if s.num_tokens % s.num_seqs == 0}
        assert forced >= {0, K_MAX}  # steps without drafts and with k_max forced on every row
        path = calibration.calibration_path(cfg, engine.model_path, K_MAX, engine.cpu_binding)
        assert path.is_relative_to(tmp_path) and calibration.read_calibration(path) == (steps, prefills)
        assert engine.step_cost() is not None
    finally:
        monkeypatch.undo()
        calibration.calibrate(engine.llm, engine.drafter, cfg, engine.model_path, K_MAX, engine.cpu_binding)
