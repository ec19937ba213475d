"""The cross-request cache: invariants under random insert/evict, a naive oracle for
matches, persistence round trip; and the hybrid proposer's choices."""

import json

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from specdec.drafting import cache_file
from oracles.hybrid import HybridProposer
from oracles.suffix_cache import SuffixTrieCache

seqs_st = st.lists(st.lists(st.integers(0, 4), min_size=0, max_size=25), min_size=1, max_size=8)


def naive_speculate(sequences, context, k, max_depth):
    """By brute force: the longest suffix of `context` (at most max_depth - 1 - k tokens, so
    that k tokens fit under it in the trie, and at least 1) occurring in some sequence with
    a token after it, how often it occurs, and the tokens that follow."""
    tail = list(context[-max(max_depth - 1 - k, 1):])
    for start in range(len(tail)):
        pattern = tail[start:]
        n = len(pattern)
        occurrences = [
            (seq, i) for seq in sequences for i in range(len(seq) - n + 1) if seq[i : i + n] == pattern
        ]
        nexts = [seq[i + n] for seq, i in occurrences if i + n < len(seq)]
        if nexts:
            return n, len(occurrences), nexts
    return 0, 0, []


@settings(max_examples=200, deadline=None)
@given(seqs=seqs_st, context=st.lists(st.integers(0, 4), min_size=1, max_size=12), depth=st.integers(2, 8))
def test_matches_agree_with_a_naive_scan(seqs, context, depth):
    cache = SuffixTrieCache(max_depth=depth)
    for i, seq in enumerate(seqs):
        cache.insert(str(i), np.array(seq, dtype=np.int64))
    draft = cache.speculate(np.array(context, dtype=np.int64), max_draft_tokens=3)
    match_len, num_occ, nexts = naive_speculate(seqs, context, 3, depth)
    assert draft.match_len == match_len
    if nexts:
        best = max(set(nexts), key=nexts.count)
        assert nexts.count(int(draft.tokens[0])) == nexts.count(best)
        assert np.isclose(draft.probs[0], nexts.count(best) / num_occ)
    else:
        assert draft.tokens.size == 0


@settings(max_examples=100, deadline=None)
@given(
    ops=st.lists(st.tuples(st.sampled_from(["insert", "remove"]), st.integers(0, 5),
                           st.lists(st.integers(0, 3), max_size=20)), max_size=25),
    budget=st.integers(1, 60),
)
def test_invariants_hold_under_random_inserts_and_evictions(ops, budget):
    cache = SuffixTrieCache(max_depth=5, max_tokens=budget)
    for op, key, seq in ops:
        if op == "insert":
            cache.insert(str(key), np.array(seq, dtype=np.int64))
        elif str(key) in cache:
            cache.remove(str(key))
        cache.check_invariants()
    assert cache.num_tokens <= budget or len(cache) <= 1


def test_eviction_drops_whole_oldest_sequences_to_the_token_budget():
    cache = SuffixTrieCache(max_depth=4, max_tokens=10)
    for i, n in enumerate([4, 3, 3]):
        cache.insert(f"s{i}", np.arange(n) + 10 * i)
    assert len(cache) == 3 and cache.num_tokens == 10
    cache.insert("s3", np.arange(2) + 30)  # 12 tokens: s0 (the oldest, 4 tokens) goes
    assert "s0" not in cache and cache.num_tokens == 8
    cache.insert("s1", np.arange(3) + 10)  # same id again: the newest now, s2 becomes the oldest
    cache.insert("s4", np.arange(5) + 40)  # 13 tokens: s2 goes (10 left), s3 and s1 stay
    assert list(cache.contents().ids) == ["s3", "s1", "s4"]
    cache.insert("big", np.arange(20))  # alone over the budget: it stays, everything else goes
    assert list(cache.contents().ids) == ["big"]
    cache.check_invariants()


def test_persistence_round_trip(tmp_path):
    rng = np.random.default_rng(0)
    cache = SuffixTrieCache(max_depth=6)
    for i in range(20):
        cache.insert(f"r{i}", rng.integers(0, 7, size=40))
    cache.save(tmp_path / "cache.npz")
    loaded = SuffixTrieCache.load(tmp_path / "cache.npz")
    loaded.check_invariants()
    assert loaded.num_nodes == cache.num_nodes and len(loaded) == len(cache)
    assert loaded.dump() == cache.dump()
    small = SuffixTrieCache.load(tmp_path / "cache.npz", max_tokens=100)  # the oldest go first
    assert list(small.contents().ids) == [f"r{i}" for i in range(18, 20)]


def test_files_of_the_first_headed_format_still_load(tmp_path):
    """Version 1 of the header (node budget, one array per sequence): its sequences load
    under the token budget. Header-less files start cold instead (test_cache_file.py)."""
    seqs = {"a": np.array([1, 2, 3, 4], dtype=np.int64), "b": np.array([2, 3, 5], dtype=np.int64)}
    meta = {"format": cache_file.FORMAT, "version": 1, "tokenizer": "tok", "max_depth": 5, "max_nodes": 2_000_000,
            "ids": list(seqs)}
    np.savez_compressed(tmp_path / "old.npz", meta=np.asarray(json.dumps(meta)), s0=seqs["a"], s1=seqs["b"])
    loaded = SuffixTrieCache.load(tmp_path / "old.npz", tokenizer="tok")
    assert loaded.max_depth == 5 and list(loaded.contents().ids) == ["a", "b"]
    assert loaded.speculate(np.array([9, 2, 3]), max_draft_tokens=2).tokens.tolist() == [4]  # 4 and 5 tie: the smaller


def test_speculate_docstring_example():
    cache = SuffixTrieCache()
    cache.insert("a", np.array([1, 2, 3, 9, 9]))
    cache.insert("b", np.array([1, 2, 3, 9, 7]))
    draft = cache.speculate(np.array([5, 1, 2, 3]), max_draft_tokens=3, min_prob=0.4)
    assert draft.tokens.tolist() == [9, 7] and draft.probs.tolist() == [1.0, 0.5] and draft.match_len == 3


def test_low_confidence_continuations_are_cut():
    cache = SuffixTrieCache(max_depth=8)
    for i, tail in enumerate([[9, 9], [9, 8], [9, 7], [9, 6]]):  # after 1 2 3: 9, then anything
        cache.insert(str(i), np.array([1, 2, 3, *tail]))
    sure = cache.speculate(np.array([5, 1, 2, 3]), max_draft_tokens=4, min_prob=0.0)
    assert sure.tokens.tolist()[0] == 9 and sure.probs[0] == 1.0 and sure.probs[1] == 0.25
    cut = cache.speculate(np.array([5, 1, 2, 3]), max_draft_tokens=4, min_prob=0.5)
    assert cut.tokens.tolist() == [9]


def test_hybrid_uses_finished_requests_and_prefers_longer_evidence():
    proposer = HybridProposer(SuffixTrieCache(max_depth=12), n_min=2, n_max=8)
    first = np.array([10, 11, 12, 13, 14, 15, 16])
    assert proposer.propose("a", first, 3).tolist() == []  # nothing seen yet
    proposer.forget("a")  # finished: its tokens enter the cache
    assert proposer.propose("b", np.array([1, 11, 12, 13]), 3).tolist() == [14, 15, 16]
    # own text has a longer match than the cache: own continuation wins
    own = np.array([7, 11, 12, 13, 99, 7, 11, 12, 13])
    assert proposer.propose("c", own, 2).tolist() == [99, 7]
