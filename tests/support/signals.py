"""Run a command in a subprocess that can be signalled, and wait for a line in its log."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from support import REPO

TESTS = REPO / "tests" / "support"


def start(args: list[str], tmp_path: Path, hang_on_close: bool = False) -> tuple[subprocess.Popen, Path]:
    log = tmp_path / "out.log"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
           "SLEEPING_ENGINE_HANG_ON_CLOSE": "1" if hang_on_close else "0"}
    with open(log, "w") as out:
        proc = subprocess.Popen([sys.executable, str(TESTS / "sleeping_engine.py"), *args], env=env, cwd=tmp_path,
                                stdout=out, stderr=subprocess.STDOUT)
    return proc, log


def wait_for_text(log: Path, text: str, proc: subprocess.Popen, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while text not in log.read_text():
        assert proc.poll() is None, f"exited {proc.returncode} before {text!r}:\n{log.read_text()[-3000:]}"
        assert time.monotonic() < deadline, f"no {text!r} after {timeout} s:\n{log.read_text()[-3000:]}"
        time.sleep(0.1)
