"""Servers and processes the tests start: free ports, waiting with a deadline (never a fixed
sleep, never one look at something that arrives later), stopping by PID, loopback check."""

from __future__ import annotations

import signal
import socket
import subprocess
import time
from collections.abc import Callable
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


def stop_workers(procs: list[subprocess.Popen], grace: float = 5.0) -> None:
    """Stop Prefect workers we started, all at once: SIGINT, then after `grace` seconds a second
    SIGINT to those still up (Prefect's handler answers it with SIGKILL of the worker itself).
    A worker that ran flows often waits out its first SIGINT for 15 s or more, with no flow
    run of its own left by then (the tests wait for theirs to end)."""
    for proc in procs:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
    deadline = time.monotonic() + grace
    for proc in procs:
        try:
            proc.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            pass
    for proc in procs:
        stop(proc, (signal.SIGINT,), timeout=10)  # a no-op for one that has exited


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
