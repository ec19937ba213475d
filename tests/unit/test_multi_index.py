"""MultiIndex (the n-gram index over several sequences behind prompt groups and the live
index) against a naive oracle: the anchor of a lookup is the most recently indexed position
ending with the key whose sequence is not excluded, longest key first."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from oracles.multi_index import MultiIndex


class NaiveIndex:
    """Every indexed (slot, position), in the order indexed, scanned from the newest."""

    def __init__(self, n_max: int) -> None:
        self.n_max = n_max
        self.seqs: list[list[int]] = []
        self.indexed: list[tuple[int, int]] = []

    def add(self, tokens: list[int]) -> int:
        self.seqs.append([])
        self.extend(len(self.seqs) - 1, tokens)
        return len(self.seqs) - 1

    def extend(self, slot: int, tokens: list[int]) -> None:
        seq = self.seqs[slot]
        first = max(len(seq) - 1, 0)
        seq.extend(tokens)
        self.indexed += [(slot, end) for end in range(first, len(seq) - 1)]

    def lookup(self, context: list[int], exclude: int, n_min: int) -> tuple[int, int, int] | None:
        for d in range(min(self.n_max, len(context)), max(n_min, 1) - 1, -1):
            key = context[len(context) - d :]
            for slot, end in reversed(self.indexed):
                if slot != exclude and end + 1 >= d and self.seqs[slot][end - d + 1 : end + 1] == key:
                    return slot, end, d
        return None


tokens_st = st.lists(st.integers(0, 3), max_size=8)


@settings(max_examples=300, deadline=None)
@given(n_max=st.integers(1, 5), data=st.data())
def test_lookups_equal_a_naive_scan_under_interleaved_extends(n_max, data):
    index, naive = MultiIndex(n_max), NaiveIndex(n_max)
    for _ in range(data.draw(st.integers(1, 25))):
        op = data.draw(st.sampled_from(["add", "extend", "extend", "lookup", "lookup"]))
        if op == "add" or (op == "extend" and not naive.seqs):
            tokens = data.draw(tokens_st)
            assert index.add(tokens) == naive.add(tokens)
        elif op == "extend":
            slot = data.draw(st.integers(0, len(naive.seqs) - 1))
            tokens = data.draw(tokens_st)
            index.extend(slot, tokens)
            naive.extend(slot, tokens)
        else:
            context = data.draw(st.lists(st.integers(0, 3), min_size=1, max_size=8))
            exclude = data.draw(st.integers(-1, max(len(naive.seqs) - 1, -1)))
            n_min = data.draw(st.integers(1, 3))
            got = index.lookup(context, exclude, n_min)
            assert got == naive.lookup(context, exclude, n_min), (context, exclude, n_min)
            if got is not None:
                slot, end, _ = got
                k = data.draw(st.integers(1, 4))
                assert index.continuation(slot, end, k).tolist() == naive.seqs[slot][end + 1 : end + 1 + k]
                assert len(index.continuation(slot, end, k)) >= 1  # an indexed position has a continuation
    assert index.num_tokens == sum(len(s) for s in naive.seqs)
    index.check_invariants()


def test_docstring_example():
    index = MultiIndex(3)
    assert index.add([5, 6, 7, 8]) == 0 and index.add([9, 6, 7, 4]) == 1
    assert index.lookup([1, 6, 7]) == (1, 2, 2) and index.continuation(1, 2, 3).tolist() == [4]
    assert index.lookup([1, 6, 7], exclude_slot=1) == (0, 2, 2) and index.continuation(0, 2, 3).tolist() == [8]
    index.extend(0, [6, 7, 1])
    assert index.lookup([1, 6, 7]) == (0, 5, 2) and index.continuation(0, 5, 3).tolist() == [1]
    assert index.lookup([1, 6, 7], exclude_slot=0) == (1, 2, 2)
    index.check_invariants()


def test_the_last_token_is_not_indexed_until_something_follows_it():
    index = MultiIndex(4)
    slot = index.add([1, 2])
    assert index.lookup([2]) is None  # position 1 has no continuation yet
    index.extend(slot, [3])
    assert index.lookup([2]) == (0, 1, 1)
    assert index.lookup([1, 2], n_min=3) is None  # only 2 context tokens: shorter than n_min
    assert index.lookup([2], exclude_slot=0) is None  # the only sequence with the key is excluded
