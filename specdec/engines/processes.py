"""vLLM's engine processes (EngineCore and its Workers), recorded by the driver at start-up so
that it can stop them itself; a psutil.Process remembers its start time, so a reused PID is never
signalled. The other direction is specdec.vllm_plugins.engine_guard."""

from __future__ import annotations

import contextlib
import logging
from typing import Any

import psutil

log = logging.getLogger(__name__)


def engine_processes(llm: Any) -> list[psutil.Process]:
    """The EngineCore process(es) of a started `LLM` and all their descendants (Workers); none
    where vLLM runs the engine in this process (VLLM_ENABLE_V1_MULTIPROCESSING=0)."""
    client = getattr(getattr(llm, "llm_engine", None), "engine_core", None)
    manager = getattr(getattr(client, "resources", None), "engine_manager", None)
    found: list[psutil.Process] = []
    for proc in getattr(manager, "processes", None) or []:
        with contextlib.suppress(psutil.NoSuchProcess):
            core = psutil.Process(proc.pid)
            found += [core, *core.children(recursive=True)]
    return found


def alive(procs: list[psutil.Process]) -> list[psutil.Process]:
    """Those still running (a zombie, dead but not yet reaped, does not count)."""
    running = []
    for proc in procs:
        with contextlib.suppress(psutil.NoSuchProcess):
            if proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE:
                running.append(proc)
    return running


def kill(procs: list[psutil.Process], wait_s: float = 5.0) -> list[psutil.Process]:
    """SIGKILL every process still running (stopped ones too), wait up to `wait_s` for them
    to go; returns those still there."""
    targets = alive(procs)
    for proc in targets:
        with contextlib.suppress(psutil.NoSuchProcess):
            proc.kill()
    _, left = psutil.wait_procs(targets, timeout=wait_s)
    return alive(left)


def stop(procs: list[psutil.Process], grace_s: float = 10.0) -> None:
    """After vLLM's own shutdown: give the processes `grace_s` to exit, then kill the rest."""
    _, left = psutil.wait_procs(alive(procs), timeout=grace_s)
    left = alive(left)
    if left:
        log.warning("engine process(es) %s still running after shutdown: killing them",
                    ", ".join(str(p.pid) for p in left))
        left = kill(left)
    if left:
        log.error("engine process(es) %s could not be killed", ", ".join(str(p.pid) for p in left))


def wake_blocked_client(llm: Any, error: Exception) -> None:
    """Make a driver thread blocked on a dead engine raise `error`: vLLM's sync client waits on
    its output queue and on utility calls' futures without a timeout, and nothing comes there
    from a killed engine; this puts `error` in both (vLLM internals of SyncMPClient, 0.32.0)."""
    client = getattr(getattr(llm, "llm_engine", None), "engine_core", None)
    queue = getattr(client, "outputs_queue", None)
    if queue is not None:
        queue.put_nowait(error)
    for future in list((getattr(client, "utility_results", None) or {}).values()):
        if not future.done():
            future.set_exception(error)
