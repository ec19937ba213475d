"""SIGTERM to `specdec generate` while the real engine generates: vLLM's EngineCore and
Worker processes (found by PID under the command's process) are gone when the command has
exited with 143, and no output or temporary file is left. One engine start (~30-60 s).
The other signal cases run against a stand-in engine in tests/process/test_interrupt_signals.py;
`specdec run` and a cancelled or killed flow run are in tests/pipeline/."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from prompt_sets.humaneval import humaneval_rows
from prompt_sets.shards import write_shard
from support.process_tree import describe, descendants, wait_until_gone
from support.signals import wait_for_text

pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parents[2]


def test_sigterm_mid_generation_stops_every_engine_process(tmp_path):
    write_shard(humaneval_rows(limit=24), tmp_path / "in.parquet")
    out_dir = tmp_path / "out"
    log = tmp_path / "generate.log"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    with open(log, "w") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "specdec.cli", "generate", "--input", str(tmp_path / "in.parquet"),
             "--output", str(out_dir / "res.parquet"), "--method", "none", "--max-tokens", "128",
             "--batch-size", "4", "--kv-cache-gib", "1", "--verbose"],  # the engine's output in this log
            env=env, cwd=tmp_path, stdout=out, stderr=subprocess.STDOUT)
    try:
        wait_for_text(log, "requests:", proc, timeout=400)  # the first request finished: generating now
        tree = descendants(proc.pid)
        assert tree, "no engine process under specdec generate"
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(60) == 143, log.read_text()[-3000:]
    finally:
        proc.kill()
    assert not wait_until_gone(tree, 30), describe(tree)
    assert "interrupted by SIGTERM: shutting the engine down" in log.read_text()
    assert not out_dir.exists() or list(out_dir.iterdir()) == []
