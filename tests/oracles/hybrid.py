"""Our proposer (the Python reference): n-gram lookup in the request's own text, the text of
other requests of the same prompt (siblings) and of earlier runs (history), the text every
running request writes (the live index), and the cross-request cache of finished requests.

Each step up to five candidates compete, in this fixed order: own text (the continuation of
the longest earlier match in the request's own tokens), the prompt group (a sibling's or a
history completion's continuation, whichever the group's lookup finds), the live index, and
the cache (the most frequent continuation, with per-token probabilities). Every drafted
token is filed under an evidence bucket (own text, sibling, history and live by match
length; cache by match length and probability) whose acceptance rate is learned from
verification (`ConfidenceTable`). The first candidate present is the best so far; a later
one replaces it when its expected accepted tokens are higher, or, where the table cannot
tell them apart, when its match is strictly longer (so own text wins ties: it is the most
specific evidence). A cache draft is cut where its cumulative probability drops below
`min_prob`, so weak evidence drafts fewer tokens. Groups, the live index and the history are
in live_text; a finished request's tokens go into the cache, and its output into its
prompt's history, when the controller forgets it.

The batch budget sizes drafts with each drafted token's confidence (`confidence`).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from oracles.base import DraftBatch
from specdec.drafting.cache_file import CacheContents, write_contents
from oracles.confidence import (
    BUCKET_SOURCE,
    SOURCES,
    ConfidenceTable,
    cache_buckets,
    own_bucket,
    shared_bucket,
)
from oracles.live_text import DEFAULT_GROUP_MAX_TOKENS, LiveText
from oracles.ngram import ngram_match
from oracles.prompt_history import DEFAULT_MAX_TOKENS, DEFAULT_PER_PROMPT, PromptHistory, with_history
from oracles.suffix_cache import SuffixTrieCache, cache_sizes

_EMPTY = np.zeros(0, dtype=np.int64)
_NONE = (_EMPTY, _EMPTY)
_TIE = 1e-9  # expected accepted tokens closer than this: the table cannot tell them apart

# A candidate draft: (tokens [n] int64, buckets [n] int64, match length)
_Candidate = tuple[np.ndarray, np.ndarray, int]


class HybridProposer:
    def __init__(
        self,
        cache: SuffixTrieCache,
        n_min: int = 2,
        n_max: int = 16,
        min_prob: float = 0.1,
        min_cache_match: int = 1,
        group_max_tokens: int = DEFAULT_GROUP_MAX_TOKENS,
        history_max_tokens: int = DEFAULT_MAX_TOKENS,
        history_per_prompt: int = DEFAULT_PER_PROMPT,
        live_slack_tokens: int | None = None,
    ) -> None:
        self.cache = cache
        self.n_min = n_min
        self.n_max = n_max
        self.min_prob = min_prob
        self.min_cache_match = min_cache_match
        self.history = PromptHistory(history_max_tokens, history_per_prompt)
        self.text = LiveText(n_max, group_max_tokens, self.history, live_slack_tokens)
        self._sequences: dict[str, np.ndarray] = {}
        self.table = ConfidenceTable()
        self._buckets: dict[str, np.ndarray] = {}  # evidence bucket of each token of the last draft
        # per request: [drafted tokens verified, accepted] x SOURCES, not yet taken; a
        # forgotten request's nonzero ones wait in `_finished_counts` until taken
        self._counts: dict[str, np.ndarray] = {}
        self._finished_counts: dict[str, np.ndarray] = {}

    def propose_batch(
        self,
        req_ids: Sequence[str],
        tokens: Sequence[np.ndarray],
        max_draft_tokens: Sequence[int],
        num_prompt_tokens: Sequence[int] | None = None,
    ) -> DraftBatch:
        """Draft at most `max_draft_tokens[i]` tokens ([num_rows]) for request `req_ids[i]` from `tokens[i]`
        ([num_tokens_i], its whole sequence so far; a list of arrays or `TokenRows`).

        First every row's new tokens are taken in (so each row's lookups see what every
        other row of the batch wrote up to now), then each row drafts. `num_prompt_tokens`
        ([num_rows], or None: unknown) is read for a request the first time it is seen: its
        prompt is tokens[i][:num_prompt_tokens[i]] and it joins that prompt's group.

        Example (n_min 1, n_max 16, empty cache, first call), two requests of the prompt [5, 6]:

            propose_batch(["a", "b"], [[5, 6, 7, 8, 9], [5, 6, 7]], [2, 2], [2, 2])
            a: [.., 9] occurs nowhere else -> []
            b: [5, 6, 7] ends at index 2 of its sibling a, followed by [8, 9] -> [8, 9], each
            token filed under the sibling bucket of a 3-token match
        """
        rows = [self._take(req_id, tokens[i], None if num_prompt_tokens is None else int(num_prompt_tokens[i]))
                for i, req_id in enumerate(req_ids)]
        self.text.maintain()
        # Every row is in: each `propose` below only drafts (taking the same tokens again changes nothing).
        drafts = [self.propose(req_id, row, int(most))
                  for req_id, row, most in zip(req_ids, rows, max_draft_tokens, strict=True)]
        return DraftBatch.from_rows(drafts, [self.confidence(req_id) for req_id in req_ids])

    def _take(self, req_id: str, tokens: np.ndarray, num_prompt_tokens: int | None) -> np.ndarray:
        """Keep `req_id`'s sequence (a copy: vLLM reuses its buffer) and index its new tokens."""
        row = np.array(tokens, dtype=np.int64)
        self._sequences[req_id] = row
        self.text.see(req_id, row, num_prompt_tokens)
        return row

    def propose(self, req_id: str, tokens: np.ndarray, max_draft_tokens: int,
                num_prompt_tokens: int | None = None) -> np.ndarray:
        """Draft up to `max_draft_tokens` tokens continuing `tokens` (the request's whole
        sequence so far): `propose_batch` for one row.

        Example (n_min 1, n_max 16, empty cache, no other request, a fresh confidence table):

            tokens = [7, 1, 2, 3, 4, 1, 2, 3], max_draft_tokens = 3
            own text: the last 3 tokens [1, 2, 3] occurred before, ending at index 3; they
            were followed by [4, 1, 2, 3] -> draft [4, 1, 2], each token filed under the
            own-text bucket of a 3-token match
            group, live index, cache: empty, no candidate -> [4, 1, 2]

        A candidate cut short (its match sat near the end of its source) is continued by
        drafting again from `tokens` + the draft so far.

        Args:
            req_id: the request; its latest `tokens` go into the cache when it is forgotten.
            tokens: [num_tokens] prompt + output so far.
            max_draft_tokens: most tokens to draft (0: draft nothing, but keep the sequence).
            num_prompt_tokens: the prompt's length (read at the request's first call).
        """
        row = self._take(req_id, tokens, num_prompt_tokens)
        self.text.maintain()
        return self._draft(req_id, row, max_draft_tokens)

    def _draft(self, req_id: str, tokens: np.ndarray, max_draft_tokens: int) -> np.ndarray:
        if max_draft_tokens <= 0:
            self._buckets[req_id] = _EMPTY
            return _EMPTY
        draft, buckets = self._best_candidate(req_id, tokens, max_draft_tokens)
        # A draft cut short (the match sat near the end of its source) is continued by
        # drafting again from the context extended with it.
        while 0 < draft.size < max_draft_tokens:
            more, more_buckets = self._best_candidate(req_id, np.concatenate([tokens, draft]),
                                                      max_draft_tokens - draft.size)
            if more.size == 0:
                break
            draft = np.concatenate([draft, more])
            buckets = np.concatenate([buckets, more_buckets])
        self._buckets[req_id] = buckets
        return draft

    def confidence(self, req_id: str) -> np.ndarray:
        """Learned acceptance probability of each token of `req_id`'s last draft."""
        return self.table.confidence(self._buckets.get(req_id, _EMPTY))

    def best_confidence(self) -> float:
        return self.table.best()

    def feedback_batch(self, req_ids: Sequence[str], num_drafted: Sequence[int], num_accepted: Sequence[int]) -> None:
        """Row i's last draft had its first `num_drafted[i]` tokens verified, `num_accepted[i]`
        of them accepted (both [num_rows])."""
        for req_id, drafted, accepted in zip(req_ids, num_drafted, num_accepted, strict=True):
            if drafted:
                self.feedback(req_id, int(drafted), int(accepted))

    def feedback(self, req_id: str, num_drafted: int, num_accepted: int) -> None:
        """The first `num_drafted` tokens of the last draft were verified (the caller may
        have cut the draft); `num_accepted` of them were accepted."""
        buckets = self._buckets.get(req_id)
        if buckets is None:
            return
        verified = buckets[:num_drafted]
        self.table.observe(verified, num_accepted)
        sources = BUCKET_SOURCE[verified]
        counts = self._counts.setdefault(req_id, np.zeros((2, len(SOURCES)), dtype=np.int64))
        np.add.at(counts[0], sources, 1)
        np.add.at(counts[1], sources[:num_accepted], 1)

    def take_source_counts(self, req_ids: Sequence[str]) -> dict[str, dict[str, tuple[int, int]]]:
        """Per request of `req_ids` (running or forgotten) with any: its (drafted tokens
        verified, accepted) per source (own, cache, sibling, history, live) since the last
        take, then zeroed (a forgotten request's then dropped)."""
        out = {}
        for req_id in req_ids:
            counts = np.zeros((2, len(SOURCES)), dtype=np.int64)
            if req_id in self._counts:
                counts += self._counts[req_id]
                self._counts[req_id][:] = 0
            counts += self._finished_counts.pop(req_id, 0)
            if counts.any():
                out[req_id] = {s: (int(d), int(a)) for s, d, a in zip(SOURCES, counts[0], counts[1], strict=True)}
        return out

    def _best_candidate(self, req_id: str, tokens: np.ndarray,
                        max_draft_tokens: int) -> tuple[np.ndarray, np.ndarray]:
        """The chosen candidate's (tokens, buckets) for `tokens` (the context), up to
        `max_draft_tokens` of them."""
        candidates: list[_Candidate] = []
        end, own_len = ngram_match(tokens, self.n_min, self.n_max)
        if own_len:
            own = np.asarray(tokens[end + 1 : end + 1 + max_draft_tokens], dtype=np.int64)
            candidates.append((own, np.full(own.size, own_bucket(own_len), dtype=np.int64), own_len))
        for shared in self.text.candidates(req_id, tokens, max_draft_tokens, self.n_min):  # group, then live
            bucket = shared_bucket(shared.source, shared.match_len)
            candidates.append((shared.tokens, np.full(shared.tokens.size, bucket, dtype=np.int64), shared.match_len))
        cached = self.cache.speculate(tokens, max_draft_tokens, self.min_prob) if len(self.cache) else None
        if cached is not None and cached.tokens.size and cached.match_len >= self.min_cache_match:
            candidates.append((cached.tokens, cache_buckets(cached.probs, cached.match_len), cached.match_len))
        return self._choose(candidates)

    def _choose(self, candidates: list[_Candidate]) -> tuple[np.ndarray, np.ndarray]:
        """The first candidate, replaced by each later one that the table values higher or,
        in a tie, that matched strictly more tokens, counting at most n_max of them: a cache
        match longer than the lookups' reach is no more specific than a 16-token match in the
        same prompt's samples, so in a tie the earlier source (own, sibling/history, live,
        cache) keeps it. Without that cap the cache, which holds the finished siblings' text
        too and matches up to its depth, would win every tie at the start, and the sibling
        and history buckets would never be tried and learned."""
        if not candidates:
            return _NONE
        best = candidates[0]
        best_value: float | None = None  # computed once a second candidate needs it
        for candidate in candidates[1:]:
            if best_value is None:
                best_value = self.table.expected_accepted(best[1])
            value = self.table.expected_accepted(candidate[1])
            better = (value > best_value if abs(value - best_value) > _TIE
                      else min(candidate[2], self.n_max) > min(best[2], self.n_max))
            if better:
                best, best_value = candidate, value
        return best[0], best[1]

    def state_sizes(self) -> dict[str, tuple[int, int | None]]:
        """(size, bound) of each structure; bound None: per request, empty between calls."""
        return {"own_sequences": (len(self._sequences), None), "draft_buckets": (len(self._buckets), None),
                "finished_counts": (len(self._finished_counts), None), **cache_sizes(self.cache),
                **self.text.state_sizes()}

    def forget(self, req_id: str) -> None:
        """`req_id` finished: its tokens go into the cache, its output into its prompt's history."""
        self._buckets.pop(req_id, None)
        counts = self._counts.pop(req_id, None)
        if counts is not None and counts.any():
            self._finished_counts[req_id] = self._finished_counts.get(req_id, 0) + counts
        tokens = self._sequences.pop(req_id, None)
        if tokens is not None and tokens.size:
            self.cache.insert(req_id, tokens)
        self.text.forget(req_id)

    def contents(self) -> CacheContents:
        """What the cache file holds: the cache's sequences and the history, oldest first."""
        return with_history(self.cache.contents(), self.history.entries())

    def load_contents(self, contents: CacheContents) -> None:
        """Start from a file's contents: its sequences into the cache, its completions into
        the history (as loaded ones: they seed a prompt's group when it is created)."""
        self.cache.load_contents(contents)
        for digest, completion in contents.history():
            self.history.add(digest, completion, from_file=True)

    def save_cache(self, path: str, tokenizer: str | None = None) -> int:
        """Write the cross-request cache and the history to `path` (see cache_file;
        `tokenizer`: the hash its header records); returns the sequences written."""
        write_contents(path, self.contents(), tokenizer)
        return len(self.cache)
