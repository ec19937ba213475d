"""Method `auto`: which engine pays on this run's own data. A pilot splits a sample of a shard
kind's requests between a speculation-free engine and specdec (neighbours on alternate engines,
every result kept): none's share runs as one chunk, then specdec's leads the kind's stream on
specdec, which goes on if specdec was the faster, else hands the rest to none. Speculation must
win by a margin, since it also costs memory and a second engine start (compared on full-batch
steps: part-full ones flatter speculation, see `basis`). This module holds the measurements and
the decision; specdec.generate runs them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

from specdec.stats import DRAFT_SOURCES
from specdec.streaming import EngineHolder, ShardOutcome, ShardRequests, StreamTotals, run_stream
from specdec.types import GenerationResult, SamplingOptions

METHODS = ("none", "specdec")
FULL_BATCH_STEPS, WHOLE_SHARES = "full-batch steps", "whole shares"


@dataclasses.dataclass(frozen=True)
class PilotPass:
    """One engine's share of the pilot sample."""

    method: str  # none | specdec
    num_requests: int
    num_output_tokens: int
    engine_s: float  # its engine seconds: a chunk's busy time; leads in a stream, their attributed time
    start_s: float = 0.0  # engine start paid for this share (0.0: one already running)
    full_batch_s: float = 0.0  # of engine_s, its full-batch steps (EngineStream.full_batch_s)
    full_batch_tokens: int = 0  # the output tokens of those steps

    @property
    def tokens_per_s(self) -> float:
        return self.tokens_per_s_on(WHOLE_SHARES)

    def tokens_per_s_on(self, basis: str | None) -> float:  # FULL_BATCH_STEPS, or else the whole share
        tokens, s = (self.full_batch_tokens, self.full_batch_s) if basis == FULL_BATCH_STEPS else \
            (self.num_output_tokens, self.engine_s)
        return tokens / s if s > 0 else 0.0


@dataclasses.dataclass(frozen=True)
class PilotDecision:
    """The engine one shard kind ran on, and what the pilot measured to choose it."""

    kind: str  # the shards' folder inside the run's source ("": its top level, or one file)
    method: str  # none | specdec
    reason: str  # one sentence for a person
    speedup: float | None  # specdec / none output tokens per engine-second; None: no pilot ran
    margin: float
    none: PilotPass | None = None
    specdec: PilotPass | None = None

    @property
    def basis(self) -> str | None:
        """The rates `speedup` compares (None: no pilot ran)."""
        return None if self.none is None or self.specdec is None else basis(self.none, self.specdec)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "PilotDecision":
        passes = {name: PilotPass(**data[name]) if data.get(name) else None for name in METHODS}
        return cls(**{**data, **passes})


def basis(none: PilotPass, specdec: PilotPass) -> str:
    """What the decision compares: output tokens per second of the full-batch steps
    (EngineStream.full_batch_s) where both shares had some, as most of a long run's steps are (a
    part-full step leaves none's rows idle where specdec fills them with drafts); else per
    engine-second of the whole shares."""
    return FULL_BATCH_STEPS if none.full_batch_s > 0 and specdec.full_batch_s > 0 else WHOLE_SHARES


def kind_label(kind: str) -> str:
    return kind or "(top level)"


def decide(kind: str, none: PilotPass, specdec: PilotPass, margin: float) -> PilotDecision:
    """specdec when its output tokens per second (`basis`) beat none's by more than `margin` (a
    share); none on a tie or within the margin: speculation has to pay to be chosen. A share that
    produced nothing measurable (a sample cut short by bad rows) cannot win."""
    compared = basis(none, specdec)
    none_rate, specdec_rate = none.tokens_per_s_on(compared), specdec.tokens_per_s_on(compared)
    if none_rate <= 0 or specdec_rate <= 0:
        method = "specdec" if none_rate <= 0 < specdec_rate else "none"
        return PilotDecision(kind, method, f"{kind_label(kind)}: the pilot measured nothing on "
                             f"{'none' if none_rate <= 0 else 'specdec'}: ran {method}", None, margin, none, specdec)
    speedup = specdec_rate / none_rate
    method = "specdec" if speedup > 1.0 + margin else "none"
    where = "the pilot's full-batch steps" if compared == FULL_BATCH_STEPS else "the pilot"
    return PilotDecision(kind, method, f"{kind_label(kind)}: specdec {speedup:.2f}x none in {where} "
                         f"({none.num_requests} requests on none in {none.engine_s:.1f} s, {specdec.num_requests} on "
                         f"specdec in {specdec.engine_s:.1f} s, margin {margin:.0%}): ran {method}", speedup, margin,
                         none, specdec)


def skipped(kind: str, num_requests: int, min_requests: int, margin: float) -> PilotDecision:
    """A kind too small to amortise a pilot runs specdec without one, and says so."""
    return PilotDecision(kind, "specdec", f"{kind_label(kind)}: {num_requests} requests, under the pilot's "
                         f"minimum of {min_requests}: ran specdec without a pilot", None, margin)


Pick = tuple[ShardRequests[Any], int]  # a request: its shard and its index there
Chunk = list[ShardRequests[tuple[ShardRequests[Any], list[int]]]]  # sub-shards; context: (shard, indices)


def sample(shards: Sequence[ShardRequests[Any]], size: int) -> list[Pick]:
    """`size` requests spread evenly over the shards' requests, in order."""
    everything = [(shard, index) for shard in shards for index in range(len(shard.requests))]
    step = len(everything) / size if size else 0
    return [everything[int(i * step)] for i in range(min(size, len(everything)))]


def split(picks: Sequence[Pick]) -> tuple[Chunk, dict[str, set[int]]]:
    """Neighbouring picks to alternate engines: none's (1st, 3rd, ...) as one chunk of sub-shards
    (same keys: drafts by source stay per shard), specdec's (2nd, 4th, ...) as the request indices
    by shard key that lead its stream (streaming.Handover): a chunk ends in a drain (its batch
    emptying), which a stream pays once."""
    chunk: dict[str, ShardRequests[tuple[ShardRequests[Any], list[int]]]] = {}
    for shard, index in picks[0::2]:
        sub = chunk.setdefault(shard.key, ShardRequests(shard.key, shard.source, [], (shard, [])))
        sub.requests.append(shard.requests[index])
        sub.context[1].append(index)
    leads: dict[str, set[int]] = {}
    for shard, index in picks[1::2]:
        leads.setdefault(shard.key, set()).add(index)
    return list(chunk.values()), leads


def measured_on_stream(results: Sequence[GenerationResult], so_far: StreamTotals) -> PilotPass:
    """specdec's share where it led the stream: its tokens and engine time, the stream's full-batch steps."""
    return PilotPass("specdec", len(results), sum(len(r.output_token_ids) for r in results),
                     sum(r.engine_s for r in results), so_far.engine_start_s, so_far.full_batch_s,
                     so_far.full_batch_tokens)


def run_chunk(method: str, engine: EngineHolder, chunk: Chunk, sampling: SamplingOptions,
              stall_timeout_s: float, on_progress: Callable[[GenerationResult], None] | None = None) -> PilotPass:
    """A chunk through one engine as one stream, its results and drafts by source kept in their
    shards; a sub-shard that fails (a stalled engine) counts for nothing and keeps nothing. Its
    prefills are timed with it, as the run pays them on either engine (no untimed warm-up)."""
    start_s, kept = engine.start_s, []

    def keep(outcome: ShardOutcome[tuple[ShardRequests[Any], list[int]]]) -> None:
        if outcome.error is None:
            shard, indices = outcome.shard.context
            shard.done.update((i, dataclasses.replace(r, method=method)) for i, r in zip(indices, outcome.results))
            shard.done_source_counts.append(dict(zip(DRAFT_SOURCES, zip(outcome.stats.drafted_by_source,
                                                                        outcome.stats.accepted_by_source))))
            kept.extend(outcome.results)

    totals = run_stream(chunk, engine, sampling, keep, read_ahead_requests=sum(len(s.requests) for s in chunk),
                        stall_timeout_s=stall_timeout_s, run_tail=False, on_progress=on_progress)
    tokens = sum(len(r.output_token_ids) for r in kept)
    return PilotPass(method, len(kept), tokens, totals.busy_s, engine.start_s - start_s, totals.full_batch_s,
                     totals.full_batch_tokens)
