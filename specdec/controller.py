"""specdec's drafter, controller and batch budget: the compiled core (packaging/specdec_native)
behind one small class (docs/internals.md, "A step"). The oracles in tests/oracles draft the same;
tests/unit/test_controller_replay.py ends with a worked example."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Sequence

import numpy as np

from specdec.config import SpecConfig
from specdec.drafting import cache_file
from specdec.drafting.cache_file import CacheContents, CacheFileError
from specdec.native import load_core
from specdec.step_cost import StepCost, StepSample


@dataclasses.dataclass(frozen=True)
class CoreSettings:
    """The core's fixed settings: no user sets them (the oracles take the same values)."""

    lookup_min: int = 1  # own-text match lengths considered: one-token matches are priced by
    lookup_max: int = 16  # their learned confidence like any other
    cache_min_prob: float = 0.1  # a cache continuation less likely than this is not drafted
    min_cache_match: int = 1
    cache_max_depth: int = 24  # longest substring the cache counts (a saved file keeps its own)
    group_max_tokens: int = 2_000_000  # prompt groups, over all groups
    history_max_tokens: int = 1_000_000  # the per-prompt history, over all prompts
    history_per_prompt: int = 16  # completions kept per prompt
    live_slack_tokens: int = 65536  # finished tokens the live index keeps beyond twice the live ones
    # Per-request acceptance: counts decay by this per verified draft, and are shrunk towards
    # the run's overall rate with this many pseudo-drafts.
    acceptance_decay: float = 0.9
    prior_weight: float = 2.0
    max_token_gain: float = 0.99  # no draft token is ever taken as certain
    lookup_decay: float = 0.9  # the drafter's time per row: a moving average over steps


CORE = CoreSettings()
# vLLM's "vllm" logger is the one with a handler in its worker processes, where this runs.
log = logging.getLogger("vllm.specdec.controller")


class DraftController:
    """specdec's drafting for many requests, one call per engine step. Not thread-safe."""

    def __init__(self, config: SpecConfig, tokenizer: str | None = None, settings: CoreSettings = CORE) -> None:
        """`tokenizer`: specdec.models.tokenizer_digest, checked against the cache file's;
        `cache_warning` says why `config.cache_file` was not used."""
        self.config = config
        self.tokenizer = tokenizer
        self.settings = s = settings
        contents, self.cache_warning = load_cache_file(config.cache_file, tokenizer)
        core = load_core()
        # the compiled drafter (specdec_native.Drafter; tests read its tables)
        self.drafter = core.Drafter(
            cache_max_depth=contents.max_depth if contents else s.cache_max_depth,
            cache_max_tokens=config.cache_max_tokens, lookup_min=s.lookup_min, lookup_max=s.lookup_max,
            cache_min_prob=s.cache_min_prob, min_cache_match=s.min_cache_match, group_max_tokens=s.group_max_tokens,
            history_max_tokens=s.history_max_tokens, history_per_prompt=s.history_per_prompt,
            live_slack_tokens=s.live_slack_tokens)
        if contents:
            self.load_contents(contents)
        self._core = core.Controller(self.drafter, k_max=config.k_max, k_ceiling=config.k_ceiling,
                                     acceptance_decay=s.acceptance_decay, prior_weight=s.prior_weight,
                                     max_token_gain=s.max_token_gain, lookup_decay=s.lookup_decay)
        self._cost: StepCost | None = None  # the one the core holds
        self._engine_buffers: tuple[np.ndarray | None, np.ndarray | None] = (None, None)

    def step_tokens(self, req_ids: list[str], tokens: Sequence[np.ndarray], num_accepted: Sequence[int],
                    cost: StepCost | None = None, num_prompt_tokens: Sequence[int] | None = None,
                    tail: bool = False) -> list[np.ndarray]:
        """One engine step: row i is request `req_ids[i]`, its tokens so far `tokens[i]` (prompt +
        verified output), of whose last draft `num_accepted[i]` tokens were accepted, its prompt the
        first `num_prompt_tokens[i]` (None: unknown; read at a request's first step). Returns each
        row's draft: at most k_max tokens, or what the budget keeps with `cost` (k_ceiling in a `tail`)."""
        accepted = [int(a) for a in num_accepted]
        prompts = [] if num_prompt_tokens is None else [int(n) for n in num_prompt_tokens]  # the core's []: unknown
        if num_prompt_tokens is not None and len(prompts) != len(accepted):
            raise ValueError(f"{len(prompts)} prompt lengths for {len(accepted)} rows")
        if any(n < 0 for n in prompts):
            raise ValueError(f"negative prompt length in {prompts}")
        drafts, lengths = self._core.step_arrays(list(req_ids), list(tokens), accepted, prompts,
                                                 self._use_cost(cost), tail)
        return [drafts[i, :n] for i, n in enumerate(lengths.tolist())]

    def engine_step(self, req_ids: list[str], sampled: Sequence[Sequence[int]], num_tokens: np.ndarray,
                    token_ids: np.ndarray, cost: StepCost | None, forced_draft_tokens: int | None = None,
                    timed: bool = False, num_prompt_tokens: np.ndarray | None = None,
                    tail: bool = False) -> tuple[list[list[int]], StepSample | None]:
        """vLLM's proposer call, in one call to the core: the first len(sampled) of `req_ids`
        are the batch; row i holds token_ids[i, :num_tokens[i]] (vLLM's buffers, bound once);
        an empty sampled[i] is still prefilling. Requests that left the batch are finished
        first. Returns every row's draft and, when `timed`, the clean step that just ran.
        `forced_draft_tokens`: calibration, every decoding row drafts that many tokens."""
        if token_ids is not self._engine_buffers[0] or num_tokens is not self._engine_buffers[1]:
            self.drafter.bind_tokens(token_ids)
            self._core.bind_engine(num_tokens)
            self._engine_buffers = (token_ids, num_tokens)
        use_cost = cost is not None and (cost is self._cost or self._use_cost(cost))
        forced = -1 if forced_draft_tokens is None else forced_draft_tokens
        drafts, shape = self._core.engine_step(req_ids, len(sampled), sampled, use_cost, forced, timed,
                                               num_prompt_tokens, tail)
        return drafts, None if shape is None else StepSample(*shape)

    def _use_cost(self, cost: StepCost | None) -> bool:
        if cost is None:
            return False
        if cost is not self._cost:  # frozen: the same object means the same coefficients
            if not isinstance(cost, StepCost):
                raise TypeError(f"the controller prices steps with a StepCost, not {type(cost).__name__}")
            self._core.set_cost(**dataclasses.asdict(cost))
            self._cost = cost
        return True

    def finish(self, req_id: str) -> None:
        """The request left the batch: forget it (its tokens enter the cross-request cache,
        its output its prompt's history). A draft still pending was never verified."""
        self._core.finish(req_id)

    def learn(self, req_id: str, prompt: Sequence[int], output: Sequence[int]) -> None:
        """A request another engine generated: its tokens enter the cross-request cache and its
        output its prompt's history, as if it had run here (one step's lookup, then `finish`)."""
        tokens = np.asarray([*prompt, *output], dtype=np.int64)
        self.step_tokens([req_id], [tokens], [0], num_prompt_tokens=[len(prompt)])
        self.finish(req_id)

    def finish_all(self) -> None:
        """`finish` every live request, oldest first (their tokens belong in the saved cache)."""
        for req_id in self._core.active_ids():
            self._core.finish(req_id)
        self._core.forget_step_rows()

    def take_source_counts(self, req_ids: Sequence[str]) -> dict[str, dict[str, tuple[int, int]]]:
        """Per request of `req_ids` with any: its drafted tokens verified, and accepted, per
        source (DRAFT_SOURCES) since the last take, then zeroed."""
        return self.drafter.take_source_counts(list(req_ids))

    def state_sizes(self) -> dict[str, tuple[int, int | None]]:
        """(size, bound) of each structure; bound None: per request, empty between calls, except
        `finished_counts`: a finished request's source counts stay until taken."""
        d, cache = self.drafter, self.drafter.cache
        return {"live_requests": (self._core.num_live, None), "step_drafts": (self._core.num_step_rows, None),
                "finished_counts": (d.num_finished_counts, None),
                "own_sequences": (d.num_requests, None), "shared_members": (d.num_members, None),
                # each cached sequence holds a token; a token starts at most max_depth nodes
                "cache_tokens": (cache.num_tokens, cache.max_tokens),
                "cache_sequences": (len(cache), cache.max_tokens),
                "cache_nodes": (cache.num_nodes, cache.max_tokens * cache.max_depth),
                "live_index_tokens": (d.live_index_tokens, 2 * d.live_request_tokens + d.live_slack_tokens),
                "group_tokens": (d.group_tokens, self.settings.group_max_tokens + d.live_group_tokens),
                "history_tokens": (d.history_tokens, self.settings.history_max_tokens)}

    def contents(self) -> CacheContents:
        """What the cache file holds: the cache's sequences and the history, oldest first."""
        ids, tokens, lengths = self.drafter.cache.sequences()
        digests, history_lengths, history_tokens = self.drafter.history()
        return CacheContents(self.drafter.cache.max_depth, list(ids), tokens, lengths, digests, history_lengths,
                             history_tokens)

    def load_contents(self, contents: CacheContents) -> None:
        """Start from a file's contents, oldest first (the bound evicts the oldest)."""
        for seq_id, seq in zip(contents.ids, contents.sequences(), strict=True):
            self.drafter.cache.insert(seq_id, np.ascontiguousarray(seq, dtype=np.int32))
        self.drafter.load_history(np.ascontiguousarray(contents.history_digests, dtype=np.uint64),
                                  np.ascontiguousarray(contents.history_lengths, dtype=np.int64),
                                  np.ascontiguousarray(contents.history_tokens, dtype=np.int32))

    def save_cache(self, path: str) -> int:
        """Write the cross-request cache and the history to `path`; returns the sequences written."""
        cache_file.write_contents(path, self.contents(), self.tokenizer)
        return len(self.drafter.cache)


def load_cache_file(path: str | None, tokenizer: str | None) -> tuple[CacheContents | None, str | None]:
    """A saved cache's contents, or none: an unusable file is moved aside with a warning
    (never a failed run)."""
    if not path:
        return None, None
    try:
        return cache_file.read_contents(path, tokenizer), None
    except FileNotFoundError:
        return None, None
    except CacheFileError as exc:
        aside = cache_file.set_aside(path)
        warning = f"draft cache file {exc}; moved to {aside}; starting with an empty cache"
        log.warning("specdec: %s", warning)
        return None, warning
