"""The compiled drafter (specdec_native) against the Python reference: the same cache counts,
the same drafts and confidences, token for token, on random and real token streams, through
eviction, persistence, requests that finish mid-batch and requests preempted then resumed."""

from __future__ import annotations

import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from specdec.config import SpecConfig
from specdec.controller import DraftController
from specdec.datasets import humaneval_rows, sharegpt_multiturn_rows
from specdec.drafting.base import RowByRow, TokenRows
from specdec.drafting.hybrid import HybridProposer
from specdec.drafting.native import NativeHybridProposer, NativeSuffixCache, load_core
from specdec.drafting.suffix_cache import SuffixTrieCache
from specdec.engines.replay import ReplayRequest, replay
from support.token_streams import repetitive_streams

load_core()  # a missing build fails here, loudly: it is what `make setup` installs


# -- the cache alone ---------------------------------------------------------------------

cache_ops = st.lists(
    st.tuples(
        st.sampled_from(["insert", "insert", "insert", "remove", "speculate"]),
        st.integers(0, 6),  # sequence id
        st.lists(st.integers(0, 4), max_size=30),  # tokens (insert) or context (speculate)
        st.integers(1, 8),  # k
        st.sampled_from([0.0, 0.1, 0.3, 0.5]),  # min_prob
    ),
    max_size=30,
)


@settings(max_examples=300, deadline=None)
@given(ops=cache_ops, depth=st.integers(2, 8), budget=st.integers(1, 80))
def test_cache_counts_and_drafts_equal_the_reference(ops, depth, budget):
    ref = SuffixTrieCache(max_depth=depth, max_tokens=budget)
    nat = NativeSuffixCache.create(max_depth=depth, max_tokens=budget)
    for op, key, tokens, k, min_prob in ops:
        seq = np.array(tokens, dtype=np.int64)
        if op == "insert":
            ref.insert(str(key), seq)
            nat.insert(str(key), seq)
        elif op == "remove" and str(key) in ref:
            ref.remove(str(key))
            nat.remove(str(key))
        else:
            a, b = ref.speculate(seq, k, min_prob), nat.speculate(seq, k, min_prob)
            assert (a.tokens.tolist(), a.probs.tolist(), a.match_len) == (b.tokens.tolist(), b.probs.tolist(), b.match_len)
        assert nat.dump() == ref.dump()
        assert nat.contents().ids == ref.contents().ids and nat.num_tokens == ref.num_tokens
        nat.check_invariants()


def test_cache_draws_ties_on_the_smallest_token_and_cuts_on_min_prob():
    nat = NativeSuffixCache.create()
    nat.insert("a", np.array([1, 2, 3, 9, 9]))
    nat.insert("b", np.array([1, 2, 3, 9, 7]))
    draft = nat.speculate(np.array([5, 1, 2, 3]), k=3, min_prob=0.4)  # the reference's docstring example
    assert draft.tokens.tolist() == [9, 7] and draft.probs.tolist() == [1.0, 0.5] and draft.match_len == 3
    assert nat.speculate(np.array([5, 1, 2, 3]), k=3, min_prob=0.6).tokens.tolist() == [9]


def test_cache_rejects_negative_token_ids():
    with pytest.raises(ValueError):
        NativeSuffixCache.create().insert("a", np.array([1, -2, 3]))


def test_store_space_of_replaced_sequences_comes_back():
    """A sequence replaced out of order keeps its store space until it reaches the front, and
    nodes left with one child are merged away: the tree stays the size a fresh build has."""
    rng = np.random.default_rng(5)
    nat = NativeSuffixCache.create(max_depth=6, max_tokens=400)
    for i in range(300):
        nat.insert(f"r{i % 7}", rng.integers(0, 5, size=rng.integers(1, 60)))
        if i % 50 == 0:
            nat.check_invariants()
    fresh = NativeSuffixCache.create(max_depth=6, max_tokens=400)
    fresh.load_contents(nat.contents())
    assert fresh.dump() == nat.dump() and fresh.num_nodes == nat.num_nodes


# -- the whole drafter -------------------------------------------------------------------


class TwoDrafters:
    """The reference and the compiled drafter, fed the same calls; every answer compared."""

    def __init__(self, depth: int, budget: int, n_min: int, n_max: int, min_prob: float) -> None:
        self.ref = HybridProposer(SuffixTrieCache(depth, budget), n_min, n_max, min_prob)
        self.nat = NativeHybridProposer(budget, depth, n_min, n_max, min_prob)
        self.ref_batch = RowByRow(self.ref)

    def step(self, ids: list[str], rows: TokenRows, ks: list[int], drafted: list[int], accepted: list[int]):
        """One engine step: the compiled drafter reads vLLM's buffer (TokenRows, int32), the
        reference gets one int64 array per row."""
        self.ref_batch.feedback_batch(ids, drafted, accepted)
        self.nat.feedback_batch(ids, drafted, accepted)
        assert self.nat.best_confidence() == self.ref.best_confidence()
        want = self.ref_batch.propose_batch(ids, [rows[i].astype(np.int64) for i in range(len(ids))], ks)
        got = self.nat.propose_batch(ids, rows, ks)
        for row in range(len(ids)):
            assert got.draft(row).tolist() == want.draft(row).tolist(), (ids[row], row)
            assert got.row_confidence(row).tolist() == want.row_confidence(row).tolist()
        return [want.draft(row) for row in range(len(ids))]

    def forget(self, req_id: str) -> None:
        self.ref.forget(req_id)
        self.nat.forget(req_id)
        assert self.nat.cache.dump() == self.ref.cache.dump()


def _simulate(two: TwoDrafters, streams: list[np.ndarray], rng: np.random.Generator, k_max: int, tmp_path=None) -> None:
    """Requests join, grow a few tokens per step, finish mid-batch or are preempted (forgotten,
    their partial tokens cached) and come back later under the same id."""
    # vLLM's token buffer: one row per stream here, the same array every step
    buffer = np.zeros((len(streams), max(s.size for s in streams)), dtype=np.int32)
    for i, seq in enumerate(streams):
        buffer[i, : seq.size] = seq
    waiting = list(range(len(streams)))
    length: dict[int, int] = {}
    preempted_at: dict[int, int] = {}
    last: dict[int, int] = {}  # draft length each active request got last step
    for step in range(400):
        while waiting and (not length or rng.random() < 0.3):
            i = waiting.pop(0)
            length[i] = max(preempted_at.get(i, 0), int(rng.integers(1, streams[i].size + 1)))
            last[i] = 0
        if not length:
            break
        rows = [i for i in length if rng.random() < 0.9]
        for i in rows:
            length[i] = min(streams[i].size, length[i] + int(rng.integers(0, 4)))
        drafted = [int(rng.integers(0, last[i] + 1)) for i in rows]
        accepted = [int(rng.integers(0, d + 1)) for d in drafted]
        ks = [int(rng.integers(0, k_max + 1)) for _ in rows]
        tokens = TokenRows(buffer, np.array([length[i] for i in rows]), np.array(rows, dtype=np.int64))
        drafts = two.step([f"q{i}" for i in rows], tokens, ks, drafted, accepted)
        last.update({i: d.size for i, d in zip(rows, drafts)})
        for i in list(length):
            if length[i] == streams[i].size or rng.random() < 0.03:  # finished, or preempted
                if length[i] < streams[i].size:
                    waiting.append(i)
                    preempted_at[i] = length[i]
                del length[i]
                two.forget(f"q{i}")
        if tmp_path is not None and step % 97 == 96:
            _swap_caches(two, tmp_path)
    two.nat.cache.check_invariants()


def _swap_caches(two: TwoDrafters, tmp_path) -> None:
    """Each drafter's cache file loads into the other implementation with the same contents."""
    two.ref.save_cache(str(tmp_path / "ref.npz"))
    two.nat.save_cache(str(tmp_path / "nat.npz"))
    from_ref = NativeHybridProposer.from_file(tmp_path / "ref.npz", two.ref.cache.max_tokens)
    from_nat = SuffixTrieCache.load(tmp_path / "nat.npz", two.ref.cache.max_tokens)
    assert from_ref.cache.dump() == from_nat.dump() == two.ref.cache.dump()


@settings(max_examples=60, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    depth=st.integers(2, 24),
    budget=st.sampled_from([1, 30, 200, 5000]),
    n_min=st.integers(1, 3),
    n_extra=st.integers(0, 14),
    min_prob=st.sampled_from([0.0, 0.1, 0.5]),
    alphabet=st.integers(2, 12),
    k_max=st.integers(1, 10),
)
def test_drafts_and_confidences_equal_the_reference(seed, depth, budget, n_min, n_extra, min_prob, alphabet, k_max):
    rng = np.random.default_rng(seed)
    two = TwoDrafters(depth, budget, n_min, n_min + n_extra, min_prob)
    _simulate(two, repetitive_streams(rng, int(rng.integers(1, 10)), alphabet), rng, k_max)


def test_persisted_caches_load_into_either_drafter_mid_run(tmp_path):
    rng = np.random.default_rng(11)
    two = TwoDrafters(24, 3000, 1, 16, 0.1)
    _simulate(two, repetitive_streams(rng, 40, 6), rng, 6, tmp_path)


def test_list_and_buffer_inputs_draft_alike():
    rng = np.random.default_rng(4)
    streams = repetitive_streams(rng, 6, 5)
    buffer = np.zeros((8, 130), dtype=np.int64)
    by_list, by_buffer = NativeHybridProposer(), NativeHybridProposer()
    drafted = 0
    for n in range(2, 120, 7):
        ids = [f"q{i}" for i, s in enumerate(streams) if s.size >= n]
        seqs = [s[:n] for s in streams if s.size >= n]
        for row, seq in enumerate(seqs):
            buffer[row + 2, :n] = seq  # rows 2.. of a wider buffer
        a = by_list.propose_batch(ids, seqs, [5] * len(ids))
        b = by_buffer.propose_batch(ids, TokenRows(buffer, np.full(len(ids), n), np.arange(len(ids)) + 2), [5] * len(ids))
        for row in range(len(ids)):
            assert a.draft(row).tolist() == b.draft(row).tolist()
            assert a.row_confidence(row).tolist() == b.row_confidence(row).tolist()
        drafted += int(a.lengths.sum())
    assert drafted > 0


def test_earlier_tokens_must_not_change():
    nat = NativeHybridProposer()
    nat.propose("a", np.array([1, 2, 3]), 2)
    with pytest.raises(ValueError, match="request a"):
        nat.propose("a", np.array([1, 2]), 2)  # fewer tokens than already seen
    with pytest.raises(ValueError, match="request a"):
        nat.propose("a", np.array([1, 2, 4, 5]), 2)  # the last known one changed


# -- real token streams ------------------------------------------------------------------


def _word_tokens(texts: list[str]) -> list[np.ndarray]:
    """Real text as token streams: words, punctuation and runs of spaces, numbered."""
    vocab: dict[str, int] = {}
    return [
        np.array([vocab.setdefault(w, len(vocab)) for w in re.findall(r"\w+|[^\w\s]|\s+", text)], dtype=np.int64)
        for text in texts
    ]


def _real_requests(texts: list[str], k_max: int) -> list[ReplayRequest]:
    """Each text as a request: its first third the prompt, the rest the greedy output."""
    requests = []
    for i, seq in enumerate(_word_tokens(texts)):
        cut = seq.size // 3
        if seq.size - cut > k_max + 4:
            requests.append(ReplayRequest(f"r{i}", seq[:cut].tolist(), seq[cut:].tolist(), seq.size - cut - k_max - 2))
    return requests


@pytest.fixture(scope="module")
def real_texts() -> dict[str, list[str]]:
    return {
        "humaneval": [r["prompt"] for r in humaneval_rows(40)],
        "sharegpt-mt": [r["prompt"] for r in sharegpt_multiturn_rows(25)],
    }


@pytest.mark.parametrize("dataset", ["humaneval", "sharegpt-mt"])
@pytest.mark.parametrize("k_max,budget", [(3, 4_000_000), (7, 2_000)])
def test_replay_on_real_streams_is_identical(real_texts, dataset, k_max, budget):
    """The reference (controller and drafter) and the compiled ones take the same decisions
    on real text (with a small cache budget too: eviction on the way)."""
    requests = _real_requests(real_texts[dataset], k_max)
    results = {}
    for drafter in ("python", "native"):
        cfg = SpecConfig(method="specdec", k_max=k_max, drafter=drafter, cache_max_tokens=budget)
        results[drafter] = replay(requests, cfg)
    for want, got in zip(results["python"], results["native"], strict=True):
        assert (got.per_step_drafted, got.per_step_accepted) == (want.per_step_drafted, want.per_step_accepted), want.id
    assert sum(sum(r.per_step_accepted) for r in results["native"]) > 0  # it did draft


def test_batched_steps_with_a_budget_are_identical(real_texts):
    """Several requests per step through DraftController.step_batch with a step-cost model
    (the budget trims drafts, so feedback covers part of each draft)."""
    from specdec.budget import StepCost

    streams = _word_tokens(real_texts["humaneval"][:12])
    cost = StepCost(fixed_s=0.02, per_seq_s=0.001, per_token_s=0.002)
    controllers = {d: DraftController(SpecConfig(method="specdec", k_max=5, drafter=d)) for d in ("python", "native")}
    rng = np.random.default_rng(2)
    length = {i: max(2, s.size // 3) for i, s in enumerate(streams)}
    accepted = {i: 0 for i in length}
    while length:
        rows = [(f"q{i}", streams[i][: length[i]], accepted[i]) for i in length]
        got = {d: c.step_batch(rows, cost) for d, c in controllers.items()}
        for want, mine in zip(got["python"], got["native"], strict=True):
            assert mine.tolist() == want.tolist()
        for (req_id, _, _), draft in zip(rows, got["python"]):
            i = int(req_id[1:])
            accepted[i] = int(rng.integers(0, draft.size + 1))
            length[i] += accepted[i] + 1
            if length[i] >= streams[i].size:
                del length[i]
                for c in controllers.values():
                    c.finish(req_id)
