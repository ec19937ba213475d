"""The unit group's guard (unit/conftest.py): starting a Python interpreter fails the test before
the interpreter starts, however the test starts it; other programs run."""

from __future__ import annotations

import multiprocessing
import subprocess
import sys

import pytest

from support import BIN


@pytest.mark.parametrize("start", [
    lambda: subprocess.run([sys.executable, "-c", "pass"]),
    lambda: subprocess.run("python3 -c pass", shell=True),
    lambda: subprocess.Popen([str(BIN / "specdec"), "--help"]),  # an entry-point script
], ids=["executable", "shell", "script"])
def test_starting_python_fails_the_test(start):
    with pytest.raises(pytest.fail.Exception, match="starts a Python interpreter"):
        start()


def test_spawning_a_process_fails_the_test():
    process = multiprocessing.get_context("spawn").Process(target=print)
    with pytest.raises(pytest.fail.Exception, match="spawns a Python process"):
        process.start()


def test_other_programs_run():
    assert subprocess.run(["echo", "hi"], capture_output=True, text=True, check=True).stdout == "hi\n"
