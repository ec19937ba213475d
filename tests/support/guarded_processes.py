"""`python tests/guarded_processes.py NAME`: a stand-in driver that starts, with
multiprocessing's spawn (as vLLM does), a child process called NAME, which starts the engine
guard as the specdec vLLM plugin does and starts a grandchild called VllmWorker-0 that does
the same; it prints the PIDs and sleeps. test_engine_guard.py kills it and watches both."""

from __future__ import annotations

import multiprocessing
import sys
import time


def engine_process(worker_pid: "multiprocessing.Value") -> None:
    from specdec.vllm_plugins import engine_guard  # what vLLM's plugin loader runs, without torch

    engine_guard.register()
    worker = multiprocessing.get_context("spawn").Process(target=worker_process, name="VllmWorker-0")
    worker.start()
    worker_pid.value = worker.pid
    time.sleep(600)


def worker_process() -> None:
    from specdec.vllm_plugins import engine_guard  # what vLLM's plugin loader runs, without torch

    engine_guard.register()
    time.sleep(600)


if __name__ == "__main__":
    ctx = multiprocessing.get_context("spawn")
    worker_pid = ctx.Value("i", 0)
    core = ctx.Process(target=engine_process, args=(worker_pid,), name=sys.argv[1])
    core.start()
    while not worker_pid.value:
        time.sleep(0.05)
    print(core.pid, worker_pid.value, flush=True)
    time.sleep(600)
