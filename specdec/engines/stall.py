"""Noticing an engine that makes no progress: a hung engine would block its worker forever,
so `StallWatch` calls `on_stall` once when no step has ended for `limit_s` seconds."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable


class EngineStalled(RuntimeError):
    """No request finished for the stall limit: the engine was stopped (and must be started
    again before the next call)."""


class StallWatch:
    """`with StallWatch(limit_s, on_stall) as watch:` ... `watch.progress()` after every
    engine step. `limit_s=None` watches nothing."""

    def __init__(self, limit_s: float | None, on_stall: Callable[[], None]) -> None:
        self.limit_s = limit_s
        self.stalled = False
        self._on_stall = on_stall
        self._last = time.monotonic()
        self._paused = False
        self._done = threading.Event()
        self._thread: threading.Thread | None = None

    def progress(self) -> None:
        self._last = time.monotonic()
        self._paused = False

    def pause(self) -> None:
        """Nothing is expected of the engine until the next `progress()` (it holds no work)."""
        self._paused = True

    def __enter__(self) -> "StallWatch":
        self.progress()
        if self.limit_s is not None:
            self._thread = threading.Thread(target=self._run, daemon=True, name="specdec-stall-watch")
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._done.set()
        if self._thread is not None:
            self._thread.join()

    def _run(self) -> None:
        assert self.limit_s is not None
        while True:
            remaining = self._last + self.limit_s - time.monotonic()
            if self._paused:
                remaining = self.limit_s
            elif remaining <= 0:
                self.stalled = True
                self._on_stall()
                return
            if self._done.wait(remaining):
                return
