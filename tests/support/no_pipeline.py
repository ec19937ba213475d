"""Subprocesses without the pipeline: a sitecustomize module hides prefect and duckdb from the
path finder, so that importing them fails and importlib.util.find_spec returns None, as where
they are not installed (in the engine processes such a subprocess spawns too)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from support import BIN

HIDDEN = ("prefect", "duckdb")

SITECUSTOMIZE = f'''\
import sys
from importlib.machinery import PathFinder

HIDDEN = {HIDDEN!r}


class HidingPathFinder(PathFinder):
    @classmethod
    def find_spec(cls, fullname, path=None, target=None):
        if fullname.partition(".")[0] in HIDDEN:
            return None
        return super().find_spec(fullname, path, target)


sys.meta_path[:] = [HidingPathFinder if f is PathFinder else f for f in sys.meta_path]
'''


def env_without_pipeline(folder: Path) -> dict[str, str]:
    """Environment for subprocesses in which prefect and duckdb cannot be imported; the hook
    is written into `folder`."""
    hook = folder / "hide-pipeline"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(SITECUSTOMIZE)
    env = {**os.environ, "PYTHONPATH": str(hook), "TOKENIZERS_PARALLELISM": "false"}
    env.pop("PREFECT_API_URL", None)
    return env


def specdec(env: dict[str, str], cwd: Path, *args: str, timeout: float) -> subprocess.CompletedProcess:
    """The `specdec` console script of this environment."""
    return subprocess.run([str(BIN / "specdec"), *args], env=env, cwd=cwd, capture_output=True,
                          text=True, timeout=timeout)
