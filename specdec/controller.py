"""Drives one proposer + the adaptive-K policy for many requests, recording what happened.

The same controller runs inside vLLM's worker (through the custom proposer) and inside the
replay simulator, so both take identical decisions for identical token sequences.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from specdec.config import SpecConfig
from specdec.drafting.base import Proposer
from specdec.drafting.hybrid import HybridProposer
from specdec.drafting.ngram import NgramProposer
from specdec.drafting.suffix_cache import SuffixTrieCache
from specdec.policy import AdaptiveK, KState
from specdec.stats import RequestTrace


@dataclasses.dataclass
class _Live:
    state: KState
    trace: RequestTrace
    pending_draft: int = 0  # tokens drafted last step, awaiting verification


def default_proposer(config: SpecConfig) -> Proposer:
    """specdec's proposer: own-text lookup + cross-request cache (or lookup alone)."""
    if not config.cache:
        return NgramProposer(config.ngram_min, config.lookup_max)
    cache = SuffixTrieCache(max_nodes=config.cache_max_nodes)
    return HybridProposer(cache, config.ngram_min, config.lookup_max, config.cache_min_prob)


class DraftController:
    """Per-request drafting with adaptive K. Not thread-safe; one per engine worker."""

    def __init__(self, config: SpecConfig, proposer: Proposer | None = None) -> None:
        self.config = config
        self.proposer = proposer or default_proposer(config)
        self.policy = AdaptiveK(config.policy, config.k_max)
        self._live: dict[str, _Live] = {}

    def step(self, req_id: str, tokens: np.ndarray, num_accepted: int) -> np.ndarray:
        """One decode step of `req_id`: learn from the last draft, then draft again.

        `tokens` is the request's whole sequence so far (prompt + verified output);
        `num_accepted` is how many tokens of the previous draft the target accepted.
        """
        live = self._live.get(req_id)
        if live is None:
            live = _Live(self.policy.new_state(), RequestTrace.empty(self.config.k_max))
            self._live[req_id] = live
        if live.pending_draft:
            num_accepted = min(num_accepted, live.pending_draft)
            self.policy.observe(live.state, live.pending_draft, num_accepted)
            live.trace.record_verified(live.pending_draft, num_accepted)
        k = self.policy.next_k(live.state)
        draft = self.proposer.propose(req_id, tokens, k) if k > 0 else tokens[:0]
        assert draft.shape[0] <= k, (draft.shape[0], k)
        live.trace.record_step(k, int(draft.shape[0]))
        live.pending_draft = int(draft.shape[0])
        return draft

    def finish(self, req_id: str) -> RequestTrace | None:
        """The request left the batch: return its trace and forget it.

        A draft still pending at that point was never verified and is not counted.
        """
        live = self._live.pop(req_id, None)
        self.proposer.forget(req_id)
        return None if live is None else live.trace

    def active_ids(self) -> list[str]:
        return list(self._live)
