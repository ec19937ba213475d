"""How many CPU cores vLLM-CPU keeps away from its compute threads, and the thread settings that
go with giving it every core (why: docs/internals.md, the CPU settings the engine chooses)."""

from __future__ import annotations

import os

from specdec.config import ConfigError

RESERVED_ENV = "VLLM_CPU_NUM_OF_RESERVED_CPU"
BIND_ENV = "VLLM_CPU_OMP_THREADS_BIND"
NUMBA_LAYER_ENV = "NUMBA_THREADING_LAYER"
SPIN_ENV = "GOMP_SPINCOUNT"
WAIT_POLICY_ENV = "OMP_WAIT_POLICY"
NO_RESERVED_CORE_SPIN_COUNT = "10000"
SMALL_MACHINE_CPUS = 4  # at or below this, no core is kept back by default


def usable_cpu_ids() -> list[int]:
    return sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else list(range(os.cpu_count() or 1))


def usable_cpus() -> int:
    return len(usable_cpu_ids())


_bound_by_us: str | None = None  # the rank binding this module set (a later engine may change it)


def bind_ranks(world_size: int) -> None:
    """Bind each rank of a multi-rank CPU engine to an even share of the usable cores (vLLM
    refuses more ranks than NUMA nodes otherwise). A binding the user set is kept."""
    global _bound_by_us
    current = os.environ.get(BIND_ENV)
    if current is not None and current != _bound_by_us:
        return
    if world_size <= 1:
        if current is not None:
            del os.environ[BIND_ENV]
        _bound_by_us = None
        return
    cpus = usable_cpu_ids()
    if len(cpus) < world_size:
        raise ConfigError(f"{world_size} ranks need at least as many CPU cores; this process may use {len(cpus)}")
    per_rank = len(cpus) // world_size
    groups = [cpus[r * per_rank:(r + 1) * per_rank] for r in range(world_size)]
    _bound_by_us = os.environ[BIND_ENV] = "|".join(",".join(map(str, g)) for g in groups)


def apply_cpu_threads(reserved_cpus: int | None) -> dict[str, str]:
    """Set vLLM's reserved-core count, and what goes with it, for engines started from now
    on (the user's variables are kept unless `reserved_cpus` is given); returns the thread
    variables in effect (a step-time calibration depends on them)."""
    if reserved_cpus is not None:
        os.environ[RESERVED_ENV] = str(reserved_cpus)
    elif RESERVED_ENV not in os.environ and BIND_ENV not in os.environ and usable_cpus() <= SMALL_MACHINE_CPUS:
        os.environ[RESERVED_ENV] = "0"
    if os.environ.get(RESERVED_ENV) == "0" and NUMBA_LAYER_ENV not in os.environ:
        os.environ[NUMBA_LAYER_ENV] = "workqueue"
    if os.environ.get(RESERVED_ENV) == "0" and SPIN_ENV not in os.environ and WAIT_POLICY_ENV not in os.environ:
        os.environ[SPIN_ENV] = NO_RESERVED_CORE_SPIN_COUNT
    names = (RESERVED_ENV, BIND_ENV, NUMBA_LAYER_ENV, SPIN_ENV, WAIT_POLICY_ENV)
    return {name: os.environ[name] for name in names if name in os.environ}
