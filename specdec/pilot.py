"""Method `auto`: which engine pays on this run's own data. A pilot splits a sample of a shard
kind's requests between a speculation-free engine and specdec (neighbouring requests on
alternate engines, every result kept: no request runs twice), and the kind continues on the
faster one; speculation must win by a margin, since it also costs memory and a second engine
start. This module holds the measurements and the decision; specdec.generate runs them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from specdec.stats import DRAFT_SOURCES
from specdec.streaming import EngineHolder, ShardOutcome, ShardRequests, run_stream
from specdec.types import GenerationResult, SamplingOptions

METHODS = ("none", "specdec")
# Where both engines fit together (vLLM's CPU build), each engine's share runs in two chunks,
# none-specdec then specdec-none: a burst of outside load lands on both engines, not on one.
ROUNDS_TOGETHER = 2
WARM_UP_TOKENS = 4  # per request of an engine's first chunk, untimed


@dataclasses.dataclass(frozen=True)
class PilotPass:
    """One engine's share of the pilot sample."""

    method: str  # none | specdec
    num_requests: int
    num_output_tokens: int
    engine_s: float  # the engine's busy seconds over its share
    start_s: float = 0.0  # engine start paid for this share (0.0: one already running)

    @property
    def tokens_per_s(self) -> float:
        return self.num_output_tokens / self.engine_s if self.engine_s > 0 else 0.0

    def plus(self, other: "PilotPass") -> "PilotPass":
        return PilotPass(self.method, self.num_requests + other.num_requests,
                         self.num_output_tokens + other.num_output_tokens, self.engine_s + other.engine_s,
                         self.start_s + other.start_s)


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
        passes = {name: PilotPass(**data[name]) if data.get(name) else None for name in METHODS}
        return cls(**{**data, **passes})


def kind_label(kind: str) -> str:
    return kind or "(top level)"


def decide(kind: str, none: PilotPass, specdec: PilotPass, margin: float) -> PilotDecision:
    """specdec when its tokens per engine-second beat none's by more than `margin` (a share);
    none on a tie or within the margin: speculation has to pay to be chosen. A share that
    produced nothing measurable (a sample cut short by bad rows) cannot win."""
    if none.tokens_per_s <= 0 or specdec.tokens_per_s <= 0:
        method = "specdec" if none.tokens_per_s <= 0 < specdec.tokens_per_s else "none"
        return PilotDecision(kind, method, f"{kind_label(kind)}: the pilot measured nothing on "
                             f"{'none' if none.tokens_per_s <= 0 else 'specdec'}: ran {method}", None, margin,
                             none, specdec)
    speedup = specdec.tokens_per_s / none.tokens_per_s
    method = "specdec" if speedup > 1.0 + margin else "none"
    return PilotDecision(kind, method, f"{kind_label(kind)}: specdec {speedup:.2f}x none in the pilot "
                         f"({none.num_requests} requests on none, {specdec.num_requests} on specdec, margin "
                         f"{margin:.0%}): ran {method}", speedup, margin, none, specdec)


def skipped(kind: str, num_requests: int, min_requests: int, margin: float) -> PilotDecision:
    """A kind too small to amortise a pilot runs specdec without one, and says so."""
    return PilotDecision(kind, "specdec", f"{kind_label(kind)}: {num_requests} requests, under the pilot's "
                         f"minimum of {min_requests}: ran specdec without a pilot", None, margin)


Pick = tuple[ShardRequests[Any], int]  # a request: its shard and its index there


def sample(shards: Sequence[ShardRequests[Any]], size: int) -> list[Pick]:
    """`size` requests spread evenly over the shards' requests, in order."""
    everything = [(shard, index) for shard in shards for index in range(len(shard.requests))]
    step = len(everything) / size if size else 0
    return [everything[int(i * step)] for i in range(min(size, len(everything)))]


def schedule(picks: Sequence[Pick], rounds: int) -> list[tuple[str, list[ShardRequests[list[int]]]]]:
    """The pilot's chunks in the order they run: neighbouring picks go to alternate engines
    (none first), each engine's share cut into `rounds` chunks, the engines' order alternating
    round by round. A chunk holds one sub-shard per shard (same key; its context: the
    requests' indices in their shard)."""
    shares = {method: picks[i::len(METHODS)] for i, method in enumerate(METHODS)}
    order: list[tuple[str, list[ShardRequests[list[int]]]]] = []
    for r in range(rounds):
        for method in (METHODS if r % 2 == 0 else METHODS[::-1]):
            share = shares[method]
            chunk = share[len(share) * r // rounds:len(share) * (r + 1) // rounds]
            if chunk:
                order.append((method, _sub_shards(chunk)))
    return order


def _sub_shards(picks: Sequence[Pick]) -> list[ShardRequests[list[int]]]:
    subs: dict[str, ShardRequests[list[int]]] = {}
    for shard, index in picks:
        sub = subs.setdefault(shard.key, ShardRequests(shard.key, shard.source, [], []))
        sub.requests.append(shard.requests[index])
        sub.context.append(index)
    return list(subs.values())


@dataclasses.dataclass
class Kept:
    """One chunk's results of a shard's sampled requests, by their index in the shard."""

    results: dict[int, GenerationResult] = dataclasses.field(default_factory=dict)
    source_counts: dict[str, tuple[int, int]] = dataclasses.field(default_factory=dict)


def run_chunk(method: str, engine: EngineHolder, chunk: Sequence[ShardRequests[list[int]]], sampling: SamplingOptions,
              stall_timeout_s: float, warm_up: bool) -> tuple[PilotPass, dict[str, Kept]]:
    """A chunk of the pilot through one engine as one stream; its results name the engine
    (`method`). A sub-shard that fails (a stalled engine) counts for nothing and keeps nothing.
    `warm_up`: untimed, the chunk for a few tokens first: a fresh engine's first steps at each
    batch shape build their kernels, and the prompts' prefill is cached for the timed run."""
    start_s = engine.start_s
    if warm_up:
        few = [ShardRequests(sub.key, sub.source, [dataclasses.replace(r, max_tokens=WARM_UP_TOKENS) for r in sub.requests],
                             []) for sub in chunk]
        run_stream(few, engine, sampling, lambda _: None, read_ahead_requests=sum(len(s.requests) for s in few),
                   stall_timeout_s=stall_timeout_s)
    kept: dict[str, Kept] = {}

    def take(outcome: ShardOutcome[list[int]]) -> None:
        if outcome.error is None:
            results = [dataclasses.replace(r, method=method) for r in outcome.results]
            kept[outcome.shard.key] = Kept(dict(zip(outcome.shard.context, results)), {
                source: (d, a) for source, d, a in zip(DRAFT_SOURCES, outcome.stats.drafted_by_source,
                                                       outcome.stats.accepted_by_source)})

    totals = run_stream(chunk, engine, sampling, take, read_ahead_requests=sum(len(s.requests) for s in chunk),
                        stall_timeout_s=stall_timeout_s, sequential=False)
    num_requests = sum(len(k.results) for k in kept.values())
    tokens = sum(len(r.output_token_ids) for k in kept.values() for r in k.results.values())
    return PilotPass(method, num_requests, tokens, totals.busy_s, engine.start_s - start_s), kept
