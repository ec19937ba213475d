"""Drives one proposer + the adaptive-K policy for many requests, recording what happened.

The same controller runs inside vLLM's worker (through the custom proposer) and inside the
replay simulator, so both take identical decisions for identical token sequences.
`DraftController` is the reference; specdec's own drafter runs under its compiled twin
(specdec/native_controller.py), which takes the same decisions with no Python per row.
`make_controller` picks the one a configuration runs.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from specdec.budget import (
    AcceptanceEstimate,
    StepCostModel,
    StepSample,
    allocate_drafts,
    first_draft_thresholds,
    geometric_gains,
    row_contexts,
)
from specdec.config import SpecConfig
from specdec.default_proposer import default_proposer
from specdec.drafting.base import BatchProposer, DraftBatch, Proposer, RowByRow, TokenRows
from specdec.engines.step_timing import StepShapes
from specdec.policy import AdaptiveK, KState

_NO_GAINS = np.zeros(0)  # a row without a draft: nothing to allocate


@dataclasses.dataclass
class _Live:
    state: KState
    acceptance: AcceptanceEstimate = dataclasses.field(default_factory=AcceptanceEstimate)
    pending_draft: int = 0  # tokens drafted last step, awaiting verification
    verified: tuple[int, int] = (0, 0)  # this step: (drafted, accepted) of the last draft


def contexts_of(tokens: Sequence[np.ndarray]) -> np.ndarray:
    """Context each row holds in the KV cache for the next forward (`row_contexts`)."""
    if isinstance(tokens, TokenRows):
        return row_contexts(tokens.lengths)
    return row_contexts(np.array([row.shape[0] for row in tokens], dtype=np.int64))


def make_controller(config: SpecConfig, proposer: Proposer | None = None, tokenizer: str | None = None) -> "Controller":
    """The controller `config` runs: the compiled one for specdec's own drafter (compiled,
    with its cache), the reference for any other proposer or `--drafter python`."""
    if proposer is None and config.method == "specdec" and config.cache and config.drafter == "native":
        from specdec.native_controller import NativeDraftController

        return NativeDraftController(config, tokenizer)
    return DraftController(config, proposer, tokenizer)


class Controller:
    """What both controllers share: the per-row and per-batch entry points over
    `step_tokens`, and what the engine adapter asks of a controller besides stepping."""

    config: SpecConfig
    tokenizer: str | None
    cache_warning: str | None  # the cache file could not be used
    proposer: Any

    def step(self, req_id: str, tokens: np.ndarray, num_accepted: int) -> np.ndarray:
        """One decode step of `req_id`: learn from the last draft, then draft again.

        `tokens` is the request's whole sequence so far (prompt + verified output);
        `num_accepted` is how many tokens of the previous draft the target accepted.
        """
        return self.step_batch([(req_id, tokens, num_accepted)])[0]

    def step_batch(
        self, rows: Sequence[tuple[str, np.ndarray, int]], cost: StepCostModel | None = None
    ) -> list[np.ndarray]:
        """`step` for every row of one batch (see `step_tokens`)."""
        return self.step_tokens([r for r, _, _ in rows], [t for _, t, _ in rows], [a for _, _, a in rows], cost)

    def step_tokens(
        self,
        req_ids: list[str],
        tokens: Sequence[np.ndarray],
        num_accepted: Sequence[int],
        cost: StepCostModel | None = None,
        num_prompt_tokens: Sequence[int] | None = None,
        tail: bool = False,
    ) -> list[np.ndarray]:
        raise NotImplementedError

    def engine_step(
        self,
        req_ids: list[str],
        sampled: Sequence[Sequence[int]],
        num_tokens: np.ndarray,
        token_ids: np.ndarray,
        cost: StepCostModel | None,
        forced_k: int | None = None,
        timed: bool = False,
        num_prompt_tokens: np.ndarray | None = None,
        tail: bool = False,
    ) -> tuple[list[list[int]], StepSample | None]:
        raise NotImplementedError

    def take_source_counts(self) -> dict[str, tuple[int, int]]:
        """Per drafting source (own, cache, sibling, history, live): (drafted tokens verified,
        accepted) since the last call, then zeroed; {} when the proposer does not count them."""
        take = getattr(self.proposer, "take_source_counts", None)
        return {} if take is None else take()

    def finish(self, req_id: str) -> None:
        """The request left the batch: forget it (its tokens enter the cross-request cache).
        A draft still pending then was never verified."""
        raise NotImplementedError

    def active_ids(self) -> list[str]:
        """The live requests, in the order they arrived."""
        raise NotImplementedError

    def forget_step_rows(self) -> None:
        """The batch emptied (a generate call ended): the next step is no clean sample."""
        raise NotImplementedError

    def finish_all(self) -> None:
        """`finish` every live request, oldest first (a generate call ended: their tokens
        belong in the cache before it is saved)."""
        for req_id in self.active_ids():
            self.finish(req_id)
        self.forget_step_rows()

    def save_cache(self, path: str) -> int:
        """Write the cross-request cache to `path`; returns the sequences written (0: no cache)."""
        save = getattr(self.proposer, "save_cache", None)
        return 0 if save is None else int(save(path, self.tokenizer))


class DraftController(Controller):
    """Per-request drafting with adaptive K (the reference). Not thread-safe; one per engine
    worker."""

    # Per-request acceptance: counts decay by this per verified draft, and are shrunk
    # towards the run's overall rate with this many pseudo-drafts.
    ACCEPTANCE_DECAY = 0.9
    PRIOR_WEIGHT = 2.0
    MAX_TOKEN_GAIN = 0.99  # no draft token is ever taken as certain
    LOOKUP_DECAY = 0.9  # the drafter's time per row: a moving average over steps

    def __init__(self, config: SpecConfig, proposer: Proposer | None = None, tokenizer: str | None = None) -> None:
        """`tokenizer`: a hash of the tokenizer the token ids come from (specdec.models.
        tokenizer_digest), recorded in the cache file and checked when loading one."""
        self.config = config
        self.tokenizer = tokenizer
        self.cache_warning: str | None = None  # the cache file could not be used
        if proposer is None:
            proposer, self.cache_warning = default_proposer(config, tokenizer)
        self.proposer = proposer
        self.drafter: BatchProposer = (
            self.proposer if hasattr(self.proposer, "propose_batch") else RowByRow(self.proposer)  # type: ignore[assignment]
        )
        self.policy = AdaptiveK(config.policy, config.k_max)
        self._live: dict[str, _Live] = {}
        self._overall = AcceptanceEstimate()
        # Thread CPU seconds the proposer takes per row looked up (budget mode): the
        # accelerator waits for it, so a lookup must pay for its own time too.
        self.lookup_s = 0.0
        self.clock: Callable[[], float] = time.thread_time  # what lookups are timed with
        self.step_shapes = StepShapes()

    def engine_step(
        self,
        req_ids: list[str],
        sampled: Sequence[Sequence[int]],
        num_tokens: np.ndarray,
        token_ids: np.ndarray,
        cost: StepCostModel | None,
        forced_k: int | None = None,
        timed: bool = False,
        num_prompt_tokens: np.ndarray | None = None,
        tail: bool = False,
    ) -> tuple[list[list[int]], StepSample | None]:
        """vLLM's proposer call: the first len(sampled) of `req_ids` are the batch, row i holds
        token_ids[i, :num_tokens[i]], and a row whose sampled[i] is empty is still prefilling.
        Requests that left the batch are retired first. Returns every row's draft and, when
        `timed`, the clean step that just ran (see StepShapes). `forced_k`: calibration, every
        decoding row drafts its last token that many times, the drafter is not consulted.
        `num_prompt_tokens` ([>= len(sampled)], vLLM's input_batch.num_prompt_tokens, or None:
        unknown): row i's prompt is its first num_prompt_tokens[i] tokens. `tail`: the batch
        has free rows, nothing waits to join (see `step_tokens`)."""
        req_ids = req_ids[: len(sampled)]
        decoding = [row for row, got in enumerate(sampled) if got]
        sample = self.step_shapes.started(req_ids, len(decoding) == len(req_ids)) if timed else None
        self.retire_missing(req_ids)
        if forced_k is not None:
            if not 0 <= forced_k <= self.config.k_max:
                raise ValueError(f"forced_k={forced_k} must be within [0, k_max={self.config.k_max}]")
            row_drafts = {row: np.full(forced_k, token_ids[row, int(num_tokens[row]) - 1], dtype=np.int64)
                          for row in decoding}
        else:
            rows = np.asarray(decoding, dtype=np.int64)
            tokens = TokenRows(token_ids, num_tokens[rows], rows)  # vLLM's buffer, bound once
            accepted = [len(sampled[row]) - 1 for row in decoding]
            ids = [req_ids[row] for row in decoding]
            prompts = None if num_prompt_tokens is None else [int(num_prompt_tokens[row]) for row in decoding]
            row_drafts = dict(zip(decoding, self.step_tokens(ids, tokens, accepted, cost, prompts, tail), strict=True))
        drafts = [row_drafts[row].tolist() if row in row_drafts else [] for row in range(len(req_ids))]
        if timed:
            # The next forward attends to all but the last token (it is scheduled with the draft).
            self.step_shapes.finished({req_ids[row]: len(drafts[row]) for row in decoding},
                                      {req_ids[row]: int(num_tokens[row]) - 1 for row in decoding})
        return drafts, sample

    def retire_missing(self, present: Sequence[str]) -> None:
        """`finish` every live request not among `present`, oldest first."""
        here = set(present)
        for req_id in [r for r in self._live if r not in here]:
            self.finish(req_id)

    def forget_step_rows(self) -> None:
        self.step_shapes.forget()

    def step_tokens(
        self,
        req_ids: list[str],
        tokens: Sequence[np.ndarray],
        num_accepted: Sequence[int],
        cost: StepCostModel | None = None,
        num_prompt_tokens: Sequence[int] | None = None,
        tail: bool = False,
    ) -> list[np.ndarray]:
        """One engine step for the batch, with one drafter call for all of it: row i is
        request `req_ids[i]`, its tokens so far `tokens[i]` (a list of arrays, or `TokenRows`:
        vLLM's buffer), of whose last draft `num_accepted[i]` tokens were accepted, its prompt
        the first `num_prompt_tokens[i]` of them (None: unknown; the drafter reads it when it
        first sees the request). With a cost model each row first drafts up to its K, then
        the batch budget keeps the positions worth verifying (specdec.budget). In a wave's
        `tail` (free rows: nothing waits, so the remaining rows' steps decide when the wave
        ends and a step's fixed cost weighs most) the budget's rows at k_max may draft up to
        the config's k_ceiling, each token still only if it pays for its verification."""
        lives = [self._observe(req_id, accepted) for req_id, accepted in zip(req_ids, num_accepted, strict=True)]
        self._feedback(req_ids, lives)
        ks = [self.policy.next_k(live.state) for live in lives]
        if cost is not None and tail:
            ceiling, k_max = self.config.k_ceiling, self.config.k_max
            ks = [ceiling if k == k_max else k for k in ks]
        if cost is not None:
            contexts = contexts_of(tokens)
            ks = self._skip_unaffordable(lives, ks, cost, contexts)
        # Called with k = 0 too: a drafter may keep the sequence (the cache learns it at the end).
        started = self.clock() if cost is not None else 0.0
        if num_prompt_tokens is None:  # (a batch proposer that ignores prompts need not take the keyword)
            batch = self.drafter.propose_batch(req_ids, tokens, ks)
        else:
            batch = self.drafter.propose_batch(req_ids, tokens, ks, num_prompt_tokens)
        drafts = [batch.draft(i) for i in range(len(req_ids))]
        if cost is not None:
            self._time_lookups(self.clock() - started, sum(1 for k in ks if k > 0))
            gains = self._batch_gains(batch, lives)
            ks = allocate_drafts(gains, cost, contexts)
            drafts = [draft[:k] for draft, k in zip(drafts, ks)]
        for live, k, draft in zip(lives, ks, drafts, strict=True):
            assert draft.shape[0] <= k, (draft.shape[0], k)
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
        self, lives: Sequence[_Live], ks: list[int], cost: StepCostModel, contexts: np.ndarray
    ) -> list[int]:
        """K = 0 for rows whose most confident token could not pay for itself and for its
        lookup in this step: the budget would cut their whole draft, or the lookup would cost
        more than it brings (at large batches on a fast accelerator a lookup costs about as
        much as a row's share of the forward; on a CPU a long row's drafted token costs
        more than a short one's)."""
        best_confidence = getattr(self.proposer, "best_confidence", None)
        if best_confidence is None:
            return ks
        thresholds = first_draft_thresholds(cost, contexts, self.lookup_s).tolist()
        ceiling = min(best_confidence(), self.MAX_TOKEN_GAIN)
        overall = self._overall_rate()
        return [
            k if ceiling * self._relative_acceptance(live, overall) > threshold else 0
            for live, k, threshold in zip(lives, ks, thresholds, strict=True)
        ]

    def _relative_acceptance(self, live: _Live, overall: float) -> float:
        """How this request's drafts fare against the run's (1.0: like the run)."""
        return live.acceptance.rate(overall, self.PRIOR_WEIGHT) / overall

    def acceptance_rate(self, live: _Live) -> float:
        return live.acceptance.rate(self._overall_rate(), self.PRIOR_WEIGHT)

    def _overall_rate(self) -> float:
        return self._overall.rate(prior=0.5, prior_weight=1.0)

    def _batch_gains(self, batch: DraftBatch, lives: Sequence[_Live]) -> list[np.ndarray]:
        """Per row, the probability that each draft position is accepted: the drafter's
        per-token confidence where it has one, scaled by how this request fares against the
        run (for the whole batch in a few array operations: this runs every step)."""
        lengths = batch.lengths.tolist()
        if batch.confidence is None:
            return [geometric_gains(self.acceptance_rate(live), n) if n else _NO_GAINS
                    for live, n in zip(lives, lengths, strict=True)]
        overall = self._overall_rate()
        relative = np.array([self._relative_acceptance(live, overall) for live in lives])
        per_token = batch.confidence[:, : max(lengths, default=0)] * relative[:, None]
        # Both factors are >= 0; a prefix's product does not depend on what follows it, so
        # the positions past a row's draft change nothing.
        gains = np.cumprod(np.minimum(per_token, self.MAX_TOKEN_GAIN), axis=1)
        return [gains[i, :n] if n else _NO_GAINS for i, n in enumerate(lengths)]

    def _observe(self, req_id: str, num_accepted: int) -> _Live:
        """Learn from the verification of the request's last draft (the drafter learns in
        `_feedback`); `live.verified` keeps what it was told until then."""
        live = self._live.get(req_id)
        if live is None:
            live = _Live(self.policy.new_state())
            self._live[req_id] = live
        live.verified = (live.pending_draft, min(num_accepted, live.pending_draft))
        if live.pending_draft:
            num_drafted, num_accepted = live.verified
            self.policy.observe(live.state, num_drafted, num_accepted)
            live.acceptance.observe(num_drafted, num_accepted, self.ACCEPTANCE_DECAY)
            self._overall.observe(num_drafted, num_accepted, 1.0)
        return live

    def _feedback(self, req_ids: list[str], lives: Sequence[_Live]) -> None:
        drafted = [live.verified[0] for live in lives]
        if any(drafted):
            self.drafter.feedback_batch(req_ids, drafted, [live.verified[1] for live in lives])

    def finish(self, req_id: str) -> None:
        self._live.pop(req_id, None)
        self.drafter.forget(req_id)

    def state_sizes(self) -> dict[str, tuple[int, int | None]]:
        """(size, bound) of the per-request (bound None) and bounded structures."""
        sizes = getattr(self.proposer, "state_sizes", dict)()
        return {"live_requests": (len(self._live), None), "step_drafts": (len(self.step_shapes), None), **sizes}

    def active_ids(self) -> list[str]:
        return list(self._live)
