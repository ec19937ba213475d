"""The stream's helper threads: the bounded read-ahead and the in-order finisher."""

from __future__ import annotations

import collections
import contextvars
import logging
import queue
import threading
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from specdec.streaming import ShardOutcome, ShardWork

log = logging.getLogger("specdec.streaming")

PENDING = object()


def next_shard(source: Iterator[ShardWork], block: bool) -> Any:
    """The next shard, None when there are no more, or PENDING (not ready, not blocking)."""
    if isinstance(source, ReadAhead):
        return source.get(block)
    return next(source, None)


class ReadAhead:
    """Iterates `loads` in a thread, in the caller's context; holds at most `max_requests`
    requests the engine has not taken (a larger shard still goes, alone). A shard handed on
    still counts until the stream `release`s its requests (into the engine, or dropped)."""

    def __init__(self, loads: Iterable[ShardWork], max_requests: int) -> None:
        self.max_requests = max(1, max_requests)
        self._items: collections.deque[ShardWork | None] = collections.deque()
        self._held = 0
        self._cond = threading.Condition()
        self._closed = False
        self._error: BaseException | None = None
        context = contextvars.copy_context()
        self._thread = threading.Thread(target=context.run, args=(self._fill, iter(loads)), daemon=True,
                                        name="specdec-read-ahead")
        self._thread.start()

    def _fill(self, loads: Iterator[ShardWork]) -> None:
        try:
            for work in loads:
                with self._cond:
                    while self._held > 0 and self._held + len(work.requests) > self.max_requests and not self._closed:
                        self._cond.wait()
                    if self._closed:
                        return
                    self._items.append(work)
                    self._held += len(work.requests)
                    self._cond.notify_all()
        except BaseException as exc:  # the caller's iterator broke: the stream fails with it
            self._error = exc
        with self._cond:
            self._items.append(None)
            self._cond.notify_all()

    def get(self, block: bool) -> Any:
        with self._cond:
            while not self._items:
                if not block:
                    return PENDING
                self._cond.wait()
            work = self._items[0]
            if work is None:
                if self._error is not None:
                    raise self._error
                return None
            self._items.popleft()
            return work

    def release(self, num_requests: int) -> None:
        if num_requests:
            with self._cond:
                self._held -= num_requests
                self._cond.notify_all()

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()


class Finisher:
    """Hands outcomes on in order, in a thread (or at once, `inline`), keeping what they raise."""

    def __init__(self, deliver: Callable[[ShardOutcome], None], inline: bool) -> None:
        self.deliver = deliver
        self.inline = inline
        self.errors: list[BaseException] = []
        self._queue: queue.Queue[ShardOutcome | None] = queue.Queue(maxsize=64)
        self._thread: threading.Thread | None = None
        if not inline:
            context = contextvars.copy_context()
            self._thread = threading.Thread(target=context.run, args=(self._run,), daemon=True,
                                            name="specdec-finisher")
            self._thread.start()

    def put(self, outcome: ShardOutcome) -> None:
        if self.inline:
            self._hand_on(outcome)
        else:
            self._queue.put(outcome)

    def _hand_on(self, outcome: ShardOutcome) -> None:
        try:
            self.deliver(outcome)
        except Exception as exc:
            log.error("%s: could not hand on its results: %s", outcome.work.source, exc)
            self.errors.append(exc)

    def _run(self) -> None:
        while (outcome := self._queue.get()) is not None:
            self._hand_on(outcome)

    def close(self) -> None:
        """Every outcome put so far is handed on when this returns."""
        if self._thread is not None:
            self._queue.put(None)
            self._thread.join()
            self._thread = None
