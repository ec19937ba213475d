"""Test adapters: the compiled drafter and cache (`specdec_native`) behind the oracles'
interface, so the equivalence tests drive both alike.

`NativeHybridProposer` drafts exactly what `HybridProposer` over a `SuffixTrieCache` drafts
(tests/unit/test_native_drafter.py checks it on random and real token streams), with each
request's own-text index kept up to date as tokens arrive, prompt groups, the live index and
the per-prompt history as compacted tries (multi_index.h), the cross-request cache as a
compacted suffix tree over a compact token store, and one call per engine step for the whole
batch (`feedback_batch`, then `propose_batch`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from oracles.base import DraftBatch, TokenRows
from specdec.drafting.cache_file import CacheContents, read_contents, write_contents
from specdec.native import NativeDrafterMissing, load_core
from oracles import live_text
from oracles.live_text import DEFAULT_GROUP_MAX_TOKENS
from oracles.prompt_history import DEFAULT_MAX_TOKENS as DEFAULT_HISTORY_MAX_TOKENS
from oracles.prompt_history import DEFAULT_PER_PROMPT as DEFAULT_HISTORY_PER_PROMPT
from oracles.suffix_cache import DEFAULT_MAX_DEPTH, DEFAULT_MAX_TOKENS, CacheDraft, cache_sizes

def _as_list(ids: Sequence[str]) -> list[str]:
    return ids if isinstance(ids, list) else list(ids)


def _ints(values: Sequence[int]) -> list[int]:
    return values.tolist() if isinstance(values, np.ndarray) else list(values)


def _int32(tokens: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(tokens, dtype=np.int32)


def prompt_lengths(num_prompt_tokens: Sequence[int] | None, num_rows: int) -> list[int]:
    """The core's form of per-row prompt lengths: [] for unknown (None), else one int per row."""
    if num_prompt_tokens is None:
        return []
    lengths = _ints(num_prompt_tokens)
    if len(lengths) != num_rows:
        raise ValueError(f"{len(lengths)} prompt lengths for {num_rows} rows")
    if any(n < 0 for n in lengths):
        raise ValueError(f"negative prompt length in {lengths}")
    return lengths


def prompt_digest(tokens: np.ndarray) -> int:
    """The core's FNV-1a 64 of a prompt (the reference: specdec/drafting/prompt_digest.py)."""
    tokens = np.asarray(tokens)
    return load_core().prompt_digest(tokens if tokens.dtype in (np.int32, np.int64) else tokens.astype(np.int64))


class NativeSuffixCache:
    """The compiled cross-request cache with the reference's interface (SuffixTrieCache)."""

    def __init__(self, core_cache) -> None:  # a specdec_native.SuffixCache
        self._cache = core_cache

    @classmethod
    def create(cls, max_depth: int = DEFAULT_MAX_DEPTH, max_tokens: int = DEFAULT_MAX_TOKENS) -> "NativeSuffixCache":
        return cls(load_core().SuffixCache(max_depth, max_tokens))

    def __len__(self) -> int:
        return len(self._cache)

    def __contains__(self, seq_id: str) -> bool:
        return seq_id in self._cache

    @property
    def max_depth(self) -> int:
        return self._cache.max_depth

    @property
    def max_tokens(self) -> int:
        return self._cache.max_tokens

    @property
    def num_tokens(self) -> int:
        return self._cache.num_tokens

    @property
    def num_nodes(self) -> int:
        return self._cache.num_nodes

    def insert(self, seq_id: str, tokens: np.ndarray) -> None:
        self._cache.insert(seq_id, _int32(tokens))

    def remove(self, seq_id: str) -> None:
        if not self._cache.remove(seq_id):
            raise KeyError(seq_id)

    def speculate(self, context: np.ndarray, max_draft_tokens: int, min_prob: float = 0.0) -> CacheDraft:
        tokens, probs, match_len = self._cache.speculate(_int32(context), max_draft_tokens, min_prob)
        return CacheDraft(tokens, probs, match_len)

    def dump(self) -> list[tuple[tuple[int, ...], int]]:
        """Every substring the cache counts, with its count (sorted; for tests)."""
        return [(tuple(path), count) for path, count in self._cache.dump()]

    def check_invariants(self) -> None:
        try:
            self._cache.check_invariants()
        except RuntimeError as exc:
            raise AssertionError(str(exc)) from exc

    def contents(self) -> CacheContents:
        ids, tokens, lengths = self._cache.sequences()
        return CacheContents(self.max_depth, list(ids), tokens, lengths)

    def load_contents(self, contents: CacheContents) -> None:
        """Insert a file's sequences, oldest first (the budget evicts the oldest)."""
        for seq_id, seq in zip(contents.ids, contents.sequences(), strict=True):
            self.insert(seq_id, seq)

    def save(self, path: str | Path, tokenizer: str | None = None) -> None:
        write_contents(path, self.contents(), tokenizer)


class NativeHybridProposer:
    """The compiled drafter: same drafts, confidences and cache as `HybridProposer`."""

    def __init__(
        self,
        max_tokens: int = DEFAULT_MAX_TOKENS,
        max_depth: int = DEFAULT_MAX_DEPTH,
        n_min: int = 2,
        n_max: int = 16,
        min_prob: float = 0.1,
        min_cache_match: int = 1,
        group_max_tokens: int = DEFAULT_GROUP_MAX_TOKENS,
        history_max_tokens: int = DEFAULT_HISTORY_MAX_TOKENS,
        history_per_prompt: int = DEFAULT_HISTORY_PER_PROMPT,
    ) -> None:
        if not 1 <= n_min <= n_max <= 255:
            raise ValueError(f"need 1 <= n_min ({n_min}) <= n_max ({n_max}) <= 255")
        if min(group_max_tokens, history_max_tokens, history_per_prompt) < 0:
            raise ValueError("group and history bounds must be >= 0")
        self._core = load_core().Drafter(
            cache_max_depth=max_depth, cache_max_tokens=max_tokens, lookup_min=n_min, lookup_max=n_max,
            cache_min_prob=min_prob, min_cache_match=min_cache_match, group_max_tokens=group_max_tokens,
            history_max_tokens=history_max_tokens, history_per_prompt=history_per_prompt,
            live_slack_tokens=live_text.LIVE_SLACK_TOKENS)  # read now: tests make it small
        self.group_max_tokens = group_max_tokens
        self.history_max_tokens = history_max_tokens
        self.cache = NativeSuffixCache(self._core.cache)
        self._last_confidence: dict[str, np.ndarray] = {}  # per-row API only
        self._bound_tokens: np.ndarray | None = None  # the TokenRows buffer the core reads
        self._bind_outputs(1, 1)

    @classmethod
    def from_file(
        cls, path: str | Path, max_tokens: int = DEFAULT_MAX_TOKENS, tokenizer: str | None = None, **kwargs
    ) -> "NativeHybridProposer":
        """A drafter whose cache and history start with a saved cache file's (CacheFileError:
        see cache_file.read_contents)."""
        contents = read_contents(path, tokenizer)
        proposer = cls(max_tokens, contents.max_depth, **kwargs)
        proposer.load_contents(contents)
        return proposer

    def feedback_batch(self, req_ids: Sequence[str], num_drafted: Sequence[int], num_accepted: Sequence[int]) -> None:
        """Row i's last draft: its first `num_drafted[i]` tokens were verified, `num_accepted[i]`
        accepted (both [num_rows])."""
        self._core.feedback_rows(_as_list(req_ids), _ints(num_drafted), _ints(num_accepted))

    def propose_batch(
        self,
        req_ids: Sequence[str],
        tokens: Sequence[np.ndarray],
        max_draft_tokens: Sequence[int],
        num_prompt_tokens: Sequence[int] | None = None,
    ) -> DraftBatch:
        """Row i: tokens[i] ([num_tokens_i], int32 or int64) is request req_ids[i]'s sequence so
        far (it only grows between calls: the tokens not seen before are indexed); drafts at
        most max_draft_tokens[i] tokens ([num_rows]). Every row's tokens are taken in before any row drafts;
        num_prompt_tokens[i] (None: unknown) counts at a request's first sight (see
        HybridProposer.propose_batch). One call for the whole batch; with `TokenRows` (vLLM's
        own buffer, bound once) no array is converted on the way in."""
        most = _ints(max_draft_tokens)
        prompts = prompt_lengths(num_prompt_tokens, len(most))
        if isinstance(tokens, TokenRows):
            return self._propose_rows(_as_list(req_ids), tokens, most, prompts)
        drafts, lengths, confidence = self._core.propose_batch(_as_list(req_ids), list(tokens),
                                                               np.asarray(most, dtype=np.int64), prompts)
        return DraftBatch(drafts, lengths, confidence)

    @property
    def core(self):  # the specdec_native.Drafter (the compiled controller drives it)
        return self._core

    def bind_tokens(self, token_ids: np.ndarray) -> None:
        """Read rows from `token_ids` (vLLM's buffer: the same array every step) from now on."""
        if token_ids is not self._bound_tokens:
            self._core.bind_tokens(token_ids)
            self._bound_tokens = token_ids

    def _propose_rows(self, req_ids: list[str], rows: TokenRows, most: list[int], prompts: list[int]) -> DraftBatch:
        self.bind_tokens(rows.token_ids)
        num_rows = len(req_ids)
        width = max(most, default=0)
        if num_rows > self._out_lengths.shape[0] or width > self._out_tokens.shape[1]:
            self._bind_outputs(max(num_rows, self._out_lengths.shape[0]), max(width, self._out_tokens.shape[1]))
        self._core.propose_rows(req_ids, rows.buffer_rows.tolist(), rows.lengths.tolist(), most, prompts)
        # copies: the bound outputs are overwritten by the next step
        return DraftBatch(self._out_tokens[:num_rows, :width].copy(), self._out_lengths[:num_rows].copy(),
                          self._out_conf[:num_rows, :width].copy())

    def _bind_outputs(self, num_rows: int, width: int) -> None:
        self._out_tokens = np.zeros((num_rows, width), dtype=np.int64)
        self._out_lengths = np.zeros(num_rows, dtype=np.int64)
        self._out_conf = np.zeros((num_rows, width))
        self._core.bind_outputs(self._out_tokens, self._out_lengths, self._out_conf)

    def propose(self, req_id: str, tokens: np.ndarray, max_draft_tokens: int,
                num_prompt_tokens: int | None = None) -> np.ndarray:
        prompt = None if num_prompt_tokens is None else [num_prompt_tokens]
        batch = self.propose_batch([req_id], [np.asarray(tokens)], [max(max_draft_tokens, 0)], prompt)
        self._last_confidence[req_id] = batch.row_confidence(0).copy()
        return batch.draft(0).copy()

    def confidence(self, req_id: str) -> np.ndarray:
        return self._last_confidence.get(req_id, np.zeros(0))

    def feedback(self, req_id: str, num_drafted: int, num_accepted: int) -> None:
        self.feedback_batch([req_id], np.array([num_drafted]), np.array([num_accepted]))

    def best_confidence(self) -> float:
        return self._core.best_confidence()

    def forget(self, req_id: str) -> None:
        self._last_confidence.pop(req_id, None)
        self._core.forget(req_id)

    def take_source_counts(self, req_ids: Sequence[str]) -> dict[str, dict[str, tuple[int, int]]]:
        """Per request of `req_ids` with any: its (drafted tokens verified, accepted) per source
        (own, cache, sibling, history, live) since the last take, then zeroed."""
        return self._core.take_source_counts(_as_list(req_ids))

    def history_entries(self) -> list[tuple[int, np.ndarray]]:
        """(prompt digest, completion) of every kept completion, oldest first."""
        digests, lengths, tokens = self._core.history()
        ends = np.cumsum(lengths)
        return [(int(d), tokens[end - n : end].astype(np.int64))
                for d, end, n in zip(digests, ends, lengths, strict=True)]

    def group_digests(self) -> list[int]:
        """The prompt groups' digests, least recently joined first (tests)."""
        return list(self._core.group_digests())

    def state_sizes(self) -> dict[str, tuple[int, int | None]]:
        """(size, bound) of each structure; bound None: per request, empty between calls. The
        core keeps a request's own-text index and last draft's buckets in one record."""
        core = self._core
        return {"own_sequences": (core.num_requests, None), "finished_counts": (core.num_finished_counts, None),
                "row_confidences": (len(self._last_confidence), None), **cache_sizes(self.cache),
                "shared_members": (core.num_members, None),
                "live_index_tokens": (core.live_index_tokens, 2 * core.live_request_tokens + core.live_slack_tokens),
                "group_tokens": (core.group_tokens, self.group_max_tokens + core.live_group_tokens),
                "history_tokens": (core.history_tokens, self.history_max_tokens)}

    def contents(self) -> CacheContents:
        """What the cache file holds: the cache's sequences and the history, oldest first."""
        digests, lengths, tokens = self._core.history()
        return dataclasses.replace(self.cache.contents(), history_digests=digests, history_lengths=lengths,
                                   history_tokens=tokens)

    def load_contents(self, contents: CacheContents) -> None:
        """Start from a file's contents: its sequences into the cache, its completions into
        the history (as loaded ones: they seed a prompt's group when it is created)."""
        self.cache.load_contents(contents)
        self._core.load_history(np.ascontiguousarray(contents.history_digests, dtype=np.uint64),
                                np.ascontiguousarray(contents.history_lengths, dtype=np.int64),
                                _int32(contents.history_tokens))

    def save_cache(self, path: str, tokenizer: str | None = None) -> int:
        """Write the cross-request cache and the history to `path`; returns the sequences written."""
        write_contents(path, self.contents(), tokenizer)
        return len(self.cache)


def native_available() -> bool:
    try:
        load_core()
    except NativeDrafterMissing:
        return False
    return True


def lookup_seconds(controller) -> float:
    """A specdec.controller.DraftController's drafter time per row looked up (thread CPU
    seconds, a moving average): the budget makes a lookup pay for its own time too."""
    return controller._core.lookup_s


def fix_lookup_time(controller, seconds: float) -> None:
    """Count every lookup of a DraftController as `seconds` long instead of timing it."""
    controller._core.fixed_lookup_s = seconds
