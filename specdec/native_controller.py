"""The compiled controller: `DraftController`'s decisions over specdec's compiled drafter, with
the whole step in one call (packaging/specdec_native/src/controller.h).

Per request it keeps what the reference keeps (adaptive-K state, acceptance estimate,
pending draft); per step it learns from verification, skips rows whose best token cannot
pay, drafts, and prices and allocates the batch's drafts, in the same
floating-point operations in the same order as `DraftController`, so both draft alike
(tests/unit/test_native_controller.py). `engine_step` is vLLM's whole proposer call: the
batch's Python lists in, vLLM's list of drafts out, the clean step's shape measured on the way.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from specdec.budget import StepCost, StepCostModel, StepSample
from specdec.config import SpecConfig
from specdec.controller import Controller, DraftController
from specdec.default_proposer import default_proposer
from specdec.drafting.base import TokenRows
from specdec.drafting.native import NativeHybridProposer, load_core, prompt_lengths
from specdec.policy import DEFAULT_K_INIT


class NativeDraftController(Controller):
    """specdec's drafter under the compiled controller (see the module docstring)."""

    def __init__(self, config: SpecConfig, tokenizer: str | None = None) -> None:
        self.config = config
        self.tokenizer = tokenizer
        proposer, self.cache_warning = default_proposer(config, tokenizer)
        if not isinstance(proposer, NativeHybridProposer):
            raise ValueError("the compiled controller drives the compiled drafter (drafter='native', cache on)")
        self.proposer = proposer
        policy, ref = config.policy, DraftController
        self._core = load_core().Controller(
            proposer.core, config.k_max, config.k_ceiling, policy.adaptive,
            policy.k_init or min(DEFAULT_K_INIT, config.k_max), policy.window, policy.raise_above, policy.lower_below, policy.max_consecutive_rejects,
            policy.reprobe_after, ref.ACCEPTANCE_DECAY, ref.PRIOR_WEIGHT, ref.MAX_TOKEN_GAIN, ref.LOOKUP_DECAY,
        )
        self._cost: StepCost | None = None  # the one the core holds
        self._engine_buffers: tuple[np.ndarray | None, np.ndarray | None] = (None, None)

    @property
    def lookup_s(self) -> float:
        """The drafter's thread CPU seconds per row looked up (a moving average)."""
        return self._core.lookup_s

    @lookup_s.setter
    def lookup_s(self, value: float) -> None:
        self._core.lookup_s = value

    def fix_lookup_time(self, seconds: float) -> None:
        """Count every lookup call as `seconds` long instead of timing it (tests: the
        reference's `clock` made to do the same)."""
        self._core.fixed_lookup_s = seconds

    def _use_cost(self, cost: StepCostModel | None) -> bool:
        if cost is None:
            return False
        if cost is not self._cost:  # frozen: the same object means the same coefficients
            if not isinstance(cost, StepCost):
                raise TypeError(f"the compiled controller prices steps with a StepCost, not {type(cost).__name__}")
            self._core.set_cost(cost.fixed_s, cost.per_seq_s, cost.per_token_s, cost.per_kv_token_s,
                                cost.per_draft_kv_token_s)
            self._cost = cost
        return True

    def step_tokens(
        self,
        req_ids: list[str],
        tokens: Sequence[np.ndarray],
        num_accepted: Sequence[int],
        cost: StepCostModel | None = None,
        num_prompt_tokens: Sequence[int] | None = None,
        tail: bool = False,
    ) -> list[np.ndarray]:
        """One engine step for the batch (see DraftController.step_tokens)."""
        use_cost = self._use_cost(cost)
        accepted = [int(a) for a in num_accepted]
        prompts = prompt_lengths(num_prompt_tokens, len(accepted))
        if isinstance(tokens, TokenRows):
            self.proposer.bind_tokens(tokens.token_ids)
            drafts, lengths = self._core.step_rows(list(req_ids), tokens.buffer_rows.tolist(),
                                                   tokens.lengths.tolist(), accepted, prompts, use_cost, tail)
        else:
            drafts, lengths = self._core.step_arrays(list(req_ids), list(tokens), accepted, prompts, use_cost, tail)
        return [drafts[i, :n] for i, n in enumerate(lengths.tolist())]

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
        """vLLM's proposer call, in one call to the core (see DraftController.engine_step);
        `num_prompt_tokens`: vLLM's input_batch.num_prompt_tokens (int32 or int64, by row)."""
        bound = self._engine_buffers
        if token_ids is not bound[0] or num_tokens is not bound[1]:
            self.proposer.bind_tokens(token_ids)
            self._core.bind_engine(num_tokens)
            self._engine_buffers = (token_ids, num_tokens)
        use_cost = cost is not None and (cost is self._cost or self._use_cost(cost))
        drafts, shape = self._core.engine_step(req_ids, len(sampled), sampled, use_cost,
                                               -1 if forced_k is None else forced_k, timed, num_prompt_tokens, tail)
        return drafts, None if shape is None else StepSample(*shape)

    def finish(self, req_id: str) -> None:
        self._core.finish(req_id)

    def active_ids(self) -> list[str]:
        return self._core.active_ids()

    def forget_step_rows(self) -> None:
        self._core.forget_step_rows()

    def state_sizes(self) -> dict[str, tuple[int, int | None]]:
        """(size, bound) of the per-request (bound None) and bounded structures."""
        return {"live_requests": (self._core.num_live, None), "step_drafts": (self._core.num_step_rows, None),
                **self.proposer.state_sizes()}
