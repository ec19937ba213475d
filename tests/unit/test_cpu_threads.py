"""vLLM-CPU core reservation: explicit setting, the user's variables, the small-machine default
(no core reserved, numba's threading layer and libgomp's idle spin with it)."""

import pytest

from specdec.engines import cpu_threads
from specdec.engines.cpu_threads import (
    BIND_ENV,
    NO_RESERVED_CORE_SPIN_COUNT,
    NUMBA_LAYER_ENV,
    RESERVED_ENV,
    SPIN_ENV,
    WAIT_POLICY_ENV,
    apply_cpu_threads,
)


@pytest.fixture
def clean_env(monkeypatch):
    monkeypatch.delenv(RESERVED_ENV, raising=False)
    monkeypatch.delenv(BIND_ENV, raising=False)
    for name in (NUMBA_LAYER_ENV, SPIN_ENV, WAIT_POLICY_ENV):
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


def test_small_machine_reserves_no_core(clean_env):
    clean_env.setattr(cpu_threads, "usable_cpus", lambda: 2)
    assert apply_cpu_threads(None) == {RESERVED_ENV: "0", NUMBA_LAYER_ENV: "workqueue",
                                       SPIN_ENV: NO_RESERVED_CORE_SPIN_COUNT}


@pytest.mark.parametrize("name,value", [(NUMBA_LAYER_ENV, "tbb"), (SPIN_ENV, "300000"), (WAIT_POLICY_ENV, "ACTIVE")])
def test_users_thread_variables_are_kept(clean_env, name, value):
    clean_env.setenv(name, value)
    applied = apply_cpu_threads(0)
    assert applied[name] == value
    if name == WAIT_POLICY_ENV:  # a wait policy of the user's own: no spin count of ours beside it
        assert SPIN_ENV not in applied


def test_a_reserved_core_keeps_libgomp_defaults(clean_env):
    assert SPIN_ENV not in apply_cpu_threads(1)


def test_large_machine_keeps_vllm_default(clean_env):
    clean_env.setattr(cpu_threads, "usable_cpus", lambda: 32)
    assert apply_cpu_threads(None) == {}


def test_explicit_setting_wins_over_user_variable(clean_env):
    clean_env.setenv(RESERVED_ENV, "1")
    assert apply_cpu_threads(0)[RESERVED_ENV] == "0"


@pytest.mark.parametrize("name,value", [(RESERVED_ENV, "1"), (BIND_ENV, "0")])
def test_user_variables_are_kept_by_default(clean_env, name, value):
    clean_env.setattr(cpu_threads, "usable_cpus", lambda: 2)
    clean_env.setenv(name, value)
    assert apply_cpu_threads(None) == {name: value}
