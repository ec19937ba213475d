"""One stream per worker: shards are loaded ahead (caller's iterator, read-ahead thread,
bounded), their requests share one engine (held at twice its batch), and each shard goes to
`on_outcome` in a finisher thread the moment its last request finishes. A failing shard fails
alone; a stalled engine fails the shards in it and a fresh one takes the rest.
`sequential=True` is the old worker, kept only for the run bench."""

from __future__ import annotations

import collections
import copy
import dataclasses
import logging
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from specdec.engines.engine_stream import EngineStream
from specdec.engines.stall import EngineStalled, StallWatch
from specdec.stream_threads import PENDING, Finisher, ReadAhead, next_shard
from specdec.prompts import RejectedRow
from specdec.stats import ShardStats
from specdec.types import GenerationRequest, GenerationResult, SamplingOptions

log = logging.getLogger(__name__)

@dataclasses.dataclass
class ShardWork:
    """One shard, loaded: its requests (in order) and the rows that cannot run."""

    key: str  # unique within the stream
    source: str  # names the shard in messages
    requests: list[GenerationRequest]
    quarantined: list[RejectedRow] = dataclasses.field(default_factory=list)
    context: Any = None  # the caller's own (e.g. the loaded shard and its fingerprint)
    error: BaseException | None = None  # loading failed: nothing to generate
    read_s: float = 0.0


@dataclasses.dataclass
class ShardOutcome:
    work: ShardWork
    results: list[GenerationResult]  # in request order; empty when it failed
    stats: ShardStats
    generate_s: float  # wall time from its first request in the engine to its last finished
    error: BaseException | None = None


@dataclasses.dataclass
class StreamTotals:
    busy_s: float = 0.0  # engine wall time with requests in it (all engines of the stream)
    wall_s: float = 0.0
    cancelled_s: float = 0.0
    engine_start_s: float = 0.0
    num_shards: int = 0
    num_failed: int = 0
    num_output_tokens: int = 0


@dataclasses.dataclass
class _Open:
    """A shard in the engine."""

    work: ShardWork
    results: list[GenerationResult | None]
    next_index: int = 0  # its next request to add
    num_done: int = 0
    started: float = 0.0

    @property
    def all_added(self) -> bool:
        return self.next_index >= len(self.work.requests)


EngineFactory = Callable[[], tuple[Any, float]]  # () -> (engine, seconds spent starting it)


class EngineHolder:
    """The stream's engine, started on first use by whichever thread needs it first (the
    read-ahead thread needs its tokenizer, the stream its requests), and again after one died."""

    def __init__(self, start: EngineFactory) -> None:
        self._start = start
        self._lock = threading.Lock()
        self._engine: Any = None
        self._tokenizer: Any = None
        self.start_s = 0.0

    def get(self) -> Any:
        with self._lock:
            if self._engine is None or not getattr(self._engine, "alive", True):
                self._engine, start_s = self._start()
                self.start_s += start_s
            return self._engine

    def tokenizer(self) -> Any:
        """A copy of the engine's tokenizer of its own: tokenizing ahead in another thread
        must not share the one the engine detokenizes with."""
        engine = self.get()
        with self._lock:
            if self._tokenizer is None:
                self._tokenizer = copy.deepcopy(engine.tokenizer)
            return self._tokenizer

    def drop(self) -> None:
        """The engine died: kill what is left of it; the next `get` starts a fresh one."""
        with self._lock:
            engine, self._engine = self._engine, None
        kill = getattr(engine, "kill", None)
        if kill is not None:
            kill()


def run_stream(
    loads: Iterable[ShardWork],
    engines: EngineHolder,
    sampling: SamplingOptions,
    on_outcome: Callable[[ShardOutcome], None],
    *,
    read_ahead_requests: int,
    stall_timeout_s: float | None = None,
    sequential: bool = False,
    on_progress: Callable[[GenerationResult], None] | None = None,
) -> StreamTotals:
    """Generate every shard `loads` yields; `on_outcome` gets each one exactly once (in a
    background thread unless `sequential`). Raises what the caller's `loads` raised, the
    first error `on_outcome` raised (after every shard was handed on), or an interrupt."""
    runner = _StreamRunner(engines, sampling, on_outcome, stall_timeout_s, sequential, on_progress)
    source = iter(loads) if sequential else ReadAhead(loads, read_ahead_requests)
    finisher = Finisher(on_outcome, inline=sequential)
    runner.finisher = finisher
    started = time.perf_counter()
    try:
        runner.run(source)
    finally:
        if isinstance(source, ReadAhead):
            source.close()
        finisher.close()
        runner.close_stream()
    totals = runner.totals
    totals.wall_s = time.perf_counter() - started
    totals.engine_start_s = engines.start_s
    if finisher.errors:
        raise finisher.errors[0]
    return totals


class _StreamRunner:
    def __init__(self, engines: EngineHolder, sampling: SamplingOptions,
                 on_outcome: Callable[[ShardOutcome], None], stall_timeout_s: float | None, sequential: bool,
                 on_progress: Callable[[GenerationResult], None] | None) -> None:
        self.engines = engines
        self.sampling = sampling
        self.stall_timeout_s = stall_timeout_s
        self.sequential = sequential
        self.on_progress = on_progress
        self.finisher: Finisher
        self.totals = StreamTotals()
        self.engine: Any = None
        self.stream: EngineStream | None = None
        self.open: collections.OrderedDict[str, _Open] = collections.OrderedDict()

    def _ensure_engine(self) -> EngineStream:
        if self.stream is None or not getattr(self.engine, "alive", True):
            self.close_stream()
            self.engine = self.engines.get()
            self.stream = EngineStream(self.engine, self.sampling)
            self._hook("set_stream_ending", False)
        return self.stream

    def close_stream(self) -> None:
        if self.stream is not None:
            self.totals.busy_s += self.stream.busy_s
            self.totals.cancelled_s += self.stream.cancelled_s
            if getattr(self.engine, "alive", True):
                self._hook("finish_stream")  # e.g. the drafter's cache file is written
            self.stream = None

    def _hook(self, name: str, *args: Any) -> None:
        """Call the engine's optional `name` (test doubles may have none)."""
        hook = getattr(self.engine, name, None)
        if hook is not None:
            hook(*args)

    def run(self, source: Iterator[ShardWork]) -> None:
        exhausted = False
        while True:  # one StallWatch per engine: a stalled one is replaced
            with StallWatch(self.stall_timeout_s, self._stop_stalled) as watch:
                exhausted = self._run_engine(source, watch, exhausted)
            if exhausted and not self.open:
                return

    def _run_engine(self, source: Iterator[ShardWork], watch: StallWatch, exhausted: bool) -> bool:
        """Step until the stream is done or the engine failed; whether `source` is exhausted."""
        while True:
            if not exhausted:
                watch.pause()  # waiting for shards is not the engine's stall
                exhausted = self._top_up(source)
            if not self.open:
                if exhausted:
                    return True
                continue
            watch.progress()
            try:
                finished = self.stream.step() if self.stream is not None else []
            except Exception as exc:
                if watch.stalled or not getattr(self.engine, "alive", True):
                    exc = EngineStalled(f"no engine step for {self.stall_timeout_s or 0:.0f} s; the engine was "
                                        f"stopped ({type(exc).__name__}: {exc})")
                self._engine_failed(exc)
                return exhausted
            watch.progress()
            for item in finished:
                self._finished(item.owner, item.index, item.result)

    def _capacity(self) -> int:
        """Requests the engine should hold: a full batch running and as many waiting."""
        max_num_seqs = getattr(getattr(self.engine, "engine_config", None), "max_num_seqs", 16)
        return 2 * max_num_seqs

    def _top_up(self, source: Iterator[ShardWork]) -> bool:
        """Add requests until the engine holds its capacity; True once `source` is exhausted."""
        while True:
            if self.open:  # the engine starts only once a shard has something to generate
                stream = self._ensure_engine()
                for shard in self.open.values():
                    while not shard.all_added and stream.num_in_flight < self._capacity():
                        if shard.next_index == 0:
                            shard.started = time.perf_counter()
                        stream.add(shard.work.key, shard.next_index, shard.work.requests[shard.next_index])
                        shard.next_index += 1
                if stream.num_in_flight >= self._capacity() or self.sequential:
                    return False  # sequential: the next shard waits for this one to end
            # Wait for the next shard only when the engine has nothing to do.
            work = next_shard(source, block=not self.open)
            if work is PENDING:
                return False
            if work is None:
                self._hook("set_stream_ending", True)  # nothing more will join: the run's tail
                return True
            self._open(work)

    def _open(self, work: ShardWork) -> None:
        self.totals.num_shards += 1
        if work.error is not None or not work.requests:
            self.finisher.put(ShardOutcome(work, [], ShardStats.aggregate([]), 0.0, work.error))
            self.totals.num_failed += work.error is not None
            return
        self.open[work.key] = _Open(work, [None] * len(work.requests))

    def _finished(self, owner: str, index: int, result: GenerationResult) -> None:
        shard = self.open.get(owner)
        if shard is None:
            return  # its shard failed meanwhile
        request = shard.work.requests[index]
        result.sample = request.sample
        shard.results[index] = result
        shard.num_done += 1
        self.totals.num_output_tokens += len(result.output_token_ids)
        if self.on_progress is not None:
            self.on_progress(result)
        if shard.all_added and shard.num_done == len(shard.results):
            del self.open[owner]
            results = [r for r in shard.results if r is not None]
            stats = ShardStats.of_results(results)
            take = getattr(self.engine, "take_source_counts", None)
            if take is not None and not self.open:  # the drafter counts by engine, not by shard
                stats.add_source_counts(take())
            self.finisher.put(ShardOutcome(shard.work, results, stats, time.perf_counter() - shard.started))

    def fail_shard(self, owner: str, exc: BaseException) -> None:
        """`owner` fails alone: its requests leave the engine, the other shards go on."""
        shard = self.open.pop(owner, None)
        if shard is None:
            return
        if self.stream is not None:
            self.stream.cancel(owner)
        self.totals.num_failed += 1
        self.finisher.put(ShardOutcome(shard.work, [], ShardStats.aggregate([]), 0.0, exc))

    def _stop_stalled(self) -> None:
        self._hook("stop_stalled", self.stall_timeout_s or 0.0)

    def _engine_failed(self, exc: Exception) -> None:
        """The engine died or stalled: the shards in it fail (each named), a fresh engine
        takes the rest."""
        log.error("the engine failed with %d shard(s) in it: %s", len(self.open), exc)
        for owner in list(self.open):
            shard = self.open.pop(owner)
            self.totals.num_failed += 1
            self.finisher.put(ShardOutcome(shard.work, [], ShardStats.aggregate([]), 0.0, _named(exc, shard.work)))
        if self.stream is not None:
            self.totals.busy_s += self.stream.busy_s
            self.stream = None
        self.engines.drop()
        self.engine = None


def _named(exc: BaseException, work: ShardWork) -> BaseException:
    return (EngineStalled if isinstance(exc, EngineStalled) else RuntimeError)(f"{work.source}: {exc}")
