"""The budget's tail ceiling: only in a wave's tail (the batch has free rows) and only with
the budget may a row draft past k_max, up to SpecConfig.k_ceiling, and then only the
tokens the budget finds worth verifying. The controller and its oracle alike
(tests/unit/test_native_controller.py runs them side by side)."""

from __future__ import annotations

import numpy as np
import pytest

from oracles.controller import DraftController as OracleController
from specdec.config import SpecConfig
from specdec.controller import DraftController
from specdec.step_cost import StepCost

REPEATING = np.array([5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16] * 6, dtype=np.int64)  # own text drafts far
FREE_DRAFTS = StepCost(fixed_s=0.05, per_seq_s=0.0, per_token_s=1e-9)  # verifying is nearly free
DEAR_DRAFTS = StepCost(fixed_s=0.001, per_seq_s=0.0, per_token_s=0.01)  # each drafted token costs 10 steps


def _draft_lengths(config: SpecConfig, cost: StepCost | None, tail: bool, steps: int = 30,
                   make=DraftController) -> list[int]:
    """Draft lengths of two rows over `steps` steps, every drafted token accepted."""
    controller = make(config)
    lengths, accepted = [], [0, 0]
    for step in range(steps):
        tokens = [REPEATING[: 24 + step + sum(lengths[-2:])], REPEATING[1 : 25 + step + sum(lengths[-2:])]]
        drafts = controller.step_tokens(["a", "b"], tokens, accepted, cost, None, tail)
        accepted = [len(d) for d in drafts]
        lengths.extend(accepted)
    return lengths


@pytest.mark.parametrize("make", [DraftController, OracleController])
def test_rows_draft_past_k_max_only_in_the_tail(make):
    config = SpecConfig(method="specdec", k_max=3, tail_k_max=7)
    assert max(_draft_lengths(config, FREE_DRAFTS, tail=False, make=make)) == 3
    assert max(_draft_lengths(config, FREE_DRAFTS, tail=True, make=make)) == 7


@pytest.mark.parametrize("make", [DraftController, OracleController])
def test_the_tail_ceiling_still_pays_for_each_token(make):
    config = SpecConfig(method="specdec", k_max=3, tail_k_max=7)
    assert max(_draft_lengths(config, DEAR_DRAFTS, tail=True, make=make)) < 3


def test_without_the_budget_the_tail_changes_nothing():
    config = SpecConfig(method="specdec", k_max=3, budget=False)
    assert config.k_ceiling == 3
    assert max(_draft_lengths(config, None, tail=True)) == 3


@pytest.mark.parametrize("batch_size,longest", [(1, 3), (2, 7)])
def test_the_batched_replay_passes_the_tail_as_vllms_worker_sees_it(batch_size, longest):
    """One request at batch size 1 fills the batch (never a tail); at batch size 2 the batch
    always has a free row, so under a cheap step it drafts up to the tail ceiling."""
    from bench.replay import ReplayRequest, SimulatedStepTimer, simulate

    text = REPEATING.tolist()
    request = ReplayRequest("r", text[:24], text[24:] * 2, 40)
    config = SpecConfig(method="specdec", k_max=3, tail_k_max=7)
    learner = SimulatedStepTimer(FREE_DRAFTS, config.k_max, batch_size, 2048)
    [result] = simulate([request], DraftController(config), batch_size, 256, learner).results
    assert max(result.per_step_drafted) == longest
    assert len(result.stats.k_histogram) == config.k_ceiling + 1
