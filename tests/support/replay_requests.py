"""Synthetic greedy references for replay tests (no engine): each prompt ends with a phrase
its continuation repeats, so own-text lookup and the cross-request cache both find drafts."""

from __future__ import annotations

import numpy as np

from bench.replay import ReplayRequest


def synthetic_requests(n: int = 12, seed: int = 0, max_tokens: int = 48) -> list[ReplayRequest]:
    rng = np.random.default_rng(seed)
    phrase = rng.integers(100, 200, size=12).tolist()
    reqs = []
    for i in range(n):
        prompt = rng.integers(0, 50, size=20).tolist() + phrase
        greedy = (phrase + rng.integers(0, 50, size=6).tolist()) * 4
        reqs.append(ReplayRequest(f"r{i}", prompt, greedy, max_tokens))
    return reqs


class Lookup:
    """Prompt lookup in the request's own tokens (the n-gram oracle): a stand-in for vLLM's
    n-gram drafter, whose numba code takes tens of seconds to import and compile."""

    def __init__(self, n_min: int, n_max: int) -> None:
        self.n_min, self.n_max = n_min, n_max

    def propose(self, req_id: str, tokens: np.ndarray, k: int) -> np.ndarray:
        from oracles.ngram import propose_ngram

        return propose_ngram(np.asarray(tokens, dtype=np.int64), self.n_min, self.n_max, k)

    def forget(self, req_id: str) -> None:
        return None
