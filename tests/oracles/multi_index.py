"""An n-gram index over several token sequences at once (the Python reference).

Used for the text other requests wrote: a prompt group's siblings and history completions,
and the live index of every running request (see live_text). Each member sequence has an
integer slot, given in the order of `add` and never reused within one index.

Position p of a sequence is *indexed* once token p+1 exists (so every indexed position has a
continuation); indexing it registers, for every d in 1..min(n_max, p+1), the key of the d
tokens ending at p. Per key the index keeps two anchors: `newest`, the most recently indexed
(slot, position) with that key, and `other`, the most recently indexed one whose slot differs
from newest's. A lookup that excludes one slot (the asking request's own) therefore finds
the most recently indexed match of any other sequence: newest, or other where newest is the
excluded slot. The compiled core (multi_index.h) keeps the same anchors in a compacted trie;
this one is a dict keyed by token tuples, simple and slow.

Example (n_max 3):

    index = MultiIndex(3)
    index.add([5, 6, 7, 8])         # slot 0; positions 0..2 indexed (8 has nothing after it yet)
    index.add([9, 6, 7, 4])         # slot 1; key (6, 7) now: newest (1, 2), other (0, 2)
    index.lookup([1, 6, 7])         # (1, 7) unseen, (6, 7) -> (1, 2, 2): draft [4]
    index.lookup([1, 6, 7], exclude_slot=1)  # -> (0, 2, 2): draft [8]
    index.extend(0, [6, 7, 1])      # slot 0 is [5, 6, 7, 8, 6, 7, 1]; (6, 7) ends at 5 too
    index.lookup([1, 6, 7])         # -> (0, 5, 2): draft [1]
    index.lookup([1, 6, 7], exclude_slot=0)  # -> (1, 2, 2): draft [4]
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

_EMPTY = -1  # no anchor (slot and position)


def _ints(tokens: Sequence[int] | np.ndarray) -> list[int]:
    return tokens.tolist() if isinstance(tokens, np.ndarray) else [int(t) for t in tokens]


class MultiIndex:
    """Keys of up to `n_max` tokens over several growing sequences, two anchors per key."""

    def __init__(self, n_max: int) -> None:
        if n_max < 1:
            raise ValueError(f"n_max={n_max} must be >= 1")
        self.n_max = n_max
        self.num_tokens = 0  # tokens of all member sequences
        self._seqs: list[list[int]] = []
        # key -> [newest slot, newest end, other slot, other end]
        self._entries: dict[tuple[int, ...], list[int]] = {}

    def __len__(self) -> int:
        return len(self._seqs)

    def add(self, tokens: Sequence[int] | np.ndarray) -> int:
        """A new member sequence (its positions 0..len-2 indexed in order); returns its slot."""
        slot = len(self._seqs)
        self._seqs.append([])
        self.extend(slot, tokens)
        return slot

    def extend(self, slot: int, tokens: Sequence[int] | np.ndarray) -> None:
        """Append `tokens` to member `slot`, indexing its newly indexable positions in order."""
        seq = self._seqs[slot]
        first = max(len(seq) - 1, 0)
        new = _ints(tokens)
        seq.extend(new)
        self.num_tokens += len(new)
        for end in range(first, len(seq) - 1):
            self._index(slot, end)

    def _index(self, slot: int, end: int) -> None:
        seq = self._seqs[slot]
        for d in range(1, min(self.n_max, end + 1) + 1):
            key = tuple(seq[end - d + 1 : end + 1])
            entry = self._entries.get(key)
            if entry is None:
                self._entries[key] = [slot, end, _EMPTY, _EMPTY]
            elif entry[0] == slot:
                entry[1] = end
            else:
                entry[2], entry[3] = entry[0], entry[1]
                entry[0], entry[1] = slot, end

    def lookup(
        self, context: Sequence[int] | np.ndarray, exclude_slot: int | None = -1, n_min: int = 1
    ) -> tuple[int, int, int] | None:
        """(slot, end, match_len) of the longest key ending `context` (at most n_max, at least
        n_min tokens) with an anchor outside `exclude_slot` (-1 or None: none excluded); the
        draft is `continuation(slot, end, max_draft_tokens)`. None: no such key."""
        exclude = -1 if exclude_slot is None else exclude_slot
        tail = _ints(context[-self.n_max :]) if self.n_max else []
        for d in range(len(tail), max(n_min, 1) - 1, -1):
            entry = self._entries.get(tuple(tail[len(tail) - d :]))
            if entry is None:
                continue
            if entry[0] != exclude:
                return entry[0], entry[1], d
            if entry[2] != _EMPTY:
                return entry[2], entry[3], d
        return None

    def continuation(self, slot: int, end: int, max_draft_tokens: int) -> np.ndarray:
        """[<= max_draft_tokens] the tokens after position `end` of member `slot`, as it is now."""
        return np.asarray(self._seqs[slot][end + 1 : end + 1 + max(max_draft_tokens, 0)], dtype=np.int64)

    def sequence(self, slot: int) -> np.ndarray:
        """[length] member `slot`'s tokens."""
        return np.asarray(self._seqs[slot], dtype=np.int64)

    def length(self, slot: int) -> int:
        return len(self._seqs[slot])

    def check_invariants(self) -> None:
        """The token count adds up; every anchor is an indexed position ending with its key;
        `other` (where set) is of another slot than `newest`; every indexed position's keys
        are present."""
        assert self.num_tokens == sum(len(s) for s in self._seqs)
        for key, (slot, end, other_slot, other_end) in self._entries.items():
            anchors = [(slot, end)] + ([(other_slot, other_end)] if other_slot != _EMPTY else [])
            for s, e in anchors:
                seq = self._seqs[s]
                assert len(key) - 1 <= e <= len(seq) - 2, (key, s, e)
                assert tuple(seq[e - len(key) + 1 : e + 1]) == key, (key, s, e)
            assert other_slot == _EMPTY or other_slot != slot, key
        for seq in self._seqs:
            for end in range(len(seq) - 1):
                for d in range(1, min(self.n_max, end + 1) + 1):
                    assert tuple(seq[end - d + 1 : end + 1]) in self._entries
