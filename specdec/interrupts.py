"""SIGINT and SIGTERM for the `specdec` commands: the first raises `Interrupted` in the main
thread (the command shuts its engine down and exits with 128 + the signal number); a second
kills the engine processes by PID, removes temporary files and exits at once."""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
from collections.abc import Callable, Iterator
from pathlib import Path

SIGNALS = (signal.SIGINT, signal.SIGTERM)
_temporary: set[Path] = set()  # temporary files being written, removed on a hard exit


class Interrupted(BaseException):
    """SIGINT or SIGTERM arrived (a BaseException: `except Exception` does not swallow it)."""

    def __init__(self, signum: int) -> None:
        self.signum = signum
        super().__init__(f"interrupted by {signal.Signals(signum).name}")

    @property
    def exit_code(self) -> int:
        return 128 + self.signum


@contextlib.contextmanager
def handled(kill: Callable[[], None]) -> Iterator[None]:
    """Install the two-stage handler for the duration (main thread only; elsewhere a
    no-op). `kill` must not wait: it runs inside the signal handler."""
    received: list[int] = []

    def handler(signum: int, frame: object) -> None:
        received.append(signum)
        if len(received) == 1:
            raise Interrupted(signum)
        try:  # the second: kill the engine processes, remove temporary files, exit without unwinding
            kill()
            for path in list(_temporary):
                path.unlink(missing_ok=True)
        finally:
            os._exit(128 + signum)

    try:
        previous = {sig: signal.signal(sig, handler) for sig in SIGNALS}
    except ValueError:  # not the main thread
        yield
        return
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


@contextlib.contextmanager
def temporary_path(path: Path) -> Iterator[Path]:
    """A unique temporary name beside `path` to write to; renamed to `path` when the block
    ends normally, removed otherwise (an error, a signal)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}-{secrets.token_hex(4)}.tmp")
    _temporary.add(tmp)
    try:
        yield tmp
        os.replace(tmp, path)
    finally:
        _temporary.discard(tmp)
        tmp.unlink(missing_ok=True)
