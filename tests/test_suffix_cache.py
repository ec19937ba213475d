"""The cross-request cache, both implementations (the Python trie and arctic's compiled
tree): invariants under random insert/evict, a naive oracle for matches, persistence round
trip; and the hybrid proposer's choices."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from specdec.drafting.hybrid import HybridProposer
from specdec.drafting.native_cache import NativeSuffixCache, make_cache, native_available
from specdec.drafting.suffix_cache import SuffixTrieCache

CACHES = [SuffixTrieCache] + ([NativeSuffixCache] if native_available() else [])
each_cache = pytest.mark.parametrize("Cache", CACHES, ids=lambda c: c.__name__)

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
    draft = cache.speculate(np.array(context, dtype=np.int64), k=3)
    match_len, num_occ, nexts = naive_speculate(seqs, context, 3, depth)
    assert draft.match_len == match_len
    if nexts:
        best = max(set(nexts), key=nexts.count)
        assert nexts.count(int(draft.tokens[0])) == nexts.count(best)
        assert np.isclose(draft.probs[0], nexts.count(best) / num_occ)
    else:
        assert draft.tokens.size == 0


def naive_continuation(sequences, pattern):
    """How often `pattern` occurs in the sequences and the tokens that follow it."""
    n = len(pattern)
    occurrences = [(seq, i) for seq in sequences for i in range(len(seq) - n + 1) if seq[i : i + n] == pattern]
    return len(occurrences), [seq[i + n] for seq, i in occurrences if i + n < len(seq)]


@pytest.mark.skipif(not native_available(), reason="arctic-inference's suffix tree is not installed")
@settings(max_examples=200, deadline=None)
@given(seqs=seqs_st, context=st.lists(st.integers(0, 4), min_size=1, max_size=12), depth=st.integers(4, 10),
       min_prob=st.sampled_from([0.0, 0.3]))
def test_compiled_cache_drafts_the_counts_of_the_match_it_chose(seqs, context, depth, min_prob):
    """arctic's tree picks among the context's suffixes the one whose continuation scores
    best (not always the longest); whichever it picks, its draft must be that suffix's most
    frequent continuation with the empirical probabilities, cut at `min_prob`."""
    cache = NativeSuffixCache(max_depth=depth)
    for i, seq in enumerate(seqs):
        cache.insert(str(i), np.array(seq, dtype=np.int64))
    k = 3
    draft = cache.speculate(np.array(context, dtype=np.int64), k, min_prob)
    longest, _, nexts = naive_speculate(seqs, context, k, depth)
    if not nexts:
        assert draft.tokens.size == 0
        return
    if draft.tokens.size == 0:  # only a cut may leave nothing: no continuation that sure
        assert min_prob > 0
        return
    assert 1 <= draft.match_len <= longest
    pattern = list(context[-draft.match_len:])
    cumulative = 1.0
    for token, prob in zip(draft.tokens.tolist(), draft.probs.tolist()):
        total, following = naive_continuation(seqs, pattern)
        assert following.count(token) == max(following.count(t) for t in set(following))
        assert prob == pytest.approx(following.count(token) / total, rel=1e-5)
        cumulative *= prob
        assert cumulative >= min_prob - 1e-6
        pattern.append(token)


@each_cache
@settings(max_examples=100, deadline=None)
@given(
    ops=st.lists(st.tuples(st.sampled_from(["insert", "remove"]), st.integers(0, 5),
                           st.lists(st.integers(0, 3), max_size=20)), max_size=25),
    budget=st.integers(1, 60),
)
def test_invariants_hold_under_random_inserts_and_evictions(Cache, ops, budget):
    cache = Cache(max_depth=5, max_nodes=budget)
    for op, key, seq in ops:
        if op == "insert":
            cache.insert(str(key), np.array(seq, dtype=np.int64))
        elif str(key) in cache:
            cache.remove(str(key))
        cache.check_invariants()
    assert cache.num_nodes <= budget or len(cache) <= 1


@settings(max_examples=100, deadline=None)
@given(seq=st.lists(st.integers(0, 3), max_size=30), cut=st.integers(0, 30), depth=st.integers(2, 6))
def test_extending_a_sequence_counts_like_inserting_it_whole(seq, cut, depth):
    grown = SuffixTrieCache(max_depth=depth)
    grown.insert("a", np.array(seq[:cut], dtype=np.int64))
    grown.extend("a", np.array(seq[cut:], dtype=np.int64))
    grown.check_invariants()  # includes: equal to a rebuild from the whole sequence


@each_cache
def test_persistence_round_trip(Cache, tmp_path):
    rng = np.random.default_rng(0)
    cache = Cache(max_depth=6)
    for i in range(20):
        cache.insert(f"r{i}", rng.integers(0, 7, size=40))
    cache.save(tmp_path / "cache.npz")
    loaded = Cache.load(tmp_path / "cache.npz")
    loaded.check_invariants()
    assert loaded.num_nodes == cache.num_nodes and len(loaded) == len(cache)
    context = rng.integers(0, 7, size=10)
    a, b = cache.speculate(context, 4), loaded.speculate(context, 4)
    assert a.tokens.tolist() == b.tokens.tolist() and a.match_len == b.match_len


@each_cache
def test_low_confidence_continuations_are_cut(Cache):
    cache = Cache(max_depth=8)
    for i, tail in enumerate([[9, 9], [9, 8], [9, 7], [9, 6]]):  # after 1 2 3: 9, then anything
        cache.insert(str(i), np.array([1, 2, 3, *tail]))
    sure = cache.speculate(np.array([5, 1, 2, 3]), k=4, min_prob=0.0)
    assert sure.tokens.tolist()[0] == 9 and sure.probs[0] == 1.0 and sure.probs[1] == 0.25
    cut = cache.speculate(np.array([5, 1, 2, 3]), k=4, min_prob=0.5)
    assert cut.tokens.tolist() == [9]


@each_cache
def test_hybrid_uses_finished_requests_and_prefers_longer_evidence(Cache):
    proposer = HybridProposer(Cache(max_depth=12), n_min=2, n_max=8)
    first = np.array([10, 11, 12, 13, 14, 15, 16])
    assert proposer.propose("a", first, 3).tolist() == []  # nothing seen yet
    proposer.forget("a")  # finished: its tokens enter the cache
    assert proposer.propose("b", np.array([1, 11, 12, 13]), 3).tolist() == [14, 15, 16]
    # own text has a longer match than the cache: own continuation wins
    own = np.array([7, 11, 12, 13, 99, 7, 11, 12, 13])
    assert proposer.propose("c", own, 2).tolist() == [99, 7]


def test_the_compiled_cache_is_used_where_installed_and_files_move_between_both(tmp_path):
    python = SuffixTrieCache(max_depth=24)
    python.insert("a", np.arange(30))
    python.save(tmp_path / "cache.npz")
    loaded = make_cache(1000, tmp_path / "cache.npz")
    assert isinstance(loaded, NativeSuffixCache if native_available() else SuffixTrieCache)
    assert "a" in loaded and loaded.speculate(np.array([7, 8]), 3).tokens.tolist() == [9, 10, 11]


@each_cache
def test_a_finished_request_leaves_its_answer_and_its_prompts_last_tokens(Cache):
    proposer = HybridProposer(Cache(max_depth=4), n_min=2, n_max=8)
    prompt = np.arange(100, 110)  # ten prompt tokens, then the answer 7 8 9
    for n in range(1, 4):
        proposer.propose("a", np.concatenate([prompt, [7, 8, 9][:n]]), 0)
    proposer.forget("a")
    [cached] = list(proposer.cache._sequences.values())
    assert cached.tolist() == [106, 107, 108, 109, 7, 8, 9]  # depth 4: the prompt's last 4 tokens
