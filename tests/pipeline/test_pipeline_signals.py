"""SIGTERM and SIGINT to `specdec run` (the flow in the command's own process, on the
session's Prefect server) while a shard generates, with the stand-in engine of
tests/support/sleeping_engine.py: the engine process is gone, the exit code is 143 or 130, nothing
is committed to staging and no temporary file is left; a second SIGINT ends a hanging
shutdown at once. SIGTERM reaches the flow through Prefect's own SIGTERM handler first."""

from __future__ import annotations

import signal

import pytest

from prompt_sets.shards import write_shard
from support.process_tree import describe, descendants, wait_until_gone
from support.signals import start, wait_for_text
from support.sleeping_engine import GENERATING

pytestmark = pytest.mark.slow  # the session's Prefect server


def run_args(tmp_path) -> list[str]:
    write_shard([{"id": f"r{i}", "prompt": f"prompt {i}"} for i in range(3)], tmp_path / "src/a.parquet")
    return ["run", "--source", str(tmp_path / "src"), "--db", str(tmp_path / "r.duckdb"),
            "--staging", str(tmp_path / "staging"), "--method", "none", "--max-tokens", "4"]


def start_run(tmp_path, prefect_server, monkeypatch, hang_on_close=False):
    monkeypatch.setenv("PREFECT_API_URL", prefect_server["PREFECT_API_URL"])
    monkeypatch.setenv("PREFECT_HOME", prefect_server["PREFECT_HOME"])
    proc, log = start(run_args(tmp_path), tmp_path, hang_on_close=hang_on_close)
    wait_for_text(log, GENERATING, proc, timeout=180)
    return proc, log, [p for p in descendants(proc.pid) if "sleep" in " ".join(p.cmdline())]


def staged_files(tmp_path) -> list[str]:
    return sorted(str(p.relative_to(tmp_path)) for p in (tmp_path / "staging").rglob("*") if p.is_file())


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_to_specdec_run_stops_the_engine_and_commits_nothing(tmp_path, prefect_server, monkeypatch, sig):
    proc, log, engine = start_run(tmp_path, prefect_server, monkeypatch)
    try:
        assert engine, describe(descendants(proc.pid))
        proc.send_signal(sig)
        assert proc.wait(60) == 128 + sig, log.read_text()[-3000:]
    finally:
        proc.kill()
    assert not wait_until_gone(engine, 10), describe(engine)
    files = staged_files(tmp_path)
    assert not [f for f in files if f.endswith("manifest.json") or ".tmp" in f], files  # run.json only


def test_a_second_sigint_ends_a_hanging_shutdown_of_specdec_run(tmp_path, prefect_server, monkeypatch):
    proc, log, engine = start_run(tmp_path, prefect_server, monkeypatch, hang_on_close=True)
    try:
        proc.send_signal(signal.SIGINT)
        wait_for_text(log, "close() hangs", proc)
        proc.send_signal(signal.SIGINT)
        assert proc.wait(5) == 130
    finally:
        proc.kill()
    assert not wait_until_gone(engine, 5), describe(engine)
