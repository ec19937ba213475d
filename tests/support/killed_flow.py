"""A `specdec run` flow process SIGKILLed mid-stream, as a worker host losing a job: the test
starts it, waits until its first shard is committed (ingested) while others still generate,
and kills it. Its engine processes are followed by PID from the process the test started."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from support import REPO
from support.process_tree import describe, descendants, wait_until_gone
from support.processes import wait_for


def kill_flow_process_mid_stream(env: dict[str, str], run_args: list[str], log_path: Path, timeout: float = 400,
                                 until: Callable[[str], bool] = lambda log: "ingested 1 shard(s)" in log) -> str:
    """`specdec run <run_args>` until its log says `until` (default: its first shard ingested),
    then SIGKILL it; its engine processes must exit on their own (they watch their parent).
    Returns its log."""
    with open(log_path, "w") as out:
        proc = subprocess.Popen([sys.executable, "-m", "specdec.cli", "run", *run_args],
                                env=env, cwd=REPO, stdout=out, stderr=subprocess.STDOUT)
        try:
            wait_for(lambda: until(log_path.read_text()), timeout, "the point to kill it at", proc)
            tree = descendants(proc.pid)
            engine_cores = [p for p in tree if "EngineCore" in p.name()]
            assert engine_cores, describe(tree)
            # Hold the engine (a fast machine would finish the other shards first), kill the
            # flow process alone, then let the engine go: its processes must notice their
            # parent is gone.
            for p in engine_cores:
                p.suspend()
            try:
                proc.kill()
                proc.wait(30)
            finally:
                for p in engine_cores:
                    p.resume()
        finally:
            proc.kill()
    assert not wait_until_gone(tree, 30), describe(tree)
    return log_path.read_text()
