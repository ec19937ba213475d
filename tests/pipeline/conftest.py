"""Fixtures for the pipeline tests: temporary DuckDB/staging, and (session-scoped) local
servers started by the suite on 127.0.0.1 and stopped by PID: Prefect and moto's S3."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_for(check, timeout: float, what: str, proc: subprocess.Popen | None = None) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"{what} exited with {proc.returncode} before it was ready")
        try:
            if check():
                return
        except Exception:  # not up yet
            pass
        time.sleep(0.3)
    raise TimeoutError(f"{what} not ready after {timeout:.0f} s")


def stop(proc: subprocess.Popen, signals=(signal.SIGINT,), timeout: float = 20) -> None:
    """Stop a process we started, by its PID: each signal in turn, then SIGKILL."""
    for sig in signals:
        if proc.poll() is None:
            proc.send_signal(sig)
            try:
                proc.wait(timeout / len(signals))
            except subprocess.TimeoutExpired:
                pass
    if proc.poll() is None:
        proc.kill()
        proc.wait(10)


@pytest.fixture
def tmp_db(tmp_path) -> Path:
    return tmp_path / "results.duckdb"


@pytest.fixture
def staging_dir(tmp_path) -> Path:
    return tmp_path / "staging"


@pytest.fixture(scope="session")
def s3_server(tmp_path_factory) -> Iterator[str]:
    """moto's standalone S3 server on 127.0.0.1; yields its endpoint URL."""
    port = free_port()
    log = open(tmp_path_factory.mktemp("moto") / "moto.log", "w")
    proc = subprocess.Popen(
        [str(BIN / "python"), "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=log, stderr=subprocess.STDOUT,
    )
    endpoint = f"http://127.0.0.1:{port}"
    import urllib.request

    wait_for(lambda: urllib.request.urlopen(endpoint + "/", timeout=1), 60, "moto server", proc)
    yield endpoint
    stop(proc, (signal.SIGTERM,))
    log.close()


@pytest.fixture
def s3_env(s3_server, monkeypatch) -> str:
    """AWS environment pointing at the local S3 endpoint (dummy credentials)."""
    monkeypatch.setenv("AWS_ENDPOINT_URL", s3_server)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing-secret")
    monkeypatch.setenv("AWS_REGION", "us-east-1")
    return s3_server
