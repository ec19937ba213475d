"""SIGTERM and SIGINT to `specdec generate`, with a stand-in engine (tests/support/sleeping_engine.py:
one sleeping child as its engine process): the engine is shut down, no engine process
remains, the exit code is 128 + the signal, and no output or temporary file is left; a
second SIGINT kills the engine by PID when its shutdown hangs. The same with the real
engine: tests/engine/test_signals_engine.py."""

from __future__ import annotations

import signal
import subprocess
from pathlib import Path

import psutil
import pytest

from prompt_sets.shards import write_shard
from support.process_tree import describe, descendants, wait_until_gone
from support.signals import start, wait_for_text
from support.sleeping_engine import GENERATING

pytestmark = pytest.mark.slow


def generate_args(tmp_path: Path) -> list[str]:
    write_shard([{"id": f"r{i}", "prompt": f"prompt {i}"} for i in range(4)], tmp_path / "in.parquet")
    return ["generate", "--input", str(tmp_path / "in.parquet"), "--output", str(tmp_path / "out" / "res.parquet"),
            "--method", "none", "--verbose"]  # the engine's output stays in this test's log


def engine_child(proc: subprocess.Popen) -> psutil.Process:
    (child,) = descendants(proc.pid)
    return child


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_shuts_the_engine_down_and_leaves_no_output(tmp_path, sig):
    proc, log = start(generate_args(tmp_path), tmp_path)
    try:
        wait_for_text(log, GENERATING, proc)
        child = engine_child(proc)
        proc.send_signal(sig)
        assert proc.wait(60) == 128 + sig, log.read_text()[-3000:]
    finally:
        proc.kill()
    assert not wait_until_gone([child], 10), describe([child])
    assert f"interrupted by {sig.name}: shutting the engine down" in log.read_text()
    out = tmp_path / "out"
    assert not out.exists() or list(out.iterdir()) == []  # no output, no quarantine, no temp file


def test_a_second_sigint_kills_a_hanging_engine_by_pid_and_exits_at_once(tmp_path):
    proc, log = start(generate_args(tmp_path), tmp_path, hang_on_close=True)
    try:
        wait_for_text(log, GENERATING, proc)
        child = engine_child(proc)
        proc.send_signal(signal.SIGINT)
        wait_for_text(log, "close() hangs", proc)
        proc.send_signal(signal.SIGINT)
        assert proc.wait(5) == 130  # the bound: gone within 5 s of the second SIGINT
    finally:
        proc.kill()
    assert not wait_until_gone([child], 5), describe([child])
