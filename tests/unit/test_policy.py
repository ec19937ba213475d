"""Adaptive K as a pure state machine, driven by scripted acceptance sequences."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from specdec.config import ConfigError, PolicyConfig
from specdec.policy import AdaptiveK


def run(policy, script):
    """Feed (drafted, accepted) pairs (drafted=None: use the chosen K); return Ks chosen."""
    state = policy.new_state()
    ks = []
    for accepted_fraction in script:
        k = policy.next_k(state)
        ks.append(k)
        if k:
            policy.observe(state, k, round(k * accepted_fraction))
    return ks


def test_raises_k_when_acceptance_high_and_caps_at_k_max():
    policy = AdaptiveK(PolicyConfig(adaptive=True, k_init=2, window=2), k_max=4)
    assert run(policy, [1.0] * 8) == [2, 2, 3, 3, 4, 4, 4, 4]


def test_lowers_k_when_acceptance_low_but_not_below_one():
    policy = AdaptiveK(PolicyConfig(adaptive=True, k_init=4, window=2, max_consecutive_rejects=99), k_max=4)
    assert run(policy, [0.25] * 8) == [4, 4, 3, 3, 2, 2, 1, 1]


def test_middling_acceptance_keeps_k():
    policy = AdaptiveK(PolicyConfig(adaptive=True, k_init=4, window=2), k_max=8)
    assert run(policy, [0.5, 0.75] * 4) == [4] * 8


def test_pauses_after_consecutive_rejects_then_reprobes_with_k1():
    policy = AdaptiveK(PolicyConfig(adaptive=True, k_init=3, max_consecutive_rejects=3, reprobe_after=2), k_max=4)
    assert run(policy, [0.0] * 3 + [1.0] * 3) == [3, 3, 3, 0, 0, 1]


def test_a_single_accept_resets_the_reject_streak():
    policy = AdaptiveK(PolicyConfig(adaptive=True, k_init=2, window=100, max_consecutive_rejects=3), k_max=4)
    assert 0 not in run(policy, [0.0, 0.0, 0.5, 0.0, 0.0, 0.5])


@settings(max_examples=300, deadline=None)
@given(
    k_max=st.integers(1, 8),
    data=st.data(),
    script=st.lists(st.tuples(st.integers(0, 8), st.floats(0, 1)), max_size=80),
)
def test_k_never_leaves_0_to_k_max(k_max, data, script):
    cfg = PolicyConfig(
        adaptive=True,
        k_init=data.draw(st.integers(1, k_max)),
        window=data.draw(st.integers(1, 5)),
        max_consecutive_rejects=data.draw(st.integers(1, 4)),
        reprobe_after=data.draw(st.integers(1, 5)),
    )
    policy = AdaptiveK(cfg, k_max)
    state = policy.new_state()
    for drafted_cap, fraction in script:
        k = policy.next_k(state)
        assert 0 <= k <= k_max
        drafted = min(k, drafted_cap)  # proposers may draft fewer than K
        policy.observe(state, drafted, int(drafted * fraction))
        assert 1 <= state.k <= k_max


def test_invalid_config_is_rejected_with_the_field_named():
    with pytest.raises(ConfigError, match="k_init"):
        AdaptiveK(PolicyConfig(adaptive=True, k_init=5), k_max=4)


def test_non_adaptive_policy_always_drafts_k_max():
    policy = AdaptiveK(PolicyConfig(adaptive=False, k_init=1), k_max=5)
    assert run(policy, [0.0] * 6 + [1.0] * 6) == [5] * 12
