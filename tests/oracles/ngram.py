"""Prompt-lookup n-gram matching over a request's own tokens, naive (the oracle of
packaging/specdec_native/src/own_index.h).

Find the longest n in [n_min, n_max] such that the last n tokens occurred earlier in the
sequence; among matches of that length take the most recent one.
"""

from __future__ import annotations

import numpy as np


def ngram_match(tokens: np.ndarray, n_min: int, n_max: int) -> tuple[int, int]:
    """(index of the last token of the chosen earlier match, match length); (-1, 0) if none.
    Candidates are the earlier positions holding the last token; each extra step of match
    length filters them."""
    length = int(tokens.shape[0])
    if length < n_min + 1:
        return -1, 0
    ends = np.flatnonzero(tokens[: length - 1] == tokens[length - 1])
    if ends.size == 0:
        return -1, 0
    best_len, best_end = 1, int(ends[-1])
    for m in range(1, min(n_max, length - 1)):
        ends = ends[ends >= m]
        ends = ends[tokens[ends - m] == tokens[length - 1 - m]]
        if ends.size == 0:
            break
        best_len, best_end = m + 1, int(ends[-1])
    return (best_end, best_len) if best_len >= n_min else (-1, 0)


def propose_ngram(tokens: np.ndarray, n_min: int, n_max: int, max_draft_tokens: int) -> np.ndarray:
    """Up to `max_draft_tokens` tokens continuing `tokens` by n-gram lookup (empty if no match)."""
    end, match_len = ngram_match(tokens, n_min, n_max)
    return tokens[end + 1 : end + 1 + max(max_draft_tokens, 0)] if match_len else tokens[:0]


def propose_ngram_naive(tokens: list[int], n_min: int, n_max: int, max_draft_tokens: int) -> list[int]:
    """`propose_ngram` written out as the definition says (the oracle's own check)."""
    length = len(tokens)
    if max_draft_tokens <= 0:
        return []
    for n in range(min(n_max, length - 1), n_min - 1, -1):
        suffix = tokens[length - n :]
        for start in range(length - n - 1, -1, -1):
            if tokens[start : start + n] == suffix:
                return tokens[start + n : start + n + max_draft_tokens]
    return []
