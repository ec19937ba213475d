"""The per-step controller, naive (the oracle of specdec.controller.DraftController, which runs
packaging/specdec_native/src/controller.cc): the same decisions in the same floating-point
operations, one row at a time."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Sequence

import numpy as np

from oracles.budget import AcceptanceEstimate, allocate_drafts, first_draft_thresholds
from oracles.hybrid import HybridProposer
from oracles.suffix_cache import SuffixTrieCache
from specdec.config import SpecConfig
from specdec.controller import CORE, CoreSettings, load_cache_file
from oracles.step_shapes import StepShapes, row_contexts
from specdec.step_cost import StepCost, StepSample


@dataclasses.dataclass
class _Live:
    acceptance: AcceptanceEstimate = dataclasses.field(default_factory=AcceptanceEstimate)
    pending_draft: int = 0  # tokens drafted last step, awaiting verification
    verified: tuple[int, int] = (0, 0)  # this step: (drafted, accepted) of the last draft


def oracle_proposer(config: SpecConfig, tokenizer: str | None = None, settings: CoreSettings = CORE,
                    ) -> tuple[HybridProposer, str | None]:
    """The oracle drafter the facade's compiled one equals, started from `config.cache_file`
    (and the warning when that file could not be used)."""
    contents, warning = load_cache_file(config.cache_file, tokenizer)
    s = settings
    cache = SuffixTrieCache(contents.max_depth if contents else s.cache_max_depth, config.cache_max_tokens)
    proposer = HybridProposer(cache, s.lookup_min, s.lookup_max, s.cache_min_prob, group_max_tokens=s.group_max_tokens,
                              history_max_tokens=s.history_max_tokens, history_per_prompt=s.history_per_prompt,
                              live_slack_tokens=s.live_slack_tokens)
    if contents:
        proposer.load_contents(contents)
    return proposer, warning


class DraftController:
    """The oracle controller over a `HybridProposer` (see the module docstring)."""

    def __init__(self, config: SpecConfig, proposer: HybridProposer | None = None, tokenizer: str | None = None,
                 settings: CoreSettings = CORE) -> None:
        self.config = config
        self.tokenizer = tokenizer
        self.settings = settings
        self.proposer, self.cache_warning = ((proposer, None) if proposer is not None
                                             else oracle_proposer(config, tokenizer, settings))
        self._live: dict[str, _Live] = {}
        self._overall = AcceptanceEstimate()
        self.lookup_s = 0.0  # the proposer's thread CPU seconds per row looked up
        self.clock: Callable[[], float] = time.thread_time  # what lookups are timed with
        self.step_shapes = StepShapes()

    def engine_step(
        self,
        req_ids: list[str],
        sampled: Sequence[Sequence[int]],
        num_tokens: np.ndarray,
        token_ids: np.ndarray,
        cost: StepCost | None,
        forced_draft_tokens: int | None = None,
        timed: bool = False,
        num_prompt_tokens: np.ndarray | None = None,
        tail: bool = False,
    ) -> tuple[list[list[int]], StepSample | None]:
        """specdec.controller.DraftController.engine_step, row by row."""
        req_ids = req_ids[: len(sampled)]
        decoding = [row for row, got in enumerate(sampled) if got]
        sample = self.step_shapes.started(req_ids, len(decoding) == len(req_ids)) if timed else None
        for req_id in [r for r in self._live if r not in set(req_ids)]:
            self.finish(req_id)
        rows = {row: token_ids[row, : int(num_tokens[row])] for row in decoding}
        if forced_draft_tokens is not None:
            if not 0 <= forced_draft_tokens <= self.config.k_max:
                raise ValueError(f"forced_draft_tokens={forced_draft_tokens} outside [0, k_max={self.config.k_max}]")
            drafts = {row: np.full(forced_draft_tokens, rows[row][-1], dtype=np.int64) for row in decoding}
        else:
            prompts = None if num_prompt_tokens is None else [int(num_prompt_tokens[row]) for row in decoding]
            found = self.step_tokens([req_ids[row] for row in decoding], [rows[row] for row in decoding],
                                     [len(sampled[row]) - 1 for row in decoding], cost, prompts, tail)
            drafts = dict(zip(decoding, found, strict=True))
        out = [drafts[row].tolist() if row in drafts else [] for row in range(len(req_ids))]
        if timed:
            # The next forward attends to all but the last token (it is scheduled with the draft).
            self.step_shapes.finished({req_ids[row]: len(out[row]) for row in decoding},
                                      {req_ids[row]: int(num_tokens[row]) - 1 for row in decoding})
        return out, sample

    def step_tokens(
        self,
        req_ids: list[str],
        tokens: Sequence[np.ndarray],
        num_accepted: Sequence[int],
        cost: StepCost | None = None,
        num_prompt_tokens: Sequence[int] | None = None,
        tail: bool = False,
    ) -> list[np.ndarray]:
        """specdec.controller.DraftController.step_tokens, row by row."""
        lives = [self._observe(req_id, accepted) for req_id, accepted in zip(req_ids, num_accepted, strict=True)]
        drafted = [live.verified[0] for live in lives]
        if any(drafted):
            self.proposer.feedback_batch(req_ids, drafted, [live.verified[1] for live in lives])
        max_draft_tokens = [self.config.k_ceiling if cost is not None and tail else self.config.k_max] * len(lives)
        overall = self._overall.rate(prior=0.5, prior_weight=1.0)
        relative = [live.acceptance.rate(overall, self.settings.prior_weight) / overall for live in lives]
        if cost is not None:
            contexts = row_contexts(np.array([len(t) for t in tokens], dtype=np.int64))
            # Rows whose most confident token could not pay for itself and its lookup draft nothing.
            thresholds = first_draft_thresholds(cost, contexts, self.lookup_s).tolist()
            ceiling = min(self.proposer.best_confidence(), self.settings.max_token_gain)
            max_draft_tokens = [m if ceiling * rel > threshold else 0
                                for m, rel, threshold in zip(max_draft_tokens, relative, thresholds)]
        started = self.clock() if cost is not None else 0.0  # timed with a budget only
        batch = self.proposer.propose_batch(req_ids, tokens, max_draft_tokens, num_prompt_tokens)
        drafts = [batch.draft(i) for i in range(len(req_ids))]
        if cost is not None:
            self._time_lookups(self.clock() - started, sum(1 for m in max_draft_tokens if m > 0))
            gains = [np.cumprod(np.minimum(batch.row_confidence(i) * relative[i], self.settings.max_token_gain))
                     for i in range(len(req_ids))]
            drafts = [draft[:n] for draft, n in zip(drafts, allocate_drafts(gains, cost, contexts))]
        for live, draft in zip(lives, drafts, strict=True):
            live.pending_draft = int(draft.shape[0])
        return drafts

    def _time_lookups(self, seconds: float, num_looked_up: int) -> None:
        decay = self.settings.lookup_decay
        if not num_looked_up:  # not refreshed, the estimate fades
            self.lookup_s *= decay
        elif self.lookup_s == 0.0:
            self.lookup_s = seconds / num_looked_up
        else:
            self.lookup_s = decay * self.lookup_s + (1 - decay) * (seconds / num_looked_up)

    def _observe(self, req_id: str, num_accepted: int) -> _Live:
        live = self._live.setdefault(req_id, _Live())
        live.verified = (live.pending_draft, min(num_accepted, live.pending_draft))
        if live.pending_draft:
            live.acceptance.observe(*live.verified, self.settings.acceptance_decay)
            self._overall.observe(*live.verified, 1.0)
        return live

    def finish(self, req_id: str) -> None:
        self._live.pop(req_id, None)
        self.proposer.forget(req_id)

    def finish_all(self) -> None:
        for req_id in list(self._live):
            self.finish(req_id)
        self.step_shapes.forget()

    def state_sizes(self) -> dict[str, tuple[int, int | None]]:
        return {"live_requests": (len(self._live), None), "step_drafts": (len(self.step_shapes), None),
                **self.proposer.state_sizes()}

    def take_source_counts(self, req_ids: Sequence[str]) -> dict[str, dict[str, tuple[int, int]]]:
        return self.proposer.take_source_counts(req_ids)

    def save_cache(self, path: str) -> int:
        return self.proposer.save_cache(path, self.tokenizer)
