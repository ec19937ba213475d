"""The oracle's n-gram matcher agrees with its definition; drafts respect K. That the CLI loads
no numba: tests/process/test_fresh_interpreter.py."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from oracles.ngram import propose_ngram, propose_ngram_naive

tokens_st = st.lists(st.integers(0, 5), max_size=60)


@settings(max_examples=500, deadline=None)
@given(tokens=tokens_st, n_min=st.integers(1, 4), extra=st.integers(0, 4), k=st.integers(0, 8))
def test_fast_matcher_agrees_with_naive(tokens, n_min, extra, k):
    n_max = n_min + extra
    fast = propose_ngram(np.asarray(tokens, dtype=np.int64), n_min, n_max, k)
    assert fast.tolist() == propose_ngram_naive(tokens, n_min, n_max, k)
    assert len(fast) <= k


def test_prefers_longest_then_most_recent_match():
    # "1 2 3" occurs twice followed by different tokens; the suffix "1 2 3" matches both, the
    # most recent (followed by 8) wins; a longer match "0 1 2 3" beats it when present.
    tokens = [1, 2, 3, 7, 9, 1, 2, 3, 8, 5, 1, 2, 3]
    assert propose_ngram(np.array(tokens), 2, 5, 2).tolist() == [8, 5]
    tokens = [0, 1, 2, 3, 7, 9, 1, 2, 3, 8, 5, 0, 1, 2, 3]
    assert propose_ngram(np.array(tokens), 2, 5, 2).tolist() == [7, 9]


def test_no_match_below_n_min():
    assert propose_ngram(np.array([1, 2, 3, 4, 3]), 2, 5, 4).tolist() == []
    assert propose_ngram(np.array([1, 2, 3, 4, 3]), 1, 5, 4).tolist() == [4, 3]
