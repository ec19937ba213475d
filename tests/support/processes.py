"""Servers and processes the tests start: free ports, waiting with a deadline (never a fixed
sleep, never one look at something that arrives later), stopping by PID, loopback check."""

from __future__ import annotations

import signal
import socket
import subprocess
import time
from collections.abc import Callable, Sequence
from typing import TypeVar

T = TypeVar("T")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_for(check, timeout: float, what: str, proc: subprocess.Popen | None = None) -> None:
    """Until `check()` is true (exceptions count as not yet); fails if `proc` exits first."""
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


def poll(read: Callable[[], T], done: Callable[[T], bool], timeout: float = 60, interval: float = 0.5) -> T:
    """`read()` until `done(value)` or `timeout` seconds have passed; returns the last value.

    For what arrives asynchronously (a flow run's shipped logs, task runs the server records
    from events): the caller asserts on the value as it would on a single read, so a late
    arrival costs a little time, not a failure, and a real failure still shows what was read."""
    deadline = time.monotonic() + timeout
    value = read()
    while not done(value) and time.monotonic() < deadline:
        time.sleep(interval)
        value = read()
    return value


def stop(procs: subprocess.Popen | Sequence[subprocess.Popen], signals=(signal.SIGINT,), timeout: float = 20) -> None:
    """Stop processes we started, by PID, all at once: each signal in turn to those still up
    (waiting up to its share of `timeout` for them all), then SIGKILL."""
    procs = [procs] if isinstance(procs, subprocess.Popen) else list(procs)
    for sig in signals:
        for proc in procs:
            if proc.poll() is None:
                proc.send_signal(sig)
        deadline = time.monotonic() + timeout / len(signals)
        for proc in procs:
            try:
                proc.wait(max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)


def stop_workers(procs: Sequence[subprocess.Popen]) -> None:
    """Stop Prefect workers we started. A worker that ran flows often waits out its first SIGINT
    for 15 s or more (no flow run of its own left by then: the tests wait for theirs to end);
    Prefect answers a second SIGINT by killing the worker itself."""
    stop(procs, (signal.SIGINT, signal.SIGINT), timeout=10)


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
