"""Cross-request draft cache (the Python reference): counts of every substring, up to
`max_depth` tokens, of the token sequences of finished requests, in a trie.

A lookup finds the longest suffix of a request's context that occurred before in any cached
sequence, then follows the most frequent continuation (ties: the smallest token id); each
drafted token carries its empirical probability (child count / parent count), so the
caller can size the draft by confidence. Memory is bounded by a number of cached tokens:
when an insert exceeds it, whole sequences are evicted oldest first, their counts
subtracted and empty nodes freed. The compiled core (specdec_native) holds the same counts
in a compact suffix tree and drafts exactly the same tokens; this one is the reference.
The sequences are kept so the cache can be persisted (`save` / `load`, see cache_file).
"""

from __future__ import annotations

import dataclasses
from collections import OrderedDict
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from specdec.drafting.cache_file import CacheContents, read_contents, write_contents

if TYPE_CHECKING:  # native imports this module
    from specdec.drafting.native import NativeSuffixCache

DEFAULT_MAX_DEPTH = 24
DEFAULT_MAX_TOKENS = 4_000_000


class _Node:
    __slots__ = ("children", "count")

    def __init__(self) -> None:
        self.children: dict[int, _Node] = {}
        self.count = 0


@dataclasses.dataclass(frozen=True)
class CacheDraft:
    tokens: np.ndarray  # [num_drafted] drafted token ids
    probs: np.ndarray  # [num_drafted] probability of each drafted token given the ones before
    match_len: int  # how many context tokens matched before the draft


_NO_DRAFT = CacheDraft(np.zeros(0, dtype=np.int64), np.zeros(0), 0)


class SuffixTrieCache:
    """Substring counts of cached sequences, bounded by `max_tokens` cached tokens."""

    def __init__(self, max_depth: int = DEFAULT_MAX_DEPTH, max_tokens: int = DEFAULT_MAX_TOKENS) -> None:
        if max_depth < 2 or max_tokens < 1:
            raise ValueError("max_depth must be >= 2 and max_tokens >= 1")
        self.max_depth = max_depth
        self.max_tokens = max_tokens
        self.root = _Node()
        self.num_nodes = 0
        self.num_tokens = 0  # tokens of the cached sequences
        self._sequences: OrderedDict[str, np.ndarray] = OrderedDict()

    def __len__(self) -> int:
        return len(self._sequences)

    def __contains__(self, seq_id: str) -> bool:
        return seq_id in self._sequences

    def insert(self, seq_id: str, tokens: np.ndarray) -> None:
        """Add a sequence as the newest (replacing one with the same id), then evict whole
        sequences, oldest first, until at most `max_tokens` tokens are cached (the newest
        sequence always stays)."""
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
        self.num_tokens += seq.size
        while self.num_tokens > self.max_tokens and len(self._sequences) > 1:
            self.remove(next(iter(self._sequences)))

    def remove(self, seq_id: str) -> None:
        seq = self._sequences.pop(seq_id)
        self.num_tokens -= seq.size
        values = seq.tolist()
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

    def speculate(self, context: np.ndarray, max_draft_tokens: int, min_prob: float = 0.0) -> CacheDraft:
        """Draft up to `max_draft_tokens` tokens after the longest cached suffix of `context`.

        The suffix is at most `max(max_depth - 1 - max_draft_tokens, 1)` tokens long (so that
        the draft fits under it in the trie) and must have been followed by something. From it,
        each step takes the most frequent next token (ties: the smallest id), with probability
        count(suffix + token) / count(suffix); drafting stops at `max_draft_tokens` tokens, at
        the trie's depth, or before the draft's cumulative probability would fall below
        `min_prob`.

        Example (max_depth 24), cached sequences [1, 2, 3, 9, 9] and [1, 2, 3, 9, 7]:

            context = [5, 1, 2, 3], max_draft_tokens = 3, min_prob = 0.4
            longest cached suffix: [1, 2, 3] (seen twice), match_len = 3
            next: 9 (2 of 2 times, p = 1.0); then 7 or 9 (1 of 2 each): 7, the smaller id
            (p = 0.5, cumulative 0.5 >= 0.4); then nothing was seen after [.., 9, 7]
            -> tokens [9, 7], probs [1.0, 0.5], match_len 3

        Args:
            context: [num_tokens] the request's tokens so far (only the tail is read).
            max_draft_tokens: most tokens to draft.
            min_prob: the lowest cumulative probability a drafted token may bring the draft to.
        """
        node, match_len = self._longest_match(context, max(self.max_depth - 1 - max_draft_tokens, 1))
        if node is None or max_draft_tokens <= 0:
            return _NO_DRAFT
        tokens: list[int] = []
        probs: list[float] = []
        cumulative = 1.0
        while len(tokens) < max_draft_tokens and node.children:
            tok, child = min(node.children.items(), key=lambda kv: (-kv[1].count, kv[0]))
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
        """Counts are consistent, the node and token counts are right, the budget holds, and
        the trie equals a rebuild from the cached sequences."""
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
        assert self.num_tokens == sum(s.size for s in self._sequences.values())
        assert self.num_tokens <= self.max_tokens or len(self._sequences) <= 1
        rebuilt = SuffixTrieCache(self.max_depth, max_tokens=1 << 62)
        for seq_id, seq in self._sequences.items():
            rebuilt.insert(seq_id, seq)
        assert _same_counts(self.root, rebuilt.root), "counts differ from a rebuild"

    def contents(self) -> CacheContents:
        """The cached sequences, oldest first."""
        seqs = list(self._sequences.values())
        tokens = np.concatenate(seqs).astype(np.int32) if seqs else np.zeros(0, dtype=np.int32)
        return CacheContents(self.max_depth, list(self._sequences), tokens, np.array([s.size for s in seqs], dtype=np.int64))

    def dump(self) -> list[tuple[tuple[int, ...], int]]:
        """Every substring the cache counts, with its count (sorted; for tests)."""
        out: list[tuple[tuple[int, ...], int]] = []
        stack: list[tuple[tuple[int, ...], _Node]] = [((), self.root)]
        while stack:
            path, node = stack.pop()
            for tok, child in node.children.items():
                out.append(((*path, tok), child.count))
                stack.append(((*path, tok), child))
        return sorted(out)

    def load_contents(self, contents: CacheContents) -> None:
        """Insert a file's sequences, oldest first (the budget evicts the oldest)."""
        for seq_id, seq in zip(contents.ids, contents.sequences(), strict=True):
            self.insert(seq_id, seq)

    def save(self, path: str | Path, tokenizer: str | None = None) -> None:
        """Write the cached sequences (see cache_file: versioned header, atomic replace; the
        trie is rebuilt on load)."""
        write_contents(path, self.contents(), tokenizer)

    @classmethod
    def load(
        cls, path: str | Path, max_tokens: int = DEFAULT_MAX_TOKENS, tokenizer: str | None = None
    ) -> "SuffixTrieCache":
        """Rebuild a saved cache under `max_tokens` (the oldest sequences go first). Raises
        CacheFileError for a file that is damaged, foreign, of an unknown format version or
        (with `tokenizer`) written with another tokenizer."""
        contents = read_contents(path, tokenizer)
        cache = cls(contents.max_depth, max_tokens)
        cache.load_contents(contents)
        return cache


def cache_sizes(cache: SuffixTrieCache | NativeSuffixCache) -> dict[str, tuple[int, int | None]]:
    """(size, bound) of a cross-request cache (this one or the compiled one): its tokens are
    bounded by the budget, its sequences by the same number (each holds a token), its nodes
    by max_depth per token (one suffix path per start position, at most max_depth deep)."""
    bound = cache.max_tokens
    return {"cache_tokens": (cache.num_tokens, bound), "cache_sequences": (len(cache), bound),
            "cache_nodes": (cache.num_nodes, bound * cache.max_depth)}


def _same_counts(a: _Node, b: _Node) -> bool:
    if a.count != b.count or a.children.keys() != b.children.keys():
        return False
    return all(_same_counts(a.children[t], b.children[t]) for t in a.children)
