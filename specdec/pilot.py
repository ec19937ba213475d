"""Method `auto`: which engine pays on this run's own data. A pilot runs a sample of a shard
kind's requests on a speculation-free engine, then with specdec, and the kind continues on
the faster one; speculation must win by a margin, since it also costs memory and a second
engine start. This module holds the measurements and the decision; specdec.auto_run runs them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from specdec.stats import DRAFT_SOURCES
from specdec.streaming import EngineFactory, EngineHolder, ShardOutcome, ShardRequests, run_stream
from specdec.types import GenerationResult, SamplingOptions


@dataclasses.dataclass(frozen=True)
class PilotPass:
    """One engine's pass over the pilot sample."""

    method: str  # none | specdec
    num_requests: int
    num_output_tokens: int
    engine_s: float  # the engine's busy seconds over the pass
    start_s: float = 0.0  # engine start paid for this pass (0.0: one already running)

    @property
    def tokens_per_s(self) -> float:
        return self.num_output_tokens / self.engine_s if self.engine_s > 0 else 0.0


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

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "PilotDecision":
        passes = {name: PilotPass(**data[name]) if data.get(name) else None for name in ("none", "specdec")}
        return cls(**{**data, **passes})


def kind_label(kind: str) -> str:
    return kind or "(top level)"


def decide(kind: str, none: PilotPass, specdec: PilotPass, margin: float) -> PilotDecision:
    """specdec when its tokens per engine-second beat none's by more than `margin` (a share);
    none on a tie or within the margin: speculation has to pay to be chosen. A pass that
    produced nothing measurable (a sample cut short by bad rows) cannot win."""
    if none.tokens_per_s <= 0 or specdec.tokens_per_s <= 0:
        method = "specdec" if none.tokens_per_s <= 0 < specdec.tokens_per_s else "none"
        return PilotDecision(kind, method, f"{kind_label(kind)}: the pilot measured nothing on "
                             f"{'none' if none.tokens_per_s <= 0 else 'specdec'}: ran {method}", None, margin,
                             none, specdec)
    speedup = specdec.tokens_per_s / none.tokens_per_s
    method = "specdec" if speedup > 1.0 + margin else "none"
    return PilotDecision(kind, method, f"{kind_label(kind)}: specdec {speedup:.2f}x none in the pilot "
                         f"({none.num_requests} requests, margin {margin:.0%}): ran {method}", speedup, margin,
                         none, specdec)


def skipped(kind: str, num_requests: int, min_requests: int, margin: float) -> PilotDecision:
    """A kind too small to amortise a pilot runs specdec without one, and says so."""
    return PilotDecision(kind, "specdec", f"{kind_label(kind)}: {num_requests} requests, under the pilot's "
                         f"minimum of {min_requests}: ran specdec without a pilot", None, margin)


def sample(shards: Sequence[ShardRequests[Any]], size: int) -> list[ShardRequests[list[int]]]:
    """`size` requests spread evenly over the shards' requests in order, as one sub-shard per
    shard (same key; its context: the requests' indices in their shard)."""
    everything = [(shard, index) for shard in shards for index in range(len(shard.requests))]
    step = len(everything) / size
    picked: dict[str, ShardRequests[list[int]]] = {}
    for shard, index in (everything[int(i * step)] for i in range(min(size, len(everything)))):
        sub = picked.setdefault(shard.key, ShardRequests(shard.key, shard.source, [], []))
        sub.requests.append(shard.requests[index])
        sub.context.append(index)
    return list(picked.values())


@dataclasses.dataclass
class Kept:
    """The chosen pass's results of one shard's sampled requests, by their index in the shard."""

    results: dict[int, GenerationResult] = dataclasses.field(default_factory=dict)
    source_counts: dict[str, tuple[int, int]] = dataclasses.field(default_factory=dict)


def run_pass(method: str, engine: EngineFactory, pilot: Sequence[ShardRequests[list[int]]], sampling: SamplingOptions,
             stall_timeout_s: float) -> tuple[PilotPass, dict[str, Kept]]:
    """The pilot's requests through one engine as one stream; a sub-shard that fails (a
    stalled engine) counts for nothing and keeps nothing."""
    holder = EngineHolder(engine)
    # Untimed, a few tokens first: a fresh engine's first steps build its kernels for new shapes.
    warm_up = pilot[0].requests[0]
    run_stream([ShardRequests("warm-up", "pilot warm-up", [dataclasses.replace(warm_up, max_tokens=8)], [])],
               holder, sampling, lambda _: None, read_ahead_requests=1, stall_timeout_s=stall_timeout_s)
    kept: dict[str, Kept] = {}

    def take(outcome: ShardOutcome[list[int]]) -> None:
        if outcome.error is None:
            kept[outcome.shard.key] = Kept(dict(zip(outcome.shard.context, outcome.results)), {
                source: (d, a) for source, d, a in zip(DRAFT_SOURCES, outcome.stats.drafted_by_source,
                                                       outcome.stats.accepted_by_source)})

    totals = run_stream(pilot, holder, sampling, take, read_ahead_requests=sum(len(s.requests) for s in pilot),
                        stall_timeout_s=stall_timeout_s, sequential=False)
    num_requests = sum(len(k.results) for k in kept.values())
    tokens = sum(len(r.output_token_ids) for k in kept.values() for r in k.results.values())
    return PilotPass(method, num_requests, tokens, totals.busy_s, holder.start_s), kept
