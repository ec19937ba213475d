"""The batch budget: allocation under scripted cost models, the controller's use of it
(the step-cost fit: test_step_cost_fit.py)."""

from __future__ import annotations

import dataclasses
import itertools

import numpy as np
import pytest

from oracles.budget import AcceptanceEstimate, first_draft_thresholds, geometric_gains
from oracles.budget import allocate_drafts as allocate_gains
from oracles.confidence import NUM_BUCKETS
from oracles.controller import DraftController as OracleController
from oracles.hybrid import HybridProposer
from oracles.suffix_cache import SuffixTrieCache
from specdec.config import SpecConfig
from specdec.controller import DraftController
from oracles.step_shapes import row_contexts, seconds_for_tokens
from specdec.step_cost import StepCost
from support.native_core import lookup_seconds

FREE = StepCost(fixed_s=0.07, per_seq_s=0.0, per_token_s=0.0)
COMPUTE_BOUND = StepCost(fixed_s=0.0, per_seq_s=0.0, per_token_s=0.01)

def allocate_drafts(alpha: list[float], caps: list[int], cost: StepCost, contexts: list[int] | None = None) -> list[int]:
    contexts = contexts if contexts is not None else [0] * len(caps)
    return allocate_gains([geometric_gains(a, c) for a, c in zip(alpha, caps)], cost, np.array(contexts))


def expected_rate(alloc: list[int], alpha: list[float], cost: StepCost, contexts: list[int] | None = None) -> float:
    contexts = contexts if contexts is not None else [0] * len(alloc)
    gain = len(alloc) + sum(sum(a**j for j in range(1, n + 1)) for n, a in zip(alloc, alpha))
    draft_kv = sum(c for n, c in zip(alloc, contexts) if n)  # a drafting row's context, once
    return gain / cost.seconds(len(alloc), len(alloc) + sum(alloc), sum(contexts), draft_kv)


def test_free_verification_drafts_every_cap():
    assert allocate_drafts([0.2, 0.9, 0.5], [4, 4, 2], FREE) == [4, 4, 2]


def test_compute_bound_batch_drafts_nothing_unless_certain():
    # Each draft token costs as much as a row's own token: only a sure draft breaks even.
    assert allocate_drafts([0.95, 0.6, 0.3], [4, 4, 4], COMPUTE_BOUND) == [0, 0, 0]
    assert allocate_drafts([0.5], [0], FREE) == [0]
    assert allocate_drafts([], [], FREE) == []


def test_better_rows_get_drafts_first():
    cost = StepCost(fixed_s=0.06, per_seq_s=0.0, per_token_s=0.01)
    alloc = allocate_drafts([0.9, 0.3, 0.7], [5, 5, 5], cost)
    assert alloc[0] >= alloc[2] >= alloc[1]
    assert 0 < sum(alloc) < 15


@pytest.mark.parametrize("seed", range(40))
def test_allocation_is_optimal_and_never_worse_than_no_drafts(seed: int):
    # Half the cases price a drafting row's context too: rows then differ in what a draft
    # costs, and the best allocation is no longer "highest gains first".
    rng = np.random.default_rng(seed)
    alpha = rng.uniform(0.0, 1.0, 3).round(2).tolist()
    caps = rng.integers(0, 4, 3).tolist()
    contexts = rng.integers(0, 3000, 3).tolist()
    draft_kv_s = float(rng.uniform(0.0, 2e-5)) if seed % 2 else 0.0
    cost = StepCost(*rng.uniform(0.0, 0.1, 3).round(3), per_kv_token_s=1e-6, per_draft_kv_token_s=draft_kv_s)
    alloc = allocate_drafts(alpha, caps, cost, contexts)
    assert all(0 <= a <= c for a, c in zip(alloc, caps))
    best = max(
        expected_rate(list(a), alpha, cost, contexts) for a in itertools.product(*(range(c + 1) for c in caps))
    )
    got = expected_rate(alloc, alpha, cost, contexts)
    assert got == pytest.approx(best, rel=1e-9)
    assert got >= expected_rate([0, 0, 0], alpha, cost, contexts) - 1e-12


def test_a_long_row_pays_for_its_context_once_so_only_a_long_draft_there_pays():
    # A drafting row's attention over its context (vLLM on a CPU), once per row: equally
    # good drafts, one row 64 tokens long, one 4k. One or two drafted tokens pay only in
    # the short row; four pay in both, since the long row's context is priced once.
    cost = StepCost(fixed_s=0.02, per_seq_s=0.0, per_token_s=2e-4, per_kv_token_s=1e-6, per_draft_kv_token_s=2e-6)
    assert allocate_drafts([0.6, 0.6], [1, 1], cost, [64, 4096]) == [1, 0]
    assert allocate_drafts([0.6, 0.6], [2, 2], cost, [64, 4096]) == [2, 0]
    assert allocate_drafts([0.6, 0.6], [4, 4], cost, [64, 4096]) == [4, 4]
    thresholds = first_draft_thresholds(cost, np.array([64, 4096]))
    assert thresholds[0] < 0.6 < thresholds[1]
    # Without the term both rows are alike.
    flat = dataclasses.replace(cost, per_draft_kv_token_s=0.0)
    assert allocate_drafts([0.6, 0.6], [1, 1], flat, [64, 4096]) == [1, 1]


def test_acceptance_estimate_learns_and_forgets():
    est = AcceptanceEstimate()
    assert est.rate(prior=0.5, prior_weight=2.0) == 0.5
    for _ in range(20):
        est.observe(num_drafted=4, num_accepted=4, decay=0.9)
    high = est.rate(prior=0.5, prior_weight=2.0)
    assert high > 0.9
    for _ in range(20):
        est.observe(num_drafted=4, num_accepted=0, decay=0.9)
    assert est.rate(prior=0.5, prior_weight=2.0) < 0.2 < high


def step(ctl, rows: list[tuple[str, np.ndarray, int]], cost: StepCost | None = None) -> list[np.ndarray]:
    """One step of (request id, tokens, accepted) rows through a controller (facade or oracle)."""
    return ctl.step_tokens([r for r, _, _ in rows], [t for _, t, _ in rows], [a for _, _, a in rows], cost)


def _repetitive(n: int = 40) -> np.ndarray:
    return np.array([5, 6, 7, 8] * (n // 4), dtype=np.int64)


def test_controller_batch_budget_caps_drafts():
    cfg = SpecConfig(method="specdec", k_max=4)
    rows = [("a", _repetitive(), 0), ("b", _repetitive() + 1, 0)]
    free = step(DraftController(cfg), rows, FREE)
    assert [d.tolist() for d in free] == [[5, 6, 7, 8], [6, 7, 8, 9]]
    drafts = step(DraftController(cfg), rows, COMPUTE_BOUND)
    assert [d.size for d in drafts] == [0, 0]
    # Without a cost model (replay) every row drafts up to k_max.
    assert [d.size for d in step(DraftController(cfg), rows)] == [4, 4]


def test_confidence_is_learned_per_evidence_bucket():
    from oracles.confidence import ConfidenceTable, cache_buckets, own_bucket

    table = ConfidenceTable()
    long_match, short_match = own_bucket(6), own_bucket(1)
    for _ in range(30):
        table.observe(np.full(4, long_match), num_accepted=4)  # long matches: always right
        table.observe(np.full(4, short_match), num_accepted=0)  # one-token matches: never
    high, low = table.confidence(np.array([long_match, short_match]))
    assert high > 0.9 and low < 0.1
    # Only tokens up to the first rejection were judged: a rejection at position 2 says
    # nothing about position 3.
    fresh = ConfidenceTable()
    buckets = np.array([own_bucket(2), own_bucket(3), own_bucket(4)])
    fresh.observe(buckets, num_accepted=1)
    assert fresh.confidence(buckets).tolist() == [2 / 3, 1 / 3, 1 / 2]
    assert cache_buckets(np.array([0.05, 0.55, 1.0]), match_len=1).tolist() == [8, 13, 17]
    assert cache_buckets(np.array([0.05]), match_len=9).tolist() == [8 + 30]


@pytest.mark.parametrize("make", [OracleController, DraftController])
def test_budget_sizes_drafts_by_learned_confidence(make):
    ctl = make(SpecConfig(method="specdec", k_max=4))
    cost = StepCost(fixed_s=0.05, per_seq_s=0.0, per_token_s=0.01)
    sure = np.array([5, 6, 7, 8, 9, 5, 6, 7, 8, 9, 5, 6, 7], dtype=np.int64)  # 4-token match
    unsure = np.array([1, 2, 3, 1], dtype=np.int64)  # 1-token match
    accepted = np.ones(NUM_BUCKETS)
    rejected = np.ones(NUM_BUCKETS)
    accepted[3:8] = 99.0  # own-text matches of 4 or more tokens: 99 % accepted
    rejected[0] = 99.0  # match length 1: 1 %
    if make is OracleController:
        ctl.proposer.table.accepted[:] = accepted
        ctl.proposer.table.rejected[:] = rejected
    else:
        ctl.drafter.set_table(accepted.tolist(), rejected.tolist())
    drafts = step(ctl, [("sure", sure, 0), ("unsure", unsure, 0)], cost)
    assert drafts[0].tolist() == [8, 9, 5, 6] and drafts[1].size == 0


@pytest.mark.parametrize("num_rows", [1, 4, 16, 64])
def test_first_draft_threshold_is_where_the_budget_starts_drafting(num_rows: int):
    cost = StepCost(fixed_s=0.05, per_seq_s=0.004, per_token_s=0.003, per_kv_token_s=1e-6, per_draft_kv_token_s=1e-6)
    contexts = np.full(num_rows, 300)
    threshold = first_draft_thresholds(cost, contexts)[0]
    for gain, expect_any in ((threshold * 0.98, False), (min(threshold * 1.02, 1.0), threshold < 0.98)):
        alloc = allocate_gains([np.array([gain])] * num_rows, cost, contexts)
        assert (sum(alloc) > 0) == expect_any, (gain, alloc)


class _CountingProposer(HybridProposer):
    def __init__(self) -> None:
        super().__init__(SuffixTrieCache())
        self.asked: list[int] = []

    def propose(self, req_id: str, tokens: np.ndarray, k: int) -> np.ndarray:
        self.asked.append(k)
        return super().propose(req_id, tokens, k)


def test_rows_that_cannot_pay_for_a_draft_are_not_looked_up_but_still_cached():
    cfg = SpecConfig(method="specdec", k_max=4)
    proposer = _CountingProposer()
    ctl = OracleController(cfg, proposer)
    rows = [(f"r{i}", _repetitive() + i, 0) for i in range(8)]
    # A draft token costs as much as a whole row: even a certain token cannot pay.
    drafts = step(ctl, rows, COMPUTE_BOUND)
    assert proposer.asked == [0] * 8 and all(d.size == 0 for d in drafts)
    ctl.finish("r0")
    assert len(proposer.cache) == 1  # the skipped request's tokens still reach the cache
    proposer.asked.clear()
    step(ctl, rows[1:], FREE)
    assert proposer.asked == [4] * 7


def test_budget_prices_context_long_contexts_afford_drafts_short_ones_do_not():
    # Attention over the context dominates: a step over long contexts costs far more than
    # its draft tokens add, a step over short ones does not.
    cost = StepCost(fixed_s=0.001, per_seq_s=0.0, per_token_s=0.001, per_kv_token_s=1e-5)
    sure = np.full(4, 0.6)
    assert allocate_gains([sure] * 8, cost, np.full(8, 16)) == [0] * 8
    assert allocate_gains([sure] * 8, cost, np.full(8, 4096)) == [4] * 8

    def drafted(context: int, make) -> int:
        ctl = make(SpecConfig(method="specdec", k_max=4))
        rows = [np.tile(np.array([5, 6, 7, 8], dtype=np.int64) + i, context // 4) for i in range(8)]
        return sum(d.size for d in ctl.step_tokens([f"r{i}" for i in range(8)], rows, [0] * 8, cost))

    # The controller hands the budget the rows' context: same rows, same drafts, only longer.
    for make in (OracleController, DraftController):
        assert drafted(16, make) == 0 and drafted(4096, make) > 0, make


def test_contexts_are_each_rows_tokens_but_the_last():
    assert row_contexts(np.array([5, 1, 12])).tolist() == [4, 0, 11]
    assert row_contexts(np.zeros(0, dtype=np.int64)).tolist() == []


@pytest.mark.parametrize("make", [OracleController, DraftController])
def test_the_drafters_time_is_measured_per_row_looked_up(make):
    ctl = make(SpecConfig(method="specdec", k_max=4))
    rows = [(f"r{i}", _repetitive() + i, 0) for i in range(8)]
    step(ctl, rows, FREE)
    seconds = ctl.lookup_s if isinstance(ctl, OracleController) else lookup_seconds(ctl)
    assert 0.0 < seconds < 0.01  # thread CPU seconds per row: microseconds, not a step's share


def test_lookups_that_cost_more_than_a_rows_share_of_the_step_are_skipped():
    # Verifying is nearly free, but each lookup takes a fifth of the whole step: at 8 rows
    # more than a row's share, more than any token can bring.
    cost = StepCost(fixed_s=0.01, per_seq_s=0.0, per_token_s=1e-6)
    rows = [(f"r{i}", _repetitive() + i, 0) for i in range(8)]
    proposer = _CountingProposer()
    ctl = OracleController(SpecConfig(method="specdec", k_max=4), proposer)
    ctl.lookup_s = 0.002
    assert all(d.size == 0 for d in step(ctl, rows, cost)) and proposer.asked == [0] * 8
    contexts = np.zeros(8, dtype=np.int64)
    assert first_draft_thresholds(cost, contexts, 0.002)[0] > 1.0 > 0.01 > first_draft_thresholds(cost, contexts)[0]
    cheap = _CountingProposer()
    ctl = OracleController(SpecConfig(method="specdec", k_max=4), cheap)
    ctl.lookup_s = 1e-7
    step(ctl, rows, cost)
    assert cheap.asked == [4] * 8
    assert 0.0 < ctl.lookup_s < 0.01  # then measured: the proposer's time per row looked up


def test_a_stale_lookup_estimate_fades_so_lookups_resume():
    cost = StepCost(fixed_s=0.01, per_seq_s=0.0, per_token_s=1e-6)
    rows = [(f"r{i}", _repetitive() + i, 0) for i in range(8)]
    proposer = _CountingProposer()
    ctl = OracleController(SpecConfig(method="specdec", k_max=4), proposer)
    ctl.lookup_s = 0.05  # one very slow step (a compile, a busy machine)
    steps = 0
    while not any(k > 0 for k in proposer.asked[-8:]):
        proposer.asked.clear()
        step(ctl, rows, cost)
        steps += 1
        assert steps < 100
    assert steps > 1  # skipped while the estimate was high, looked up again once it faded


class PlainCost:
    """A cost model with `seconds` alone: allocation falls back to one call per position."""

    def __init__(self, cost: StepCost) -> None:
        self.cost = cost

    def seconds(self, num_seqs: int, num_tokens: int, num_kv_tokens: int, num_draft_kv_tokens: int = 0) -> float:
        return self.cost.seconds(num_seqs, num_tokens, num_kv_tokens, num_draft_kv_tokens)


def test_array_pricing_is_the_same_arithmetic_as_one_call_per_position():
    rng = np.random.default_rng(3)
    cost = StepCost(fixed_s=5.886e-3, per_seq_s=1e-5, per_token_s=2.101e-5, per_kv_token_s=3.926e-8,
                    per_draft_kv_token_s=1.3e-9)
    tokens = np.arange(7, 7 + 300)
    draft_kv = tokens * 977
    assert seconds_for_tokens(cost, 7, tokens, 12_345, draft_kv).tolist() == [
        cost.seconds(7, int(n), 12_345, int(d)) for n, d in zip(tokens, draft_kv)]
    for _ in range(50):
        rows = int(rng.integers(1, 40))
        gains = [np.cumprod(rng.uniform(0.0, 1.0, size=int(rng.integers(0, 9)))) for _ in range(rows)]
        contexts = rng.integers(0, 5000, rows)
        assert allocate_gains(gains, cost, contexts) == allocate_gains(gains, PlainCost(cost), contexts)
