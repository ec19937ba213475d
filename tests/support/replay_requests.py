"""Replay tests' helpers (no engine): synthetic greedy references, each prompt ending with a phrase its
continuation repeats (own-text lookup and the cross-request cache both find drafts), and the replay one request
at a time."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from bench.replay import Drafter, ReplayRequest, ReplayResult, simulate

UNBOUNDED = 1 << 30  # a token budget no step reaches


def replay(requests: Sequence[ReplayRequest], drafter: Drafter) -> list[ReplayResult]:
    """One request at a time through one drafter (its state carried over, as in an engine)."""
    return simulate(requests, drafter, batch_size=1, max_batched_tokens=UNBOUNDED).results


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
