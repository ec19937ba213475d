"""The compiled multi-sequence index and prompt digest (specdec_native) against the Python
reference: every lookup (with one member excluded) and every digest equal."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from oracles.multi_index import MultiIndex
from specdec.native import load_core
from support.native_core import prompt_digest
from oracles.prompt_digest import prompt_digest as reference_digest

load_core()  # a missing build fails here, loudly: it is what `make setup` installs


# -- the multi-sequence index and the prompt digest -----------------------------------------

multi_ops = st.lists(
    st.tuples(
        st.sampled_from(["add", "extend", "extend", "lookup", "lookup"]),
        st.integers(0, 5),  # slot (extend), excluded slot (lookup: -1 .. 5)
        st.lists(st.integers(0, 3), max_size=12),  # tokens or context
        st.integers(1, 4),  # n_min
    ),
    max_size=40,
)


@settings(max_examples=300, deadline=None)
@given(ops=multi_ops, n_max=st.integers(1, 8))
def test_multi_index_lookups_equal_the_reference(ops, n_max):
    ref, nat = MultiIndex(n_max), load_core().MultiIndex(n_max)
    for op, slot, tokens, n_min in ops:
        seq = np.array(tokens, dtype=np.int32)
        if op == "add" or len(ref) == 0:
            assert nat.add(seq) == ref.add(seq)
        elif op == "extend":
            ref.extend(slot % len(ref), seq)
            nat.extend(slot % len(ref), seq)
        else:
            exclude = slot - 1 if slot <= len(ref) else -1
            assert nat.lookup(seq, exclude, n_min) == ref.lookup(seq, exclude, n_min), (seq, exclude, n_min)
        assert nat.num_tokens == ref.num_tokens
    assert [nat.sequence(i) for i in range(len(ref))] == [ref.sequence(i).tolist() for i in range(len(ref))]


@settings(max_examples=200, deadline=None)
@given(tokens=st.lists(st.integers(0, 2**31 - 1), max_size=40))
def test_prompt_digest_equals_the_reference(tokens):
    want = reference_digest(tokens)
    assert prompt_digest(np.array(tokens, dtype=np.int64)) == want
    assert prompt_digest(np.array(tokens, dtype=np.int32)) == want
    assert prompt_digest(np.array(tokens, dtype=np.int64)[::-1][::-1]) == want


def test_prompt_digest_is_fnv1a_over_little_endian_bytes():
    assert prompt_digest(np.zeros(0, dtype=np.int64)) == 14695981039346656037
    raw = np.array([1, 258, 2**31 - 1], dtype="<u4").tobytes()
    h = 14695981039346656037
    for byte in raw:
        h = ((h ^ byte) * 1099511628211) % 2**64
    assert prompt_digest(np.array([1, 258, 2**31 - 1])) == h
