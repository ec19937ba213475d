"""The cross-request cache on arctic-inference's compiled suffix tree, where it is installed.

Same interface and meaning as `SuffixTrieCache` (the Python reference): every substring of
the finished requests' sequences up to `max_depth` tokens is counted; a lookup follows the
most frequent continuation of the longest cached suffix of the context, each token with its
empirical probability, cut where the draft's cumulative probability drops below `min_prob`.
Only the counting structure differs: arctic's C++ `SuffixTree` (built by scripts/install.sh
from packaging/suffix_tree; none of its code is in this repository).

Why: the drafter runs between two target forwards with the accelerator idle, so its time is
part of every step. On the 2-core CPU of the project, the Python trie took 18.5 ms to insert a
finished 300-token request and about 21 us per lookup; the C++ tree 0.5 ms and 6 us (HumanEval
sequences). At batch 16 on an H100-class step (about 8 ms) the Python inserts alone would
add most of a step for every request that finishes.

The node budget is estimated as tokens x depth (an upper bound of the nodes a trie holds);
whole sequences are evicted oldest first past it, as in the Python cache.
"""

from __future__ import annotations

from collections import OrderedDict
from pathlib import Path

import numpy as np

from specdec.drafting.base import DraftCache
from specdec.drafting.suffix_cache import NO_DRAFT, CacheDraft, SuffixTrieCache, load_sequences, save_sequences


def native_available() -> bool:
    try:
        from arctic_inference.suffix_decoding._C import SuffixTree  # noqa: F401
    except ImportError:
        return False
    return True


class NativeSuffixCache:
    def __init__(self, max_depth: int = 24, max_nodes: int = 2_000_000) -> None:
        from arctic_inference.suffix_decoding._C import SuffixTree

        if max_depth < 2 or max_nodes < 1:
            raise ValueError("max_depth must be >= 2 and max_nodes >= 1")
        self.max_depth = max_depth
        self.max_nodes = max_nodes
        self.num_nodes = 0  # estimated: tokens x depth
        self._tree = SuffixTree(max_depth)
        self._sequences: OrderedDict[str, np.ndarray] = OrderedDict()
        self._tree_ids: dict[str, int] = {}
        self._next_tree_id = 0

    def __len__(self) -> int:
        return len(self._sequences)

    def __contains__(self, seq_id: str) -> bool:
        return seq_id in self._sequences

    def insert(self, seq_id: str, tokens: np.ndarray) -> None:
        """Add a sequence (replacing one with the same id), then evict to the budget."""
        if seq_id in self._sequences:
            self.remove(seq_id)
        seq = np.asarray(tokens, dtype=np.int64).copy()
        tree_id = self._next_tree_id
        self._next_tree_id = (self._next_tree_id + 1) & 0x7FFFFFFF  # the tree's ids are int32
        if seq.size:  # the tree keeps no empty sequence
            self._tree.extend(tree_id, seq.tolist())
        self._sequences[seq_id] = seq
        self._tree_ids[seq_id] = tree_id
        self.num_nodes += self._nodes(seq)
        while self.num_nodes > self.max_nodes and len(self._sequences) > 1:
            self.remove(next(iter(self._sequences)))

    def remove(self, seq_id: str) -> None:
        seq = self._sequences.pop(seq_id)
        tree_id = self._tree_ids.pop(seq_id)
        if seq.size:
            self._tree.remove(tree_id)
        self.num_nodes -= self._nodes(seq)

    def _nodes(self, seq: np.ndarray) -> int:
        return int(seq.shape[0]) * self.max_depth

    def speculate(self, context: np.ndarray, k: int, min_prob: float = 0.0) -> CacheDraft:
        """Draft up to `k` tokens after the longest cached suffix of `context` (at most
        max_depth - 1 - k tokens, so the tree holds k tokens below it), as SuffixTrieCache."""
        if k <= 0 or not self._sequences:
            return NO_DRAFT
        max_len = max(self.max_depth - 1 - k, 1)
        # The tree only tries suffixes shorter than the context it is given: hand it one
        # token more (a token id no text has where the context is that short).
        tail = np.empty(max_len + 1, dtype=np.int32)
        n = min(int(context.shape[0]), max_len + 1)
        tail[max_len + 1 - n :] = context[-n:]
        tail = tail[max_len - n :] if n <= max_len else tail
        if n <= max_len:
            tail[0] = -1
        # Offset k and factor 0: up to k tokens whatever the match length; no probability cut
        # inside the tree (its probabilities are cumulative), the cut is ours below.
        draft = self._tree.speculate_ndarray(tail, k, 0.0, float(k), 0.0, False)
        token_ids = draft.token_ids
        if not token_ids:
            return NO_DRAFT
        cumulative = draft.probs
        keep = len(cumulative)
        while keep and cumulative[keep - 1] < min_prob:
            keep -= 1
        if keep == 0:
            return NO_DRAFT
        probs = np.array(cumulative[:keep], dtype=np.float64)
        probs[1:] /= probs[:-1].copy()
        return CacheDraft(np.array(token_ids[:keep], dtype=np.int64), probs, int(draft.match_len))

    def check_invariants(self) -> None:
        assert self._tree.num_seqs() == sum(1 for s in self._sequences.values() if s.size)
        assert self._tree_ids.keys() == self._sequences.keys()
        assert self.num_nodes == sum(self._nodes(s) for s in self._sequences.values())
        assert self.num_nodes <= self.max_nodes or len(self._sequences) <= 1
        # Not the tree's own check_integrity(): after it, remove() leaves the sequence in
        # the tree (arctic-inference 0.3.0); the tests compare drafts with a naive scan.

    def save(self, path: str | Path) -> None:
        save_sequences(path, self._sequences, self.max_depth, self.max_nodes)

    @classmethod
    def load(cls, path: str | Path, max_nodes: int | None = None) -> "NativeSuffixCache":
        max_depth, saved_max_nodes, sequences = load_sequences(path)
        cache = cls(max_depth, max_nodes or saved_max_nodes)
        for seq_id, seq in sequences:
            cache.insert(seq_id, seq)
        return cache


def make_cache(max_nodes: int, path: str | Path | None = None) -> DraftCache:
    """The cross-request cache: on arctic's compiled tree where installed, else the Python
    trie; loaded from `path` when given."""
    kind: type[NativeSuffixCache] | type[SuffixTrieCache] = NativeSuffixCache if native_available() else SuffixTrieCache
    return kind.load(path, max_nodes=max_nodes) if path is not None else kind(max_nodes=max_nodes)
