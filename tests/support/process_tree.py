"""Processes a test started, found by PID from the root it started (never by name)."""

from __future__ import annotations

import time

import psutil


def descendants(pid: int) -> list[psutil.Process]:
    try:
        return psutil.Process(pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []


def running(procs: list[psutil.Process]) -> list[psutil.Process]:
    """Those still running; a zombie (dead, not yet reaped by its parent) does not count."""
    alive = []
    for proc in procs:
        try:
            if proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE:
                alive.append(proc)
        except psutil.NoSuchProcess:
            continue
    return alive


def wait_until_gone(procs: list[psutil.Process], timeout: float) -> list[psutil.Process]:
    """Poll until none of `procs` runs or `timeout` passes; returns those still running."""
    deadline = time.monotonic() + timeout
    while (left := running(procs)) and time.monotonic() < deadline:
        time.sleep(0.2)
    return left


def describe(procs: list[psutil.Process]) -> str:
    out = []
    for proc in procs:
        try:
            out.append(f"{proc.pid} {proc.name()} {proc.status()}")
        except psutil.NoSuchProcess:
            out.append(f"{proc.pid} (gone)")
    return "; ".join(out)
