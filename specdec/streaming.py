"""One stream per worker: shards are loaded ahead (bounded), their requests share one engine
(held at twice its batch), and each shard goes to `on_outcome` the moment its last request
finishes. Requests start in arrival order, so shards commit promptly; once every shard is
loaded, the rest starts longest expected first: the run's tail is its last long requests.
A failing shard fails alone; a stalled engine fails the shards in it, a fresh one takes the rest."""

from __future__ import annotations

import copy
import dataclasses
import heapq
import logging
import math
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Generic, TypeVar

from specdec.engines.engine_stream import EngineStream
from specdec.engines.stall import EngineStalled, StallWatch
from specdec.handoff import Finisher, Inline, ReadAhead, Source
from specdec.prompts import RejectedRow
from specdec.stats import ShardStats
from specdec.types import GenerationRequest, GenerationResult, SamplingOptions

log = logging.getLogger(__name__)

C = TypeVar("C")  # what the caller carries with each shard


@dataclasses.dataclass
class ShardRequests(Generic[C]):
    """A shard, loaded: its requests (in order) and the rows that cannot run."""

    key: str  # unique within the stream
    source: str  # names the shard in messages
    requests: list[GenerationRequest]
    context: C  # the caller's own, back with the outcome
    quarantined: list[RejectedRow] = dataclasses.field(default_factory=list)
    error: BaseException | None = None  # loading failed: nothing to generate
    # per request, its expected output length from earlier runs (None: no history, arrival order)
    expected_tokens: list[float] | None = None
    # requests already generated (method auto's pilot), by index, and their drafts by source
    done: dict[int, GenerationResult] = dataclasses.field(default_factory=dict)
    done_source_counts: list[dict[str, tuple[int, int]]] = dataclasses.field(default_factory=list)  # per pilot chunk


@dataclasses.dataclass
class ShardOutcome(Generic[C]):
    shard: ShardRequests[C]
    results: list[GenerationResult]  # in request order; empty when it failed
    stats: ShardStats
    generate_s: float  # wall time from its first request in the engine to its last finished
    error: BaseException | None = None


@dataclasses.dataclass
class StreamTotals:
    busy_s: float = 0.0  # engine wall time with requests in it (all engines of the stream)
    full_batch_s: float = 0.0  # of which full-batch steps (EngineStream.full_batch_s)
    full_batch_tokens: int = 0  # the output tokens of those steps
    wall_s: float = 0.0
    engine_start_s: float = 0.0
    num_output_tokens: int = 0

    def add(self, other: "StreamTotals") -> None:
        for field in dataclasses.fields(self):
            setattr(self, field.name, getattr(self, field.name) + getattr(other, field.name))


@dataclasses.dataclass
class Handover(Generic[C]):
    """A stream that may hand its work on (method auto's pilot). The `leads` (request indices by
    shard key) start first; once each has finished or failed, `go_on(their results, the stream's
    totals so far)` says whether it goes on (shards finished before wait for the answer). If not,
    it adds nothing more, finishes what the engine holds and returns, with the shards it did not
    finish in `left` (in order, their finished results in `done`)."""

    leads: dict[str, set[int]]
    go_on: Callable[[list[GenerationResult], StreamTotals], bool]
    alone: bool = False  # the leads run alone, as a chunk would (no other request joins while one runs)
    left: list[ShardRequests[C]] = dataclasses.field(default_factory=list)


@dataclasses.dataclass
class _InEngine(Generic[C]):
    """A shard with requests in the engine, or waiting to join it."""

    shard: ShardRequests[C]
    results: list[GenerationResult | None]
    num_added: int = 0
    num_done: int = 0
    started: float = 0.0


EngineFactory = Callable[[], tuple[Any, float]]  # () -> (engine, seconds spent starting it)


class EngineHolder:
    """The stream's engine, started by whichever thread needs it first, and again after one died."""

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


def run_stream(loads: Iterable[ShardRequests[C]], engines: EngineHolder, sampling: SamplingOptions,
               on_outcome: Callable[[ShardOutcome[C]], None], *, read_ahead_requests: int,
               stall_timeout_s: float | None = None, sequential: bool = False,
               on_progress: Callable[[GenerationResult], None] | None = None, run_tail: bool = True,
               handover: Handover[C] | None = None) -> StreamTotals:
    """Generate every shard `loads` yields; `on_outcome` gets each one exactly once (in a background
    thread unless `sequential`), unless `handover` stopped the stream first. `run_tail`: its end is
    the run's (False: more of the run follows, as after a pilot's chunk). Raises what `loads` raised,
    the first error `on_outcome` raised (after every shard was handed on), or an interrupt."""
    source: Source[ShardRequests[C]] = Inline(loads) if sequential else \
        ReadAhead(loads, read_ahead_requests, lambda shard: len(shard.requests))
    finisher = Finisher(on_outcome, inline=sequential, name=lambda outcome: outcome.shard.source)
    runner = _StreamRunner(engines, sampling, source, finisher, stall_timeout_s, sequential, on_progress, run_tail,
                           handover)
    started = time.perf_counter()
    try:
        runner.run()
        if handover is not None and runner.stopping:
            handover.left = runner.left()
    finally:
        source.close()
        finisher.close()
        runner.close_stream()
    totals = dataclasses.replace(runner.totals, wall_s=time.perf_counter() - started, engine_start_s=engines.start_s)
    if finisher.errors:
        raise finisher.errors[0]
    return totals


class _StreamRunner(Generic[C]):
    def __init__(self, engines: EngineHolder, sampling: SamplingOptions, source: Source[ShardRequests[C]],
                 finisher: Finisher[ShardOutcome[C]], stall_timeout_s: float | None, sequential: bool,
                 on_progress: Callable[[GenerationResult], None] | None, run_tail: bool,
                 handover: Handover[C] | None = None) -> None:
        self.engines = engines
        self.sampling = sampling
        self.source = source
        self.finisher = finisher
        self.stall_timeout_s = stall_timeout_s
        self.sequential = sequential
        self.on_progress = on_progress
        self.run_tail = run_tail
        self.totals = StreamTotals()
        self.engine: Any = None
        self.stream: EngineStream | None = None
        self.open: dict[str, _InEngine[C]] = {}
        # requests not yet in the engine, every open shard's: (key, arrival, shard, index, expected tokens);
        # the key is 0 until the last shard is loaded, then -expected tokens; a handover's leads: -inf
        self.waiting: list[tuple[float, int, str, int, float]] = []
        self.arrivals = 0
        self.ending_told = False  # this engine knows nothing more will join
        self.handover = handover  # None once answered
        self.leads_left = sum(map(len, handover.leads.values())) if handover else 0
        self.lead_results: list[GenerationResult] = []
        self.held: list[ShardOutcome[C]] = []  # finished before the handover's answer
        self.stopping = False  # the handover said no: nothing more joins the engine
        self.to_learn: list[tuple[str, Sequence[int], Sequence[int]]] = []  # done elsewhere: (id, prompt, output)

    def _ensure_engine(self) -> EngineStream:
        if self.stream is None or not getattr(self.engine, "alive", True):
            self.close_stream()
            self.engine = self.engines.get()
            self.stream = EngineStream(self.engine, self.sampling, full_batch=self._batch())
            self.ending_told = False
            self._hook("set_stream_ending", False)
        return self.stream

    def close_stream(self) -> None:
        if self.stream is not None:
            self._add_stream_times(self.totals)
            if getattr(self.engine, "alive", True):
                self._hook("finish_stream")  # e.g. the drafter's cache file is written
            self.stream = None

    def _add_stream_times(self, totals: StreamTotals) -> None:
        assert self.stream is not None
        totals.busy_s += self.stream.busy_s
        totals.full_batch_s += self.stream.full_batch_s
        totals.full_batch_tokens += self.stream.full_batch_tokens

    def _hook(self, name: str, *args: Any) -> None:
        hook = getattr(self.engine, name, None)  # optional: test doubles may have none
        if hook is not None:
            hook(*args)

    def run(self) -> None:
        while not self._done():  # one StallWatch per engine: a stalled one is replaced
            with StallWatch(self.stall_timeout_s, self._stop_stalled) as watch:
                self._run_engine(watch)

    def _done(self) -> bool:
        if self.stopping:
            return self.stream is None or self.stream.num_in_flight == 0
        return self.source.exhausted and not self.open

    def _run_engine(self, watch: StallWatch) -> None:
        while True:
            watch.pause()  # waiting for shards is not the engine's stall
            self._top_up()
            if self._done():
                return
            if not self.open:
                continue
            watch.progress()
            try:
                finished = self.stream.step() if self.stream is not None else []
            except Exception as exc:
                if watch.stalled or not getattr(self.engine, "alive", True):
                    exc = EngineStalled(f"no engine step for {self.stall_timeout_s or 0:.0f} s; the engine was "
                                        f"stopped ({type(exc).__name__}: {exc})")
                self._engine_failed(exc)
                return
            watch.progress()
            for item in finished:
                self._finished(item.owner, item.index, item.result)

    def _batch(self) -> int:  # the engine's batch: requests it runs at once
        return getattr(getattr(self.engine, "engine_config", None), "max_num_seqs", 16)

    def _capacity(self) -> int:  # a full batch running and as many waiting
        return 2 * self._batch()

    def _top_up(self) -> None:
        """Open every shard the source has ready, then add waiting requests up to the capacity."""
        if self.stopping:
            return
        while not self.source.exhausted and not (self.sequential and self.open):
            shard = self.source.take(block=not self.open)  # wait only when the engine has nothing to do
            if shard is not None:
                self._open(shard)
            elif self.source.exhausted:
                self._longest_first()
            else:
                break
        if self.open:  # the engine starts only once a shard has something to generate
            stream = self._ensure_engine()
            if self.to_learn:
                self._hook("learn", self.to_learn)
                self.to_learn = []
            added = 0
            while self.waiting and stream.num_in_flight < self._capacity():
                if self.handover is not None and self.handover.alone and self.waiting[0][0] != -math.inf \
                        and stream.num_in_flight:
                    break
                _, _, key, index, _ = heapq.heappop(self.waiting)
                shard = self.open.get(key)
                if shard is None:
                    continue  # its shard failed: its requests were released then
                if shard.num_added == 0:
                    shard.started = time.perf_counter()
                stream.add(key, index, shard.shard.requests[index])
                shard.num_added += 1
                added += 1
            self.source.release(added)
        if self.run_tail and self.source.exhausted and not self.waiting and self.stream is not None \
                and not self.ending_told:
            self.ending_told = True
            self._hook("set_stream_ending", True)  # nothing more will join: the run's tail

    def _longest_first(self) -> None:
        """Every shard loaded: longest expected first (a handover's leads still before them), so that
        no long request starts last and runs alone."""
        self.waiting = [(first if first == -math.inf else -expected, arrival, key, index, expected)
                        for first, arrival, key, index, expected in self.waiting]
        heapq.heapify(self.waiting)

    def _open(self, shard: ShardRequests[C]) -> None:
        leads = self.handover.leads.get(shard.key, set()) if self.handover is not None else set()
        if shard.error is not None or not shard.requests:
            self._put(ShardOutcome(shard, [], ShardStats.aggregate([]), 0.0, shard.error))
            self._leads_resolved(len(leads))
            return
        self.open[shard.key] = _InEngine(shard, [None] * len(shard.requests), num_added=len(shard.done),
                                         started=time.perf_counter() if shard.done else 0.0)
        expected = shard.expected_tokens or [0.0] * len(shard.requests)
        for index, tokens in enumerate(expected):
            if index not in shard.done:
                first = -math.inf if index in leads else 0.0
                heapq.heappush(self.waiting, (first, self.arrivals, shard.key, index, tokens))
                self.arrivals += 1
        self.source.release(len(shard.done))
        self.to_learn.extend((EngineStream.request_id(shard.key, i), shard.requests[i].prompt_token_ids,
                              r.output_token_ids) for i, r in shard.done.items())
        for index, result in shard.done.items():
            self._finished(shard.key, index, result, counted=True)  # by the stream that generated it

    def _finished(self, key: str, index: int, result: GenerationResult, counted: bool = False) -> None:
        shard = self.open.get(key)
        if shard is None:
            return  # its shard failed meanwhile
        result.sample = shard.shard.requests[index].sample
        shard.results[index] = result
        shard.num_done += 1
        if self.handover is not None and index in self.handover.leads.get(key, ()):
            self.lead_results.append(result)
            self._leads_resolved(1)
        if not counted:
            self.totals.num_output_tokens += len(result.output_token_ids)
            if self.on_progress is not None:
                self.on_progress(result)
        if shard.num_done == len(shard.results):
            del self.open[key]
            results = [r for r in shard.results if r is not None]
            stats = ShardStats.of_results(results)
            for counts in shard.shard.done_source_counts:
                stats.add_source_counts(counts)
            if self.stream is not None:
                stats.add_source_counts(self.stream.take_source_counts(key, len(results)))
            self._put(ShardOutcome(shard.shard, results, stats, time.perf_counter() - shard.started))

    def _put(self, outcome: ShardOutcome[C]) -> None:  # held while a handover awaits its answer
        (self.held.append if self.handover is not None else self.finisher.put)(outcome)

    def _leads_resolved(self, num: int) -> None:
        self.leads_left -= num
        if self.handover is not None and num and self.leads_left <= 0:
            self._hand_over()

    def _hand_over(self) -> None:
        """Ask the handover, with the stream's totals so far; then hand on the shards held for it."""
        assert self.handover is not None
        so_far = dataclasses.replace(self.totals, engine_start_s=self.engines.start_s)
        if self.stream is not None:
            self._add_stream_times(so_far)
        self.stopping = not self.handover.go_on(self.lead_results, so_far)
        self.handover = None
        for outcome in self.held:
            self.finisher.put(outcome)
        self.held.clear()

    def left(self) -> list[ShardRequests[C]]:
        """Once stopped: the shards it did not finish (their finished results and drafts in them), in order."""
        left = []
        for key, shard in self.open.items():
            counts = self.stream.take_source_counts(key, len(shard.results)) if self.stream is not None else {}
            left.append(dataclasses.replace(
                shard.shard, done={i: r for i, r in enumerate(shard.results) if r is not None},
                done_source_counts=[*shard.shard.done_source_counts, counts]))
            self.source.release(len(shard.results) - shard.num_added)
        while (shard := self.source.take(block=True)) is not None:
            left.append(shard)
            self.source.release(len(shard.requests))  # the read-ahead may be waiting for room
        return left

    def _stop_stalled(self) -> None:
        self._hook("stop_stalled", self.stall_timeout_s or 0.0)

    def _engine_failed(self, exc: Exception) -> None:
        """The shards in the dead engine fail (each named); a fresh engine takes the rest."""
        failed = [key for key, shard in self.open.items() if shard.num_added]
        log.error("the engine failed with %d shard(s) in it: %s", len(failed), exc)
        for key in failed:
            shard = self.open.pop(key)
            self.source.release(len(shard.results) - shard.num_added)  # its waiting requests are dropped
            self._put(ShardOutcome(shard.shard, [], ShardStats.aggregate([]), 0.0, _named(exc, shard.shard)))
            if self.handover is not None:  # its leads that had not finished never will
                self._leads_resolved(sum(shard.results[i] is None for i in self.handover.leads.get(key, ())))
        if self.stream is not None:
            self._add_stream_times(self.totals)
            self.stream = None
        self.engines.drop()
        self.engine = None


def _named(exc: BaseException, shard: ShardRequests[Any]) -> BaseException:
    return (EngineStalled if isinstance(exc, EngineStalled) else RuntimeError)(f"{shard.source}: {exc}")
