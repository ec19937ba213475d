"""Per-prompt history: earlier completions of the same prompt, kept across runs.

Per prompt digest (prompt_digest), the output tokens of earlier finished requests, oldest
first. Two bounds: at most `per_prompt` completions per prompt (a prompt's oldest goes
first), and at most `max_tokens` tokens over all prompts (beyond it the globally oldest
completion goes, whatever its prompt: first in, first out). Both bounds are hard: a
completion longer than `max_tokens` is not kept. The cache file stores the history (format
version 3); completions that came from the file are marked, because only those seed a
prompt group when it is created (the run's own completions are group members already).
"""

from __future__ import annotations

import dataclasses
from collections import OrderedDict, deque

import numpy as np

from specdec.drafting.cache_file import CacheContents

DEFAULT_MAX_TOKENS = 1_000_000
DEFAULT_PER_PROMPT = 16


@dataclasses.dataclass(frozen=True)
class _Completion:
    digest: int
    tokens: np.ndarray  # [num_output_tokens] int64
    from_file: bool


class PromptHistory:
    """Completions per prompt digest, bounded per prompt and in tokens over all prompts."""

    def __init__(self, max_tokens: int = DEFAULT_MAX_TOKENS, per_prompt: int = DEFAULT_PER_PROMPT) -> None:
        if max_tokens < 0 or per_prompt < 0:
            raise ValueError(f"history bounds must be >= 0 (max_tokens={max_tokens}, per_prompt={per_prompt})")
        self.max_tokens = max_tokens
        self.per_prompt = per_prompt
        self.num_tokens = 0
        self._next_id = 0
        self._completions: OrderedDict[int, _Completion] = OrderedDict()  # id -> completion, oldest first
        self._by_prompt: dict[int, deque[int]] = {}  # digest -> its completions' ids, oldest first

    def __len__(self) -> int:
        return len(self._completions)

    def add(self, digest: int, completion: np.ndarray, from_file: bool = False) -> None:
        """Keep `completion` ([num_output_tokens]) as `digest`'s newest, then apply the bounds."""
        entry_id = self._next_id
        self._next_id += 1
        tokens = np.array(completion, dtype=np.int64)
        self._completions[entry_id] = _Completion(digest, tokens, from_file)
        self._by_prompt.setdefault(digest, deque()).append(entry_id)
        self.num_tokens += tokens.size
        mine = self._by_prompt[digest]
        while len(mine) > self.per_prompt:
            self._remove(mine[0])
        while self.num_tokens > self.max_tokens:
            self._remove(next(iter(self._completions)))

    def _remove(self, entry_id: int) -> None:
        entry = self._completions.pop(entry_id)
        self.num_tokens -= entry.tokens.size
        ids = self._by_prompt[entry.digest]
        ids.remove(entry_id)
        if not ids:
            del self._by_prompt[entry.digest]

    def completions(self, digest: int, from_file_only: bool = False) -> list[np.ndarray]:
        """`digest`'s completions, oldest first (only those loaded from a file, if asked)."""
        entries = (self._completions[i] for i in self._by_prompt.get(digest, ()))
        return [e.tokens for e in entries if e.from_file or not from_file_only]

    def entries(self) -> list[tuple[int, np.ndarray]]:
        """(digest, completion) of every kept completion, globally oldest first."""
        return [(e.digest, e.tokens) for e in self._completions.values()]

    def check_invariants(self) -> None:
        assert self.num_tokens == sum(e.tokens.size for e in self._completions.values())
        assert self.num_tokens <= self.max_tokens
        assert sum(len(ids) for ids in self._by_prompt.values()) == len(self._completions)
        for digest, ids in self._by_prompt.items():
            assert 0 < len(ids) <= self.per_prompt
            assert list(ids) == sorted(ids) and all(self._completions[i].digest == digest for i in ids)


def with_history(contents: CacheContents, history: list[tuple[int, np.ndarray]]) -> CacheContents:
    """`contents` with `history` ((digest, completion), oldest first) as the history."""
    tokens = [np.asarray(c) for _, c in history]
    return dataclasses.replace(
        contents, history_digests=np.array([d for d, _ in history], dtype=np.uint64),
        history_lengths=np.array([t.size for t in tokens], dtype=np.int64),
        history_tokens=np.concatenate(tokens).astype(np.int32) if tokens else np.zeros(0, dtype=np.int32))
