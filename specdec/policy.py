"""Per-request adaptive speculation length K: a small, pure state machine.

Every `window` verified drafts the acceptance rate over them moves K by one step
(above `raise_above` -> K+1, below `lower_below` -> K-1, within [1, k_max]). After
`max_consecutive_rejects` drafts in a row with nothing accepted the request stops drafting
for `reprobe_after` steps, then probes again with K=1. `next_k` is always in [0, k_max].
"""

from __future__ import annotations

import dataclasses

from specdec.config import PolicyConfig

DEFAULT_K_INIT = 4


@dataclasses.dataclass
class KState:
    """Policy state of one request."""

    k: int
    window_drafted: int = 0
    window_accepted: int = 0
    window_steps: int = 0
    consecutive_rejects: int = 0
    paused_steps_left: int = 0


class AdaptiveK:
    """Chooses K for each step of each request and learns from verification results."""

    def __init__(self, config: PolicyConfig, k_max: int) -> None:
        config.validate(k_max)
        self.config = config
        self.k_max = k_max

    def new_state(self) -> KState:
        if not self.config.adaptive:
            return KState(k=self.k_max)
        return KState(k=self.config.k_init or min(DEFAULT_K_INIT, self.k_max))

    def next_k(self, state: KState) -> int:
        """K to draft this step; 0 while the request is paused. Counts down the pause."""
        if state.paused_steps_left > 0:
            state.paused_steps_left -= 1
            if state.paused_steps_left == 0:
                state.k = 1  # re-probe cautiously
            return 0
        return state.k

    def observe(self, state: KState, num_drafted: int, num_accepted: int) -> None:
        """Feed back one verified draft: `num_accepted` of `num_drafted` tokens accepted."""
        assert 0 <= num_accepted <= num_drafted, (num_accepted, num_drafted)
        if num_drafted == 0 or not self.config.adaptive:
            return
        cfg = self.config
        state.consecutive_rejects = state.consecutive_rejects + 1 if num_accepted == 0 else 0
        if state.consecutive_rejects >= cfg.max_consecutive_rejects:
            state.paused_steps_left = cfg.reprobe_after
            state.consecutive_rejects = 0
            self._reset_window(state)
            return
        state.window_drafted += num_drafted
        state.window_accepted += num_accepted
        state.window_steps += 1
        if state.window_steps < cfg.window:
            return
        rate = state.window_accepted / state.window_drafted
        if rate > cfg.raise_above:
            state.k = min(state.k + 1, self.k_max)
        elif rate < cfg.lower_below:
            state.k = max(state.k - 1, 1)
        self._reset_window(state)

    @staticmethod
    def _reset_window(state: KState) -> None:
        state.window_drafted = state.window_accepted = state.window_steps = 0
