"""The compiled drafter (specdec_native) against the Python reference: the same cache counts,
the same drafts and confidences, token for token, on random token streams, through eviction,
persistence (cache and history),
prompt groups, the live index and its rebuilds, requests that finish mid-batch and requests
preempted then resumed."""

from __future__ import annotations

import dataclasses
import tempfile
from pathlib import Path
from unittest import mock

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from oracles import live_text
from oracles.base import TokenRows
from specdec.drafting.cache_file import read_contents
from oracles.hybrid import HybridProposer
from oracles.live_text import LIVE_SLACK_TOKENS
from specdec.native import load_core
from support.native_core import NativeHybridProposer, NativeSuffixCache, prompt_digest
from oracles.suffix_cache import SuffixTrieCache
from support.token_streams import prompt_streams, repetitive_streams

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
    draft = nat.speculate(np.array([5, 1, 2, 3]), max_draft_tokens=3, min_prob=0.4)  # the reference's docstring example
    assert draft.tokens.tolist() == [9, 7] and draft.probs.tolist() == [1.0, 0.5] and draft.match_len == 3
    assert nat.speculate(np.array([5, 1, 2, 3]), max_draft_tokens=3, min_prob=0.6).tokens.tolist() == [9]


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

SHARED_SIZES = ("shared_members", "live_index_tokens", "group_tokens", "history_tokens")


@dataclasses.dataclass(frozen=True)
class Bounds:
    """The drafter's bounds on shared text (small ones: eviction and rebuilds on the way)."""

    group_max_tokens: int = 2_000_000
    history_max_tokens: int = 1_000_000
    history_per_prompt: int = 16
    live_slack_tokens: int = LIVE_SLACK_TOKENS


bounds = st.builds(Bounds, st.sampled_from([0, 60, 400, 2_000_000]), st.sampled_from([0, 50, 500, 1_000_000]),
                   st.sampled_from([0, 1, 3, 16]), st.sampled_from([0, 40, 65536]))


class TwoDrafters:
    """The reference and the compiled drafter, fed the same calls; every answer compared."""

    def __init__(self, depth: int, budget: int, n_min: int, n_max: int, min_prob: float,
                 limits: Bounds = Bounds()) -> None:
        shared = {"group_max_tokens": limits.group_max_tokens, "history_max_tokens": limits.history_max_tokens,
                  "history_per_prompt": limits.history_per_prompt}
        self.args = (depth, budget, n_min, n_max, min_prob, shared, limits.live_slack_tokens)
        self.seen: set[str] = set()  # every request id stepped
        with mock.patch.object(live_text, "LIVE_SLACK_TOKENS", limits.live_slack_tokens):
            self.ref = HybridProposer(SuffixTrieCache(depth, budget), n_min, n_max, min_prob, **shared)
            self.nat = NativeHybridProposer(budget, depth, n_min, n_max, min_prob, **shared)

    def fresh(self, nat_from, ref_from) -> "TwoDrafters":
        """A new pair of the same settings: the compiled one starts from `nat_from`'s file, the
        reference from `ref_from`'s."""
        depth, budget, n_min, n_max, min_prob, shared, slack = self.args
        two = TwoDrafters.__new__(TwoDrafters)
        two.args = self.args
        two.seen = set()
        with mock.patch.object(live_text, "LIVE_SLACK_TOKENS", slack):
            two.ref = HybridProposer(SuffixTrieCache(depth, budget), n_min, n_max, min_prob, **shared)
            two.ref.load_contents(read_contents(ref_from, None))
            two.nat = NativeHybridProposer.from_file(nat_from, budget, n_min=n_min, n_max=n_max, min_prob=min_prob,
                                                     **shared)
        return two

    def step(self, ids: list[str], rows: TokenRows, ks: list[int], drafted: list[int], accepted: list[int],
             prompts: list[int] | None = None):
        """One engine step: the compiled drafter reads vLLM's buffer (TokenRows, int32), the
        reference gets one int64 array per row."""
        self.ref.feedback_batch(ids, drafted, accepted)
        self.nat.feedback_batch(ids, drafted, accepted)
        assert self.nat.best_confidence() == self.ref.best_confidence()
        # half the rows' source counts taken now, the others' left to pile up (their requests'
        # move to the finished counts when forgotten)
        self.seen.update(ids)
        assert self.nat.take_source_counts(ids[::2]) == self.ref.take_source_counts(ids[::2])
        want = self.ref.propose_batch(ids, [rows[i].astype(np.int64) for i in range(len(ids))], ks, prompts)
        got = self.nat.propose_batch(ids, rows, ks, prompts)
        for row in range(len(ids)):
            assert got.draft(row).tolist() == want.draft(row).tolist(), (ids[row], row)
            assert got.row_confidence(row).tolist() == want.row_confidence(row).tolist()
        self.check_shared()
        return [want.draft(row) for row in range(len(ids))]

    def take_all_source_counts(self) -> dict[str, tuple[int, int]]:
        """Every stepped request's source counts taken from both (they must be equal), summed
        per source."""
        nat, ref = self.nat.take_source_counts(sorted(self.seen)), self.ref.take_source_counts(sorted(self.seen))
        assert nat == ref
        totals: dict[str, tuple[int, int]] = {}
        for by_source in nat.values():
            for source, (drafted, accepted) in by_source.items():
                before = totals.get(source, (0, 0))
                totals[source] = (before[0] + drafted, before[1] + accepted)
        return totals

    def check_shared(self) -> None:
        """Groups (in order), live index, history and their bounds alike."""
        nat_sizes, ref_sizes = self.nat.state_sizes(), self.ref.state_sizes()
        assert [nat_sizes[k] for k in SHARED_SIZES] == [ref_sizes[k] for k in SHARED_SIZES]
        assert self.nat.group_digests() == list(self.ref.text.groups)

    def forget(self, req_id: str) -> None:
        self.ref.forget(req_id)
        self.nat.forget(req_id)
        assert self.nat.cache.dump() == self.ref.cache.dump()
        self.check_shared()
        assert _history(self.nat.history_entries()) == _history(self.ref.history.entries())


def _history(entries: list[tuple[int, np.ndarray]]) -> list[tuple[int, list[int]]]:
    return [(digest, tokens.tolist()) for digest, tokens in entries]


def _simulate(two: TwoDrafters, streams: list[np.ndarray], rng: np.random.Generator, k_max: int, tmp_path=None,
              prompt_lens: list[int] | None = None) -> None:
    """Requests join, grow a few tokens per step, finish mid-batch or are preempted (forgotten,
    their partial tokens cached) and come back later under the same id. With `prompt_lens`
    most steps say each row's prompt length (a request first seen in a step that does not
    has none: no group); then every row is past its prompt."""
    # vLLM's token buffer: one row per stream here, the same array every step
    buffer = np.zeros((len(streams), max(s.size for s in streams)), dtype=np.int32)
    for i, seq in enumerate(streams):
        buffer[i, : seq.size] = seq
    waiting = list(range(len(streams)))
    length: dict[int, int] = {}
    preempted_at: dict[int, int] = {}
    last: dict[int, int] = {}  # draft length each active request got last step
    floor = prompt_lens or [1] * len(streams)
    for step in range(400):
        while waiting and (not length or rng.random() < 0.3):
            i = waiting.pop(0)
            length[i] = max(preempted_at.get(i, 0), floor[i], int(rng.integers(1, streams[i].size + 1)))
            last[i] = 0
        if not length:
            break
        rows = [i for i in length if rng.random() < 0.9]
        for i in rows:
            length[i] = min(streams[i].size, length[i] + int(rng.integers(0, 4)))
        drafted = [int(rng.integers(0, last[i] + 1)) for i in rows]
        accepted = [int(rng.integers(0, d + 1)) for d in drafted]
        ks = [int(rng.integers(0, k_max + 1)) for _ in rows]
        prompts = [prompt_lens[i] for i in rows] if prompt_lens and rng.random() < 0.85 else None
        tokens = TokenRows(buffer, np.array([length[i] for i in rows]), np.array(rows, dtype=np.int64))
        drafts = two.step([f"q{i}" for i in rows], tokens, ks, drafted, accepted, prompts)
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


def _swap_caches(two: TwoDrafters, tmp_path) -> tuple[str, str]:
    """Each drafter's cache file (cache and history) loads into the other implementation with
    the same contents; returns the files (reference's, compiled one's)."""
    ref_file, nat_file = str(tmp_path / "ref.npz"), str(tmp_path / "nat.npz")
    two.ref.save_cache(ref_file)
    two.nat.save_cache(nat_file)
    from_ref = NativeHybridProposer.from_file(ref_file, two.ref.cache.max_tokens)
    from_nat = SuffixTrieCache.load(nat_file, two.ref.cache.max_tokens)
    assert from_ref.cache.dump() == from_nat.dump() == two.ref.cache.dump()
    history = _history(two.ref.history.entries())
    assert _history(read_contents(nat_file, None).history()) == history
    assert _history(from_ref.history_entries()) == history
    return ref_file, nat_file


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


@settings(max_examples=12, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    budget=st.sampled_from([30, 5000]),
    n_min=st.integers(1, 3),
    n_extra=st.integers(0, 14),
    alphabet=st.integers(2, 12),
    k_max=st.integers(1, 10),
    limits=bounds,
)
def test_prompt_groups_live_text_and_history_equal_the_reference(seed, budget, n_min, n_extra, alphabet, k_max,
                                                                  limits):
    """Requests sharing prompts (siblings), others not, some of unknown prompt, with small
    bounds: group eviction, live-index rebuilds and history eviction on the way; then a second
    run of new requests from each drafter's file loaded into the other implementation."""
    rng = np.random.default_rng(seed)
    two = TwoDrafters(24, budget, n_min, n_min + n_extra, 0.1, limits)
    requests = prompt_streams(rng, int(rng.integers(2, 12)), alphabet)
    _simulate(two, [t for t, _ in requests], rng, k_max, prompt_lens=[p for _, p in requests])
    two.take_all_source_counts()
    assert two.nat.take_source_counts(sorted(two.seen)) == {}  # all taken
    assert two.nat.state_sizes()["finished_counts"] == (0, None)
    with tempfile.TemporaryDirectory() as tmp:
        ref_file, nat_file = _swap_caches(two, Path(tmp))
        again = two.fresh(nat_from=ref_file, ref_from=nat_file)
        again.check_shared()
        requests = prompt_streams(rng, int(rng.integers(2, 8)), alphabet)
        _simulate(again, [t for t, _ in requests], rng, k_max, prompt_lens=[p for _, p in requests])
        again.take_all_source_counts()


def test_siblings_history_and_live_text_are_drafted_from(tmp_path):
    """On one fixed run every shared source drafts (the property test above could pass with
    none of them ever chosen), the live index is rebuilt and groups are dropped."""
    rng = np.random.default_rng(6)
    limits = Bounds(group_max_tokens=300, history_max_tokens=2000, history_per_prompt=4, live_slack_tokens=40)
    two = TwoDrafters(24, 5000, 1, 16, 0.1, limits)
    requests = prompt_streams(rng, 16, 8)
    _simulate(two, [t for t, _ in requests], rng, 6, prompt_lens=[p for _, p in requests])
    first = two.take_all_source_counts()
    assert first["sibling"][1] > 0 and first["live"][1] > 0, first
    assert two.nat.core.num_live_rebuilds > 0
    assert len(two.nat.group_digests()) < len({prompt_digest(t[:p]) for t, p in requests})  # some were dropped
    ref_file, nat_file = _swap_caches(two, tmp_path)
    again = two.fresh(nat_from=ref_file, ref_from=nat_file)
    _simulate(again, [t for t, _ in prompt_streams(np.random.default_rng(6), 16, 8)], rng, 6,
              prompt_lens=[p for _, p in requests])
    counts = again.take_all_source_counts()
    assert counts["history"][1] > 0, counts


def test_persisted_caches_load_into_either_drafter_mid_run(tmp_path):
    rng = np.random.default_rng(11)
    two = TwoDrafters(24, 3000, 1, 16, 0.1)
    requests = prompt_streams(rng, 20, 6)
    _simulate(two, [t for t, _ in requests], rng, 6, tmp_path, prompt_lens=[p for _, p in requests])
    assert two.nat.history_entries()  # the files carried a history


def test_prompt_lengths_are_checked_at_first_sight():
    nat = NativeHybridProposer()
    with pytest.raises(ValueError, match="request a"):
        nat.propose("a", np.array([1, 2, 3]), 2, num_prompt_tokens=4)
    with pytest.raises(ValueError, match="negative"):
        nat.propose("b", np.array([1, 2, 3]), 2, num_prompt_tokens=-1)
    nat.propose("c", np.array([1, 2, 3]), 2, num_prompt_tokens=3)
    nat.propose("c", np.array([1, 2, 3, 4]), 2, num_prompt_tokens=9)  # read at first sight only


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
