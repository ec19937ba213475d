"""The statistic of the sampling-distribution tests (support.chi_square), without an engine:
it accepts two samples of one distribution and rejects a shifted one at the engine tests'
significance level (tests/engine/test_fidelity.py)."""

from __future__ import annotations

import random

from support import chi_square

ALPHA = 1e-3  # as in tests/engine/test_fidelity.py


def test_chi_square_accepts_same_and_rejects_different_distributions() -> None:
    rng = random.Random(0)
    outcomes = [(1, 2), (1, 3), (4, 5), (6,), (7,)]
    weights = [0.4, 0.25, 0.2, 0.1, 0.05]
    # A quarter of the mass moved between two outcomes: found with samples of 240 (a shift
    # of 0.15 is found only about half the time at ALPHA).
    shifted = [0.15, 0.5, 0.2, 0.1, 0.05]
    a, b, c = (rng.choices(outcomes, w, k=240) for w in (weights, weights, shifted))
    assert chi_square.same_distribution(a, b).p_value > ALPHA
    assert chi_square.same_distribution(a, c).p_value < ALPHA
    rare = [(i,) for i in range(100)]  # all below MIN_BIN: one "other" bin, nothing to test
    assert chi_square.same_distribution(rare, rare).dof == 0
