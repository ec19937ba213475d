"""Noticing an engine that makes no progress.

A generate call blocks until vLLM hands back finished requests; an engine that stops making
progress (a hung device, a stopped process) would block its worker forever. `StallWatch`
runs beside the call and calls `on_stall` once when no request has finished for `limit_s`
seconds; the engine adapter's `on_stall` kills the engine processes and wakes the blocked
call, which then raises `EngineStalled`.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from tqdm import tqdm


class EngineStalled(RuntimeError):
    """No request finished for the stall limit: the engine was stopped (and must be started
    again before the next call)."""


class StallWatch:
    """`with StallWatch(limit_s, on_stall) as watch:` ... `watch.progress()` on every
    finished request. `limit_s=None` watches nothing."""

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


def progress_bars(watch: StallWatch, show: bool) -> Callable[..., Any]:
    """The `use_tqdm` callable for vLLM's `LLM.generate`: its finished-request bar is a
    Progress; the bar vLLM wraps around the prompts it adds is plain tqdm, or none."""

    def make(iterable: Any = None, **options: Any) -> Any:
        if iterable is not None:
            return tqdm(iterable, **options) if show else iterable
        return Progress(watch, show, **options)

    return make


class Progress:
    """vLLM's bar of finished requests: counts them for a StallWatch, and draws a tqdm bar
    when `show` is set.

    Duck-types the part of tqdm vLLM uses (n, postfix, format_dict["elapsed"], update,
    refresh, close); a disabled tqdm reports an elapsed time of 0, which vLLM divides by."""

    def __init__(self, watch: StallWatch, show: bool, **bar_options: Any) -> None:
        self._watch = watch
        self._bar = tqdm(**bar_options) if show else None
        self._started = time.perf_counter()
        self.n = 0
        self.postfix: Any = bar_options.get("postfix", "")

    @property
    def format_dict(self) -> dict[str, Any]:
        if self._bar is not None:
            return self._bar.format_dict
        return {"elapsed": max(time.perf_counter() - self._started, 1e-9)}

    def update(self, n: int = 1) -> None:
        self.n += n
        self._watch.progress()
        if self._bar is not None:
            self._bar.postfix = self.postfix
            self._bar.update(n)

    def refresh(self) -> None:
        if self._bar is not None:
            self._bar.refresh()

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
