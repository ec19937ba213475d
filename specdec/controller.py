"""Drives one proposer + the adaptive-K policy for many requests, recording what happened.

The same controller runs inside vLLM's worker (through the custom proposer) and inside the
replay simulator, so both take identical decisions for identical token sequences.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from specdec.budget import (
    AcceptanceEstimate,
    StepCostModel,
    allocate_drafts,
    first_draft_threshold,
    geometric_gains,
)
from specdec.config import SpecConfig
from specdec.drafting.base import Proposer
from specdec.drafting import ngram
from specdec.drafting.hybrid import HybridProposer
from specdec.drafting.ngram import NgramProposer
from specdec.drafting.native_cache import make_cache
from specdec.policy import AdaptiveK, KState
from specdec.stats import RequestTrace


_NO_GAINS = np.zeros(0)  # a row without a draft: nothing to allocate


@dataclasses.dataclass
class _Live:
    state: KState
    trace: RequestTrace
    acceptance: AcceptanceEstimate = dataclasses.field(default_factory=AcceptanceEstimate)
    pending_draft: int = 0  # tokens drafted last step, awaiting verification


def default_proposer(config: SpecConfig) -> Proposer:
    """specdec's proposer: own-text lookup + cross-request cache (or lookup alone)."""
    ngram.warm_up()  # compile the matcher now, not in the first (timed) step
    if not config.cache:
        return NgramProposer(config.lookup_min, config.lookup_max)
    path = config.cache_file if config.cache_file and Path(config.cache_file).exists() else None
    cache = make_cache(config.cache_max_nodes, path)
    return HybridProposer(cache, config.lookup_min, config.lookup_max, config.cache_min_prob)


class DraftController:
    """Per-request drafting with adaptive K. Not thread-safe; one per engine worker."""

    # Per-request acceptance: counts decay by this per verified draft, and are shrunk
    # towards the run's overall rate with this many pseudo-drafts.
    ACCEPTANCE_DECAY = 0.9
    PRIOR_WEIGHT = 2.0
    MAX_TOKEN_GAIN = 0.99  # no draft token is ever taken as certain
    LOOKUP_DECAY = 0.9  # the drafter's time per row: a moving average over steps

    def __init__(self, config: SpecConfig, proposer: Proposer | None = None) -> None:
        self.config = config
        self.proposer = proposer or default_proposer(config)
        self.policy = AdaptiveK(config.policy, config.k_max)
        self._live: dict[str, _Live] = {}
        self._overall = AcceptanceEstimate()
        # Thread CPU seconds the proposer takes per row looked up (budget mode): the
        # accelerator waits for it, so a lookup must pay for its own time too.
        self.lookup_s = 0.0

    def step(self, req_id: str, tokens: np.ndarray, num_accepted: int) -> np.ndarray:
        """One decode step of `req_id`: learn from the last draft, then draft again.

        `tokens` is the request's whole sequence so far (prompt + verified output);
        `num_accepted` is how many tokens of the previous draft the target accepted.
        """
        return self.step_batch([(req_id, tokens, num_accepted)])[0]

    def step_batch(
        self, rows: Sequence[tuple[str, np.ndarray, int]], cost: StepCostModel | None = None
    ) -> list[np.ndarray]:
        """`step` for every row of one batch. With a cost model each row first drafts up to
        its K, then the batch budget keeps the positions worth verifying (specdec.budget)."""
        lives = [self._observe(req_id, num_accepted) for req_id, _, num_accepted in rows]
        ks = [self.policy.next_k(live.state) for live in lives]
        # Context the rows hold in the KV cache: all but the last token (it is scheduled next).
        num_kv_tokens = sum(max(int(tokens.shape[0]) - 1, 0) for _, tokens, _ in rows)
        if cost is not None:
            ks = self._skip_unaffordable(lives, ks, cost, num_kv_tokens)
        # Called with k = 0 too: a proposer may keep the sequence (the cache learns it at the end).
        started = time.thread_time()
        drafts = [self.proposer.propose(req_id, tokens, k) for (req_id, tokens, _), k in zip(rows, ks, strict=True)]
        if cost is not None:
            self._time_lookups(time.thread_time() - started, sum(1 for k in ks if k > 0))
            gains = [self._gains(req_id, live, draft) if draft.shape[0] else _NO_GAINS
                     for (req_id, _, _), live, draft in zip(rows, lives, drafts)]
            ks = allocate_drafts(gains, cost, num_kv_tokens)
            drafts = [draft[:k] for draft, k in zip(drafts, ks)]
        for live, k, draft in zip(lives, ks, drafts, strict=True):
            assert draft.shape[0] <= k, (draft.shape[0], k)
            live.trace.record_step(k, int(draft.shape[0]))
            live.pending_draft = int(draft.shape[0])
        return drafts

    def _time_lookups(self, seconds: float, num_looked_up: int) -> None:
        if not num_looked_up:
            # Not refreshed, the estimate fades, so one slow spell cannot stop lookups for good.
            self.lookup_s *= self.LOOKUP_DECAY
            return
        per_row = seconds / num_looked_up
        self.lookup_s = per_row if self.lookup_s == 0.0 else (
            self.LOOKUP_DECAY * self.lookup_s + (1 - self.LOOKUP_DECAY) * per_row)

    def _skip_unaffordable(
        self, lives: Sequence[_Live], ks: list[int], cost: StepCostModel, num_kv_tokens: int
    ) -> list[int]:
        """K = 0 for rows whose most confident token could not pay for itself and for its
        lookup in this step: the budget would cut their whole draft, or the lookup would cost
        more than it brings (at large batches on a fast accelerator a lookup costs about as
        much as a row's share of the forward)."""
        best_confidence = getattr(self.proposer, "best_confidence", None)
        if best_confidence is None:
            return ks
        threshold = first_draft_threshold(len(lives), cost, num_kv_tokens, self.lookup_s)
        ceiling = min(best_confidence(), self.MAX_TOKEN_GAIN)
        overall = self._overall_rate()
        return [
            k if ceiling * self._relative_acceptance(live, overall) > threshold else 0
            for live, k in zip(lives, ks, strict=True)
        ]

    def _relative_acceptance(self, live: _Live, overall: float) -> float:
        """How this request's drafts fare against the run's (1.0: like the run)."""
        return live.acceptance.rate(overall, self.PRIOR_WEIGHT) / overall

    def acceptance_rate(self, live: _Live) -> float:
        return live.acceptance.rate(self._overall_rate(), self.PRIOR_WEIGHT)

    def _overall_rate(self) -> float:
        return self._overall.rate(prior=0.5, prior_weight=1.0)

    def _gains(self, req_id: str, live: _Live, draft: np.ndarray) -> np.ndarray:
        """Probability that each draft position is accepted: the drafter's per-token
        confidence where it has one, scaled by how this request fares against the run."""
        confidence = getattr(self.proposer, "confidence", None)
        if confidence is None:
            return geometric_gains(self.acceptance_rate(live), draft.shape[0])
        per_token = confidence(req_id)[: draft.shape[0]] * self._relative_acceptance(live, self._overall_rate())
        return np.cumprod(np.minimum(per_token, self.MAX_TOKEN_GAIN))  # both factors are >= 0

    def _observe(self, req_id: str, num_accepted: int) -> _Live:
        live = self._live.get(req_id)
        if live is None:
            live = _Live(self.policy.new_state(), RequestTrace.empty(self.config.k_max))
            self._live[req_id] = live
        if live.pending_draft:
            num_accepted = min(num_accepted, live.pending_draft)
            self.policy.observe(live.state, live.pending_draft, num_accepted)
            live.trace.record_verified(live.pending_draft, num_accepted)
            live.acceptance.observe(live.pending_draft, num_accepted, self.ACCEPTANCE_DECAY)
            self._overall.observe(live.pending_draft, num_accepted, 1.0)
            feedback = getattr(self.proposer, "feedback", None)
            if feedback is not None:
                feedback(req_id, live.pending_draft, num_accepted)
        return live

    def finish(self, req_id: str) -> RequestTrace | None:
        """The request left the batch: return its trace and forget it.

        A draft still pending at that point was never verified and is not counted.
        """
        live = self._live.pop(req_id, None)
        self.proposer.forget(req_id)
        return None if live is None else live.trace

    def save_cache(self, path: str) -> int:
        """Write the cross-request cache to `path`; returns the sequences written (0: no cache)."""
        cache = getattr(self.proposer, "cache", None)
        if cache is None or not hasattr(cache, "save"):  # a baseline's cache (arctic's) is not ours
            return 0
        cache.save(path)
        return len(cache)

    def active_ids(self) -> list[str]:
        return list(self._live)
