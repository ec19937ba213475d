"""Cross-request draft cache: counts of every substring (up to `max_depth` tokens) of the
token sequences of finished requests, in a trie.

A lookup finds the longest suffix of a request's context that occurred before in any cached
sequence, then follows the most frequent continuation; each drafted token carries its
empirical probability (child count / parent count), so the caller can size the draft by
confidence. Memory is bounded by a node budget: when an insert exceeds it, whole sequences
are evicted oldest-first, their counts subtracted and empty nodes freed. The sequences are
kept so the cache can be persisted and rebuilt (`save` / `load`).
"""

from __future__ import annotations

import dataclasses
import json
from collections import OrderedDict
from collections.abc import Mapping
from pathlib import Path

import numpy as np


class _Node:
    __slots__ = ("children", "count")

    def __init__(self) -> None:
        self.children: dict[int, _Node] = {}
        self.count = 0


@dataclasses.dataclass(frozen=True)
class CacheDraft:
    tokens: np.ndarray  # drafted token ids
    probs: np.ndarray  # empirical probability of each drafted token given the previous ones
    match_len: int  # how many context tokens matched before the draft


NO_DRAFT = CacheDraft(np.zeros(0, dtype=np.int64), np.zeros(0), 0)


class SuffixTrieCache:
    def __init__(self, max_depth: int = 24, max_nodes: int = 2_000_000) -> None:
        if max_depth < 2 or max_nodes < 1:
            raise ValueError("max_depth must be >= 2 and max_nodes >= 1")
        self.max_depth = max_depth
        self.max_nodes = max_nodes
        self.root = _Node()
        self.num_nodes = 0
        self._sequences: OrderedDict[str, np.ndarray] = OrderedDict()

    def __len__(self) -> int:
        return len(self._sequences)

    def __contains__(self, seq_id: str) -> bool:
        return seq_id in self._sequences

    def insert(self, seq_id: str, tokens: np.ndarray) -> None:
        """Add a sequence (replacing one with the same id), then evict to the budget."""
        if seq_id in self._sequences:
            self.remove(seq_id)
        seq = np.asarray(tokens, dtype=np.int64).copy()
        values = seq.tolist()
        for start in range(len(values)):
            node = self.root
            for tok in values[start : start + self.max_depth]:
                child = node.children.get(tok)
                if child is None:
                    child = node.children[tok] = _Node()
                    self.num_nodes += 1
                child.count += 1
                node = child
        self._sequences[seq_id] = seq
        while self.num_nodes > self.max_nodes and len(self._sequences) > 1:
            self.remove(next(iter(self._sequences)))

    def extend(self, seq_id: str, new_tokens: np.ndarray) -> None:
        """Append tokens to a cached sequence (a running request), counting the new
        substrings; starts the sequence if it is not cached yet."""
        if seq_id not in self._sequences:
            self.insert(seq_id, new_tokens)
            return
        old = self._sequences[seq_id]
        seq = np.concatenate([old, np.asarray(new_tokens, dtype=np.int64)])
        values = seq.tolist()
        for pos in range(len(old), len(values)):
            tok = values[pos]
            for start in range(max(0, pos - self.max_depth + 1), pos + 1):
                node = self.root
                for prev in values[start:pos]:
                    node = node.children[prev]
                child = node.children.get(tok)
                if child is None:
                    child = node.children[tok] = _Node()
                    self.num_nodes += 1
                child.count += 1
        self._sequences[seq_id] = seq
        self._sequences.move_to_end(seq_id)
        while self.num_nodes > self.max_nodes and len(self._sequences) > 1:
            oldest = next(iter(self._sequences))
            if oldest == seq_id:
                break
            self.remove(oldest)

    def remove(self, seq_id: str) -> None:
        values = self._sequences.pop(seq_id).tolist()
        for start in range(len(values)):
            path = values[start : start + self.max_depth]
            node = self.root
            for depth, tok in enumerate(path):
                child = node.children[tok]
                child.count -= 1
                if child.count == 0:
                    # Its subtree held only the rest of this path (counts never exceed the parent's).
                    del node.children[tok]
                    self.num_nodes -= len(path) - depth
                    break
                node = child

    def speculate(self, context: np.ndarray, k: int, min_prob: float = 0.0) -> CacheDraft:
        """Draft up to `k` tokens after the longest cached suffix of `context`.

        Drafting stops when the cumulative probability of the draft falls below `min_prob`.
        """
        # Leave the trie room below the match for k tokens: a match as deep as the trie
        # would have nothing under it to draft.
        node, match_len = self._longest_match(context, max(self.max_depth - 1 - k, 1))
        if node is None or k <= 0:
            return NO_DRAFT
        tokens: list[int] = []
        probs: list[float] = []
        cumulative = 1.0
        while len(tokens) < k and node.children:
            tok, child = max(node.children.items(), key=lambda kv: kv[1].count)
            prob = child.count / node.count
            if cumulative * prob < min_prob:
                break
            cumulative *= prob
            tokens.append(tok)
            probs.append(prob)
            node = child
        return CacheDraft(np.asarray(tokens, dtype=np.int64), np.asarray(probs), match_len)

    def _longest_match(self, context: np.ndarray, max_len: int) -> tuple[_Node | None, int]:
        tail = context[-max_len:].tolist()
        for start in range(len(tail)):  # longest suffix first
            node = self.root
            for tok in tail[start:]:
                node = node.children.get(tok)
                if node is None:
                    break
            else:
                if node.children:  # seen before with something after it
                    return node, len(tail) - start
        return None, 0

    def check_invariants(self) -> None:
        """Counts are consistent, the node count is right, and match a rebuild from scratch."""
        seen = 0
        stack = [self.root]
        while stack:
            node = stack.pop()
            assert sum(c.count for c in node.children.values()) <= node.count or node is self.root
            for child in node.children.values():
                assert child.count >= 1, "empty node left in the trie"
                seen += 1
                stack.append(child)
        assert seen == self.num_nodes, (seen, self.num_nodes)
        assert self.num_nodes <= self.max_nodes or len(self._sequences) <= 1
        rebuilt = SuffixTrieCache(self.max_depth, max_nodes=1 << 62)
        for seq_id, seq in self._sequences.items():
            rebuilt.insert(seq_id, seq)
        assert _same_counts(self.root, rebuilt.root), "counts differ from a rebuild"

    def save(self, path: str | Path) -> None:
        """Write the cached sequences (the trie is rebuilt on load)."""
        save_sequences(path, self._sequences, self.max_depth, self.max_nodes)

    @classmethod
    def load(cls, path: str | Path, max_nodes: int | None = None) -> "SuffixTrieCache":
        """Rebuild a saved cache (under `max_nodes` if given: the oldest sequences go first)."""
        max_depth, saved_max_nodes, sequences = load_sequences(path)
        cache = cls(max_depth, max_nodes or saved_max_nodes)
        for seq_id, seq in sequences:
            cache.insert(seq_id, seq)
        return cache


def save_sequences(path: str | Path, sequences: Mapping[str, np.ndarray], max_depth: int, max_nodes: int) -> None:
    """A cache file: its sequences, oldest first, and its sizes (either cache reads it)."""
    path = Path(path)
    arrays = {f"s{i}": seq for i, seq in enumerate(sequences.values())}
    meta = json.dumps({"max_depth": max_depth, "max_nodes": max_nodes, "ids": list(sequences)})
    tmp = path.with_name(path.name + ".tmp.npz")
    np.savez_compressed(tmp, meta=np.asarray(meta), **arrays)
    tmp.replace(path)


def load_sequences(path: str | Path) -> tuple[int, int, list[tuple[str, np.ndarray]]]:
    """(max_depth, max_nodes, [(id, tokens)] oldest first) of a cache file."""
    with np.load(path, allow_pickle=False) as data:
        meta = json.loads(str(data["meta"]))
        return meta["max_depth"], meta["max_nodes"], [(seq_id, data[f"s{i}"]) for i, seq_id in enumerate(meta["ids"])]


def _same_counts(a: _Node, b: _Node) -> bool:
    if a.count != b.count or a.children.keys() != b.children.keys():
        return False
    return all(_same_counts(a.children[t], b.children[t]) for t in a.children)
