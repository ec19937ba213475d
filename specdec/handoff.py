"""Handing items between threads: a bounded read-ahead (or its inline stand-in) and an
in-order finisher. Generic: the stream says how big an item is and what to call with it."""

from __future__ import annotations

import collections
import contextvars
import logging
import queue
import threading
from collections.abc import Callable, Iterable, Iterator
from typing import Generic, Protocol, TypeVar

log = logging.getLogger(__name__)

T = TypeVar("T")
_END = object()  # after the last item


class Source(Protocol[T]):
    """Where the stream takes its items from; `exhausted` once `take` has met the end."""

    exhausted: bool

    def take(self, block: bool) -> T | None:
        """The next item, or None: none ready (when not blocking) or no more (`exhausted`)."""

    def release(self, size: int) -> None: ...  # `size` of what was taken moved on or was dropped

    def close(self) -> None: ...


class Inline(Generic[T]):
    """A `Source` that iterates in the taker's thread when asked: nothing is read ahead."""

    def __init__(self, items: Iterable[T]) -> None:
        self._items = iter(items)
        self.exhausted = False

    def take(self, block: bool) -> T | None:
        item = next(self._items, None)
        self.exhausted = item is None
        return item

    def release(self, size: int) -> None: ...  # nothing is held

    def close(self) -> None: ...


class ReadAhead(Generic[T]):
    """A `Source` that iterates `items` in a thread, in the caller's context; it holds at most
    `max_size` (in `size(item)` units) until `release`d (a larger item still goes, alone)."""

    def __init__(self, items: Iterable[T], max_size: int, size: Callable[[T], int]) -> None:
        self.max_size = max(1, max_size)
        self.exhausted = False
        self._size = size
        self._ready: collections.deque[object] = collections.deque()
        self._held = 0
        self._cond = threading.Condition()
        self._closed = False
        self._error: BaseException | None = None
        context = contextvars.copy_context()
        self._thread = threading.Thread(target=context.run, args=(self._fill, iter(items)), daemon=True,
                                        name="specdec-read-ahead")
        self._thread.start()

    def _fill(self, items: Iterator[T]) -> None:
        try:
            for item in items:
                size = self._size(item)
                with self._cond:
                    while self._held > 0 and self._held + size > self.max_size and not self._closed:
                        self._cond.wait()
                    if self._closed:
                        return
                    self._ready.append(item)
                    self._held += size
                    self._cond.notify_all()
        except BaseException as exc:  # the caller's iterator broke: the taker fails with it
            self._error = exc
        with self._cond:
            self._ready.append(_END)
            self._cond.notify_all()

    def take(self, block: bool) -> T | None:
        """Raises what the caller's iterator raised, once every item before it was taken."""
        with self._cond:
            while not self._ready:
                if not block:
                    return None
                self._cond.wait()
            if self._ready[0] is _END:
                self.exhausted = True
                if self._error is not None:
                    raise self._error
                return None
            return self._ready.popleft()  # type: ignore[return-value]

    def release(self, size: int) -> None:
        if size:
            with self._cond:
                self._held -= size
                self._cond.notify_all()

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()


class Finisher(Generic[T]):
    """Hands items to `deliver` in order, in a thread (or at once, `inline`), keeping what it raises."""

    def __init__(self, deliver: Callable[[T], None], inline: bool, name: Callable[[T], str] = str) -> None:
        self.deliver = deliver
        self.inline = inline
        self.name = name
        self.errors: list[BaseException] = []
        # bounded: a slow hand-on holds the engine back rather than piling results up
        self._queue: queue.Queue[object] = queue.Queue(maxsize=64)
        self._thread: threading.Thread | None = None
        if not inline:
            context = contextvars.copy_context()
            self._thread = threading.Thread(target=context.run, args=(self._run,), daemon=True,
                                            name="specdec-finisher")
            self._thread.start()

    def put(self, item: T) -> None:
        if self.inline:
            self._hand_on(item)
        else:
            self._queue.put(item)

    def _hand_on(self, item: T) -> None:
        try:
            self.deliver(item)
        except Exception as exc:
            log.error("%s: could not hand on its results: %s", self.name(item), exc)
            self.errors.append(exc)

    def _run(self) -> None:
        while (item := self._queue.get()) is not _END:
            self._hand_on(item)  # type: ignore[arg-type]

    def close(self) -> None:
        """Every item put so far is handed on when this returns."""
        if self._thread is not None:
            self._queue.put(_END)
            self._thread.join()
            self._thread = None
