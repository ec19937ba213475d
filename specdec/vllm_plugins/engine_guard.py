"""Engine processes end when the process that started them ends (process hygiene, not a fix):
vLLM's EngineCore does not watch its parent. A daemon thread waits on the parent's process sentinel
(unlike PR_SET_PDEATHSIG, not tied to the thread that started the child), then kills the
process's own children and exits."""

from __future__ import annotations

import contextlib
import logging
import multiprocessing
import os
import threading
from multiprocessing.connection import wait

# vLLM's "vllm" logger is the one with a handler in its engine and worker processes.
log = logging.getLogger("vllm.specdec.engine_guard")

# multiprocessing names of the processes vLLM starts for an engine (EngineCore_DP<n> with
# data parallelism, VllmWorker-<rank>).
ENGINE_PROCESS_PREFIXES = ("EngineCore", "VllmWorker")
EXIT_CODE = 70  # a parent gone is not a clean shutdown

_installed = False


def register() -> None:
    """Start the parent watch in an engine process; a no-op anywhere else (the driver, the
    API server) and when called again."""
    global _installed
    if _installed:
        return
    parent = multiprocessing.parent_process()
    name = multiprocessing.current_process().name
    if parent is None or not name.startswith(ENGINE_PROCESS_PREFIXES):
        return
    _installed = True
    threading.Thread(target=_watch, args=(parent.sentinel, parent.pid), daemon=True,
                     name="specdec-parent-watch").start()


def _watch(sentinel: int, parent_pid: int | None) -> None:
    wait([sentinel])  # returns when the parent has exited
    log.warning("specdec: parent process %s is gone: stopping engine process %d and its children",
                parent_pid, os.getpid())
    import psutil

    try:
        children = psutil.Process().children(recursive=True)
    except psutil.Error:
        children = []
    for child in children:
        with contextlib.suppress(psutil.Error):
            child.kill()
    os._exit(EXIT_CODE)
