"""The engine guard (specdec.vllm_plugins.engine_guard): an engine process whose parent dies
(SIGKILL, nothing runs in it any more) kills its own children and exits; a process vLLM did
not start for an engine is left alone. Stand-in processes (tests/support/guarded_processes.py)
started with multiprocessing's spawn, like vLLM's; followed by PID."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from support.process_tree import describe, running, wait_until_gone

pytestmark = pytest.mark.slow

TESTS = Path(__file__).resolve().parents[1] / "support"


def start_driver(name: str) -> tuple[subprocess.Popen, list[psutil.Process]]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(TESTS.parent), str(TESTS), os.environ.get("PYTHONPATH", "")])}
    driver = subprocess.Popen([sys.executable, str(TESTS / "guarded_processes.py"), name], env=env,
                              stdout=subprocess.PIPE, text=True)
    core_pid, worker_pid = map(int, driver.stdout.readline().split())
    return driver, [psutil.Process(core_pid), psutil.Process(worker_pid)]


def test_engine_processes_exit_when_their_driver_is_killed():
    driver, engine = start_driver("EngineCore")
    try:
        assert len(running(engine)) == 2
        driver.kill()
        driver.wait(10)
        assert not wait_until_gone(engine, 30), describe(engine)
    finally:
        for proc in running(engine):
            proc.kill()


def test_other_processes_are_not_guarded():
    driver, procs = start_driver("SomethingElse")
    try:
        driver.kill()
        driver.wait(10)
        assert wait_until_gone(procs[:1], 3) == procs[:1]  # still running: not an engine process
    finally:
        for proc in running(procs):
            proc.kill()
