"""The unit group starts no Python interpreter (and so no engine, whose processes vLLM spawns):
a test that tries fails at that call. Interpreter starts cost seconds each on 2 cores;
their tests live in process/ or engine/ (tests/conftest.py)."""

from __future__ import annotations

import multiprocessing.util
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

PYTHON = Path(sys.executable).resolve()


def is_python(program: str) -> bool:
    """An interpreter: this one, any `python*`, or a Python script (a `#!...python` line: the
    environment's specdec, pip, prefect)."""
    path = Path(shutil.which(program) or program)
    if path.name.startswith("python") or path.resolve() == PYTHON:
        return True
    try:
        with open(path, "rb") as file:
            first = file.readline(256)
    except OSError:
        return False
    return first.startswith(b"#!") and b"python" in first


def program_of(args, kwargs: dict) -> str:
    """The program a `subprocess.Popen(args, **kwargs)` call runs."""
    if kwargs.get("executable") is not None:
        return os.fsdecode(kwargs["executable"])
    if isinstance(args, (str, bytes, os.PathLike)):
        args = os.fsdecode(args)
        return shlex.split(args)[0] if kwargs.get("shell") else args
    return os.fsdecode(args[0])


@pytest.fixture(autouse=True)
def _no_interpreter_starts(monkeypatch: pytest.MonkeyPatch) -> None:
    popen_init = subprocess.Popen.__init__

    def guarded_init(self, args, *rest, **kwargs):
        program = program_of(args, kwargs)
        if is_python(program):
            pytest.fail(f"a unit test starts a Python interpreter ({program}): move it to tests/process/ "
                        "or tests/engine/", pytrace=False)
        popen_init(self, args, *rest, **kwargs)

    def no_spawn(*args, **kwargs):
        pytest.fail("a unit test spawns a Python process (multiprocessing, as vLLM starts an engine): move it "
                    "to tests/process/ or tests/engine/", pytrace=False)

    monkeypatch.setattr(subprocess.Popen, "__init__", guarded_init)
    monkeypatch.setattr(multiprocessing.util, "spawnv_passfds", no_spawn)
