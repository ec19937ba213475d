"""Helpers shared by the pipeline tests and their fixtures: ports, waiting, stopping by PID."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

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


def listening_addresses(root_pid: int) -> dict[tuple[int, str], str]:
    """{(pid, process name): "ip:port"} of every listening TCP socket of `root_pid` and its
    descendants: the servers a test started."""
    import psutil

    root = psutil.Process(root_pid)
    found: dict[tuple[int, str], str] = {}
    for proc in [root, *root.children(recursive=True)]:
        try:
            for conn in proc.net_connections(kind="inet"):
                if conn.status == psutil.CONN_LISTEN:
                    found[(proc.pid, f"{proc.name()}:{conn.laddr.port}")] = conn.laddr.ip
        except psutil.Error:  # exited meanwhile
            continue
    return found


def assert_loopback_only(root_pid: int) -> dict[tuple[int, str], str]:
    found = listening_addresses(root_pid)
    exposed = {k: ip for k, ip in found.items() if ip not in ("127.0.0.1", "::1")}
    assert not exposed, f"servers listening beyond 127.0.0.1: {exposed}"
    return found
