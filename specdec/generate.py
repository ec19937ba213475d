"""The one generate path: validated prompt rows -> results table + quarantined rows, for
`specdec generate` (one file) and the pipeline's worker (many shards) alike. A row that cannot
run is quarantined with its reason, the others run; results are keyed by (id, sample).
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import functools
import itertools
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any, Generic, TypeVar

import pyarrow as pa

from specdec import pilot
from specdec.engine_cache import close_other_engines, engine_configs, engines_fit_together, get_engine
from specdec.length_history import LengthHistory
from specdec.models import resolve_model, tokenizer_digest
from specdec.params import GenerationParams
from specdec.prompts import InputError, PromptRow, RejectedRow, reject_greedy_samples, tokenize_rows
from specdec.results_table import results_to_table
from specdec.stats import ShardStats
from specdec.streaming import EngineHolder, Handover, ShardOutcome, ShardRequests, StreamTotals, run_stream
from specdec.types import GenerationResult

C = TypeVar("C")  # what the caller carries with each shard


@dataclasses.dataclass
class Generation:

    results: pa.Table
    stats: ShardStats
    quarantined: list[RejectedRow]  # rows that did not run, validation and tokenize alike
    engine_start_s: float
    generate_s: float  # from its first request in the engine to its last finished
    num_prompts: int = 0  # rows that ran; results hold one row per (id, sample)
    # what vLLM resolved for the engine that generated it (VllmEngine.resolved; {}: an engine
    # that reports none), recorded with the results so each path shows what reached vLLM
    engine: dict[str, Any] = dataclasses.field(default_factory=dict)
    method: str = ""  # the method that generated it (under auto: none or specdec)
    decision: pilot.PilotDecision | None = None  # under auto: the choice made for its kind

    @property
    def tokens_per_s(self) -> float:
        return self.stats.num_output_tokens / self.generate_s if self.generate_s > 0 else 0.0


@dataclasses.dataclass(frozen=True)
class ShardRows(Generic[C]):
    """A shard's validated rows, before tokenizing: what a caller hands `generate_shards`."""

    key: str
    source: str  # names the shard in every message
    rows: Sequence[PromptRow]
    rejected: Sequence[RejectedRow]
    context: C = None  # type: ignore[assignment]  # the caller's own, handed back with its generation
    error: BaseException | None = None  # it could not be read: nothing to generate
    kind: str = ""  # its folder inside the run's source: method auto decides per kind


ShardDone = Callable[[C, Generation | None, BaseException | None], None]  # (context, generation, error)


def generate_shards(shards: Iterable[ShardRows[C]], params: GenerationParams, config_hash: str,
                    config: dict[str, Any], on_done: ShardDone[C], *, sequential: bool = False, strict: bool = False,
                    on_progress: Callable[[Any], None] | None = None,
                    decided: Mapping[str, pilot.PilotDecision] | None = None,
                    on_decision: Callable[[pilot.PilotDecision], None] = lambda _: None) -> StreamTotals:
    """Generate every shard through one engine stream; `on_done(context, generation, error)`
    gets each shard once, as soon as its last request finishes (in a background thread unless
    `sequential`). `strict`: a row that cannot run fails its shard before any of it runs.
    Method auto: each kind of shard runs on the engine its pilot chose (`decided`: choices
    made before, e.g. by the run being resumed; `on_decision` hears each new one first).
    Raises ConfigError or ModelError before any shard is read."""
    if params.method == "auto":
        return _generate_auto(shards, params, config_hash, config, on_done, decided or {}, on_decision,
                              sequential=sequential, strict=strict, on_progress=on_progress)
    return _generate_stream(shards, params, config_hash, config, on_done, sequential=sequential, strict=strict,
                            on_progress=on_progress)


def _generate_stream(shards: Iterable[ShardRows[C]], params: GenerationParams, config_hash: str,
                     config: dict[str, Any], on_done: ShardDone[C], *, sequential: bool, strict: bool,
                     on_progress: Callable[[Any], None] | None, piloted: Mapping[str, ShardRequests[C]] | None = None,
                     decision: Callable[[], pilot.PilotDecision | None] = lambda: None, pilot_start_s: float = 0.0,
                     handover: Handover[C] | None = None) -> StreamTotals:
    """One method's stream (`piloted`: shards the pilot tokenized, its results in them, by key;
    `decision`: under auto, its kind's, once made; `pilot_start_s`: the pilot's engine starts,
    put on the first shard with the stream's own; `handover`: it may stop and hand shards back)."""
    engine_configs(params)
    resolved: list[dict[str, Any]] = [{}]  # of the stream's latest engine

    def start_engine() -> tuple[Any, float]:
        # a stream that may hand over keeps the engine it would hand over to
        engine, start_s = get_engine(params, keep_others=True) if handover is not None else get_engine(params)
        resolved[0] = dict(getattr(engine, "resolved", None) or {})
        return engine, start_s

    engines = EngineHolder(start_engine)
    reported_start_s = [-pilot_start_s]  # engine start time already put on a shard

    def loads() -> Iterable[ShardRequests[C]]:
        history = _length_history(params)
        for shard in shards:
            try:
                tokenized = (piloted or {}).get(shard.key) or _tokenized(shard, params, engines, strict)
                if history is not None and tokenized.requests:
                    tokenized.expected_tokens = history.expected_tokens(tokenized.requests)
                yield tokenized
            except Exception as exc:  # this shard cannot run; the others go on
                yield ShardRequests(shard.key, shard.source, [], shard.context, list(shard.rejected), exc)

    def hand_on(outcome: ShardOutcome[C]) -> None:
        shard = outcome.shard
        if outcome.error is not None:
            on_done(shard.context, None, outcome.error)
            return
        num_samples = collections.Counter(r.id for r in shard.requests)  # what each row asked for
        table = results_to_table(outcome.results, params.method, config_hash, config, num_samples, resolved[0])
        # An engine start goes on the first shard handed on after it: the shards' sum is the run's.
        start_s, reported_start_s[0] = engines.start_s - reported_start_s[0], engines.start_s
        decided = decision()
        on_done(shard.context, Generation(table, outcome.stats, shard.quarantined, start_s, outcome.generate_s,
                                          len(num_samples), resolved[0], decided.method if decided else params.method,
                                          decided), None)

    return run_stream(loads(), engines, params.sampling(), hand_on, read_ahead_requests=params.read_ahead_requests,
                      stall_timeout_s=params.stall_timeout_s, sequential=sequential, on_progress=on_progress,
                      handover=handover)


def _generate_auto(shards: Iterable[ShardRows[C]], params: GenerationParams, config_hash: str,
                   config: dict[str, Any], on_done: ShardDone[C], decided: Mapping[str, pilot.PilotDecision],
                   on_decision: Callable[[pilot.PilotDecision], None], **stream: Any) -> StreamTotals:
    """Method auto: shards of one kind in a row are one segment; a segment's kind runs on the
    engine decided for it before (a resume), or its pilot decides now. The pilot's engine time
    is the run's (in the totals) and its engine starts go on the segment's first shard."""
    engine_configs(params)  # checked before any shard is read, as for one method
    run = functools.partial(_generate_stream, config_hash=config_hash, config=config, on_done=on_done, **stream)
    totals, decided, chosen = StreamTotals(), dict(decided), params
    for kind, segment in itertools.groupby(shards, key=lambda shard: shard.kind):
        pilot_start_s = 0.0
        if kind not in decided:
            head = _take_requests(segment, params.pilot_min_requests, params.samples)
            started = time.perf_counter()
            share = _none_share(kind, head, params, stream["strict"], stream["on_progress"])
            share.totals.wall_s = time.perf_counter() - started  # the run's wall time: its starts included
            totals.add(share.totals)
            if share.skipped is None:
                totals.add(_specdec_share_leading(kind, head, segment, share, params, decided, on_decision, run))
                chosen = params.model_copy(update={"method": decided[kind].method})
                continue
            decided[kind] = share.skipped
            on_decision(share.skipped)
            segment, pilot_start_s = itertools.chain(head, segment), share.totals.engine_start_s
        decision = decided[kind]
        chosen = params.model_copy(update={"method": decision.method})
        if not engines_fit_together():  # on a GPU the other engine's memory is needed now
            close_other_engines(chosen)
        totals.add(run(segment, chosen, decision=lambda d=decision: d, pilot_start_s=pilot_start_s))
    # Where both fit, the other engine stayed up for the next kind's pilot; it goes now, in the
    # background (stopping an engine takes seconds of CPU, which would slow the stream beside it).
    close_other_engines(chosen)
    return totals


def _take_requests(shards: Iterator[ShardRows[C]], num_requests: int, samples: int) -> list[ShardRows[C]]:
    """The first shards, until they hold `num_requests` requests (rows x samples) or run out."""
    taken: list[ShardRows[C]] = []
    held = 0
    while held < num_requests and (shard := next(shards, None)) is not None:
        taken.append(shard)
        held += _num_requests([shard], samples)
    return taken


def _num_requests(shards: Sequence[ShardRows[C]], samples: int) -> int:
    """Requests the shards' rows ask for (rows x samples, a row's own samples first)."""
    return sum(row.samples or samples for shard in shards for row in shard.rows)


@dataclasses.dataclass
class _NoneShare(Generic[C]):
    """A kind's pilot, its first half: none's share run, specdec's picked."""

    piloted: dict[str, ShardRequests[C]]  # the shards it tokenized by key, none's results in them
    totals: StreamTotals  # its engine time and starts
    skipped: pilot.PilotDecision | None = None  # the kind is too small for a pilot
    measured: pilot.PilotPass | None = None
    leads: dict[str, set[int]] = dataclasses.field(default_factory=dict)  # specdec's share


def _none_share(kind: str, head: Sequence[ShardRows[C]], params: GenerationParams, strict: bool,
                on_progress: Callable[[Any], None] | None = None) -> _NoneShare[C]:
    """None's share of the kind's pilot over its first shards, skipped when they hold fewer than
    pilot_min_requests requests that can run. The none engine stays up where both fit together
    (vLLM's CPU build): the winner never starts twice."""
    # keep_others: a specdec engine an earlier kind kept stays up for this pilot
    engine = EngineHolder(functools.partial(get_engine, params.model_copy(update={"method": "none"}), exact=True,
                                            keep_others=True))
    piloted: dict[str, ShardRequests[C]] = {}
    num_requests = _num_requests(head, params.samples)
    if num_requests >= params.pilot_min_requests:  # else no engine starts here
        for shard in head:
            with contextlib.suppress(Exception):  # a shard that cannot load fails in the stream, named there
                piloted[shard.key] = _tokenized(shard, params, engine, strict)
        num_requests = sum(len(shard.requests) for shard in piloted.values())  # those that can run
    if num_requests < params.pilot_min_requests:
        return _NoneShare(piloted, StreamTotals(engine_start_s=engine.start_s),
                          pilot.skipped(kind, num_requests, params.pilot_min_requests, params.pilot_margin))
    chunk, leads = pilot.split(pilot.sample(list(piloted.values()), params.pilot_requests))
    measured = pilot.run_chunk("none", engine, chunk, params.sampling(), params.stall_timeout_s, on_progress)
    # its results are counted here, where they were generated, never again in the stream that keeps them
    totals = StreamTotals(busy_s=measured.engine_s, engine_start_s=engine.start_s,
                          num_output_tokens=measured.num_output_tokens)
    return _NoneShare(piloted, totals, measured=measured, leads=leads)


def _specdec_share_leading(kind: str, head: Sequence[ShardRows[C]], segment: Iterator[ShardRows[C]],
                           share: _NoneShare[C], params: GenerationParams, decided: dict[str, pilot.PilotDecision],
                           on_decision: Callable[[pilot.PilotDecision], None],
                           run: Callable[..., StreamTotals]) -> StreamTotals:
    """The pilot's second half on the kind's own stream (`run`: _generate_stream): specdec's share
    leads it; once measured, the kind is decided, and on specdec the stream goes on into the rest
    of the segment (one drain saved); on none, specdec finishes what it holds, none the rest."""
    answered, none_pass = threading.Event(), share.measured
    assert none_pass is not None

    def go_on(lead_results: list[GenerationResult], so_far: StreamTotals) -> bool:
        decision = decided[kind] = pilot.decide(kind, none_pass, pilot.measured_on_stream(lead_results, so_far),
                                                params.pilot_margin)
        on_decision(decision)
        answered.set()
        return decision.method == "specdec"

    def kind_shards() -> Iterator[ShardRows[C]]:
        yield from head
        answered.wait()  # the rest of the kind joins only the engine chosen
        if getattr(decided.get(kind), "method", None) == "specdec":
            yield from segment

    # where none's share never filled the batch, the shares are compared whole: specdec's runs alone too
    handover: Handover[C] = Handover(share.leads, go_on, alone=none_pass.full_batch_s == 0)
    try:
        totals = run(kind_shards(), params.model_copy(update={"method": "specdec"}), piloted=share.piloted,
                     decision=lambda: decided.get(kind), pilot_start_s=share.totals.engine_start_s, handover=handover)
    finally:
        answered.set()  # a stream that failed leaves no reader waiting
    if decided[kind].method == "specdec":
        return totals
    on_none = params.model_copy(update={"method": "none"})
    if not engines_fit_together():
        close_other_engines(on_none)
    left = {shard.key: dataclasses.replace(shard, done={i: r if r.method else dataclasses.replace(r, method="specdec")
                                                        for i, r in shard.done.items()}) for shard in handover.left}
    totals.add(run(itertools.chain((s for s in head if s.key in left), segment), on_none, piloted=left,
                   decision=lambda: decided[kind]))
    return totals


def _length_history(params: GenerationParams) -> LengthHistory | None:
    """Earlier runs' output lengths per prompt, to start long requests first (None: arrival order)."""
    if not (params.long_first and params.cache_file):
        return None
    return LengthHistory.read(params.cache_file, tokenizer_digest(resolve_model(params.model)))


def _tokenized(shard: ShardRows[C], params: GenerationParams, engines: EngineHolder,
               strict: bool) -> ShardRequests[C]:
    if shard.error is not None:
        raise shard.error
    rows, greedy = reject_greedy_samples(shard.rows, params.temperature, shard.source)
    if strict and greedy:
        raise InputError(f"{shard.source}: {len(greedy)} row(s) cannot run: " + "; ".join(r.reason for r in greedy[:5]))
    quarantined = [*shard.rejected, *greedy]
    if not rows:  # zero-row input, or every row rejected: no engine needed
        return ShardRequests(shard.key, shard.source, [], shard.context, quarantined)
    tokenizer = engines.tokenizer()
    max_model_len = engines.get().engine_config.max_model_len
    requests, too_long = tokenize_rows(rows, tokenizer, params.max_tokens, max_model_len, shard.source,
                                       params.prompt_format, params.samples, params.seed)
    if strict and too_long:
        raise InputError(f"{shard.source}: {len(too_long)} row(s) cannot run: " + "; ".join(r.reason for r in too_long[:5]))
    return ShardRequests(shard.key, shard.source, requests, shard.context, [*quarantined, *too_long])


def generate_rows(rows: Sequence[PromptRow], rejected: Sequence[RejectedRow], params: GenerationParams,
                  source: str, config_hash: str, config: dict[str, Any], show_progress: bool = False,
                  strict: bool = False) -> Generation:
    """One file's rows (`specdec generate`): `generate_shards` with one shard; raises what
    failed it (bad input with `strict`, a stalled engine)."""
    done: list[tuple[Generation | None, BaseException | None]] = []
    progress = _Progress(sum(row.samples or params.samples for row in rows)) if show_progress else None
    try:
        generate_shards([ShardRows(source, source, rows, rejected)], params, config_hash, config,
                        lambda _, out, error: done.append((out, error)), sequential=True, strict=strict,
                        on_progress=progress.update if progress is not None else None)
    finally:
        if progress is not None:
            progress.close()
    out, error = done[0]
    if error is not None:
        raise error
    assert out is not None
    return out


class _Progress:
    """A bar of finished requests, drawn from the first one on (not while the engine starts)."""

    def __init__(self, total: int) -> None:
        self.total = total
        self.bar: Any = None

    def update(self, result: Any) -> None:
        if self.bar is None:
            from tqdm import tqdm

            self.bar = tqdm(total=self.total, desc="requests", unit="req")
        self.bar.update(1)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
