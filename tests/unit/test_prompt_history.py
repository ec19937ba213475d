"""The per-prompt history (PromptHistory): its two bounds and the order it evicts in; and the
prompt digest that keys it (FNV-1a 64 over 4 little-endian bytes per token)."""

from __future__ import annotations

import struct

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from oracles.prompt_digest import prompt_digest
from oracles.prompt_history import PromptHistory


def fnv1a_64(data: bytes) -> int:
    digest = 0xCBF29CE484222325
    for byte in data:
        digest = ((digest ^ byte) * 0x100000001B3) % 2**64
    return digest


def test_the_byte_level_reference_meets_published_fnv1a_vectors():
    assert fnv1a_64(b"") == 0xCBF29CE484222325
    assert fnv1a_64(b"a") == 0xAF63DC4C8601EC8C
    assert fnv1a_64(b"foobar") == 0x85944171F73967E8


def test_digest_known_values():
    assert prompt_digest([]) == 0xCBF29CE484222325
    assert prompt_digest([0x64636261]) == fnv1a_64(b"abcd") == 0xFC179F83EE0724DD  # the bytes of "abcd"
    assert prompt_digest([97]) == fnv1a_64(b"a\x00\x00\x00")


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(0, 2**32 - 1), max_size=20))
def test_digest_is_fnv1a_over_little_endian_uint32(tokens):
    want = fnv1a_64(struct.pack(f"<{len(tokens)}I", *tokens))
    assert prompt_digest(tokens) == want == prompt_digest(np.array(tokens, dtype=np.uint32))


def test_digest_tells_order_and_length_apart():
    assert len({prompt_digest(p) for p in ([1, 2], [2, 1], [1, 2, 0], [1], [0, 1, 2])}) == 5


def completion(n: int, fill: int) -> np.ndarray:
    return np.full(n, fill, dtype=np.int64)


def test_a_prompts_oldest_completion_goes_beyond_the_per_prompt_bound():
    history = PromptHistory(max_tokens=1000, per_prompt=2)
    for i in range(3):
        history.add(7, completion(3, i))
    history.add(8, completion(3, 9))
    assert [c.tolist()[0] for c in history.completions(7)] == [1, 2]
    assert [c.tolist()[0] for c in history.completions(8)] == [9]
    history.check_invariants()


def test_the_globally_oldest_completion_goes_beyond_the_token_bound():
    history = PromptHistory(max_tokens=10, per_prompt=16)
    history.add(1, completion(4, 10))
    history.add(2, completion(4, 20))
    history.add(1, completion(4, 11))  # 12 tokens: prompt 1's first completion, the oldest, goes
    assert [(d, c[0]) for d, c in history.entries()] == [(2, 20), (1, 11)]
    assert history.num_tokens == 8
    history.add(3, completion(10, 30))  # needs all 10: every older one goes, oldest first
    assert [(d, c[0]) for d, c in history.entries()] == [(3, 30)]
    history.add(4, completion(11, 40))  # longer than the bound: not kept, and it took the rest
    assert history.entries() == [] and history.num_tokens == 0
    history.check_invariants()


def test_completions_from_a_file_are_told_apart():
    history = PromptHistory()
    history.add(5, completion(2, 1), from_file=True)
    history.add(5, completion(2, 2))
    assert [c[0] for c in history.completions(5)] == [1, 2]
    assert [c[0] for c in history.completions(5, from_file_only=True)] == [1]
    assert history.completions(6) == []


def test_the_history_keeps_its_own_copy():
    history = PromptHistory()
    tokens = completion(3, 1)
    history.add(1, tokens)
    tokens[:] = 9
    assert history.completions(1)[0].tolist() == [1, 1, 1]


def test_negative_bounds_are_refused():
    with pytest.raises(ValueError):
        PromptHistory(max_tokens=-1)


class NaiveHistory:
    def __init__(self, max_tokens: int, per_prompt: int) -> None:
        self.max_tokens, self.per_prompt = max_tokens, per_prompt
        self.items: list[tuple[int, list[int]]] = []

    def add(self, digest: int, tokens: list[int]) -> None:
        self.items.append((digest, tokens))
        mine = [i for i, (d, _) in enumerate(self.items) if d == digest]
        if len(mine) > self.per_prompt:
            del self.items[mine[0]]
        while sum(len(t) for _, t in self.items) > self.max_tokens:
            del self.items[0]


@settings(max_examples=200, deadline=None)
@given(
    max_tokens=st.integers(0, 30),
    per_prompt=st.integers(0, 4),
    adds=st.lists(st.tuples(st.integers(0, 3), st.integers(1, 8)), max_size=40),
)
def test_bounds_and_eviction_order_equal_a_naive_list(max_tokens, per_prompt, adds):
    history, naive = PromptHistory(max_tokens, per_prompt), NaiveHistory(max_tokens, per_prompt)
    for i, (digest, n) in enumerate(adds):
        history.add(digest, completion(n, i))
        naive.add(digest, [i] * n)
        assert [(d, c.tolist()) for d, c in history.entries()] == naive.items
        history.check_invariants()
