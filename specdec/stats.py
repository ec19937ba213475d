"""Acceptance statistics: request -> shard -> run. Data only, no I/O. Each figure is named by its
formula (docs/internals.md, "Statistics"); every target forward yields one token of its own besides
the accepted draft tokens, so forwards = output tokens - accepted."""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Protocol, TypeVar

from specdec.native import draft_sources

# Names that older workers and databases used for today's figures: old -> new.
LEGACY_NAMES: dict[str, str] = {"mean_accepted_length": "tokens_per_forward"}

# Where specdec's drafted tokens came from, as the compiled core names them (own text, cache,
# sibling samples, history, live requests).
DRAFT_SOURCES: tuple[str, ...] = draft_sources()


class _Rates:
    num_output_tokens: int
    num_steps: int
    num_draft_tokens: int
    num_accepted_tokens: int

    @property
    def acceptance_rate(self) -> float:
        return _ratio(self.num_accepted_tokens, self.num_draft_tokens)

    @property
    def tokens_per_forward(self) -> float:
        return _ratio(self.num_output_tokens, self.num_steps)


@dataclasses.dataclass
class RequestStats(_Rates):
    """Per-request acceptance figures as the engine really ran them."""

    num_output_tokens: int
    num_steps: int  # target forwards that produced output tokens (prefill included)
    num_drafts: int
    num_draft_tokens: int
    num_accepted_tokens: int
    accepted_per_pos: list[int]
    k_histogram: list[int]
    num_fallback_steps: int

    def to_columns(self) -> dict[str, Any]:
        """One row of the results table (RESULT_SCHEMA's statistics columns)."""
        row = dataclasses.asdict(self)
        row.update(acceptance_rate=self.acceptance_rate, tokens_per_forward=self.tokens_per_forward)
        return row


def request_stats(num_output_tokens: int, per_step_drafted: Sequence[int], per_step_accepted: Sequence[int],
                  k_ceiling: int, speculative: bool = True) -> RequestStats:
    """Per-request figures from vLLM's detailed per-request metrics (one entry per decode step
    that verified a draft); the replay simulator builds its RequestStats here too. Decode
    steps without a draft are the fallback steps; the K histogram counts every decode step by
    its draft's length (index 0: no draft; speculative methods only)."""
    num_accepted = int(sum(per_step_accepted))
    num_steps = max(1, num_output_tokens - num_accepted) if num_output_tokens else 0
    k_histogram: list[int] = []
    num_fallback = 0
    if speculative:
        num_fallback = max(num_steps - 1 - len(per_step_drafted), 0)
        k_histogram = [num_fallback] + [0] * k_ceiling
        for drafted in per_step_drafted:
            k_histogram[drafted] += 1
    per_pos = [sum(1 for a in per_step_accepted if a > pos) for pos in range(k_ceiling)]  # drafts accepted there
    return RequestStats(
        num_output_tokens=num_output_tokens, num_steps=num_steps, num_drafts=len(per_step_drafted),
        num_draft_tokens=int(sum(per_step_drafted)), num_accepted_tokens=num_accepted, accepted_per_pos=per_pos,
        k_histogram=k_histogram, num_fallback_steps=num_fallback)


class AttributedRequest(Protocol):  # specdec.types.GenerationResult

    stats: RequestStats
    engine_s: float  # engine seconds attributed to the request; 0.0: not attributed


_T = TypeVar("_T", bound="Totals")


@dataclasses.dataclass
class Totals(_Rates):
    """Sums of per-request figures over a group of requests (a shard, a run)."""

    num_requests: int = 0
    num_output_tokens: int = 0
    num_steps: int = 0
    num_drafts: int = 0
    num_draft_tokens: int = 0
    num_accepted_tokens: int = 0
    num_fallback_steps: int = 0
    accepted_per_pos: list[int] = dataclasses.field(default_factory=list)
    k_histogram: list[int] = dataclasses.field(default_factory=list)
    # Per DRAFT_SOURCES entry: drafted tokens verified, and accepted, from that source
    # (specdec only; the drafter counts them per request).
    drafted_by_source: list[int] = dataclasses.field(default_factory=list)
    accepted_by_source: list[int] = dataclasses.field(default_factory=list)
    engine_s: float = 0.0  # engine seconds attributed to the requests (0.0: not attributed)

    @property
    def tokens_per_engine_s(self) -> float:
        return _ratio(self.num_output_tokens, self.engine_s)

    def add(self, other: "Totals | RequestStats", engine_s: float = 0.0) -> None:
        """Add a request's figures with its engine seconds, or another group's sums."""
        self.num_requests += other.num_requests if isinstance(other, Totals) else 1
        self.engine_s += other.engine_s if isinstance(other, Totals) else engine_s
        for name in _COUNTERS:
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.accepted_per_pos = _add_lists(self.accepted_per_pos, other.accepted_per_pos)
        self.k_histogram = _add_lists(self.k_histogram, other.k_histogram)
        if isinstance(other, Totals):
            self.drafted_by_source = _add_lists(self.drafted_by_source, other.drafted_by_source)
            self.accepted_by_source = _add_lists(self.accepted_by_source, other.accepted_by_source)

    def add_source_counts(self, counts: Mapping[str, tuple[int, int]]) -> None:
        """Add per-source (drafted, accepted) counts, as the drafter takes them for a request."""
        if not counts:
            return
        unknown = set(counts) - set(DRAFT_SOURCES)
        if unknown:
            raise ValueError(f"unknown draft sources {sorted(unknown)}; known: {DRAFT_SOURCES}")
        drafted = [int(counts.get(s, (0, 0))[0]) for s in DRAFT_SOURCES]
        accepted = [int(counts.get(s, (0, 0))[1]) for s in DRAFT_SOURCES]
        self.drafted_by_source = _add_lists(self.drafted_by_source, drafted)
        self.accepted_by_source = _add_lists(self.accepted_by_source, accepted)

    def to_dict(self) -> dict[str, Any]:
        """The fields plus the derived figures (for JSON and logs)."""
        row = dataclasses.asdict(self)
        row.update(acceptance_rate=self.acceptance_rate, tokens_per_forward=self.tokens_per_forward,
                   tokens_per_engine_s=self.tokens_per_engine_s)
        return row

    @classmethod
    def from_dict(cls: type[_T], data: Mapping[str, Any]) -> _T:
        """Read back `to_dict()`, also an older or newer worker's: missing fields keep their
        defaults; derived figures and unknown keys are ignored."""
        fields = {f.name for f in dataclasses.fields(cls)}
        return cls(**{name: [int(v) for v in value] if isinstance(value, list)
                      else float(value) if name == "engine_s" else int(value)
                      for name, value in data.items() if name in fields and value is not None})


_COUNTERS = ("num_output_tokens", "num_steps", "num_drafts", "num_draft_tokens",
             "num_accepted_tokens", "num_fallback_steps")


@dataclasses.dataclass
class ShardStats(Totals):  # sums over the requests of one shard (or any group)

    @classmethod
    def aggregate(cls, requests: Iterable[RequestStats]) -> "ShardStats":
        """Sums of requests without their engine time (engine_s stays 0.0: see of_results)."""
        total = cls()
        for req in requests:
            total.add(req)
        return total

    @classmethod
    def of_results(cls, results: Iterable[AttributedRequest]) -> "ShardStats":
        """Sums of results, engine seconds included (a request's result: GenerationResult)."""
        total = cls()
        for result in results:
            total.add(result.stats, result.engine_s)
        return total


@dataclasses.dataclass
class RunStats(Totals):  # sums over the shards of one run

    num_shards: int = 0

    @classmethod
    def aggregate(cls, shards: Iterable[Totals]) -> "RunStats":
        total = cls()
        for shard in shards:
            total.add(shard)
            total.num_shards += 1
        return total


def _ratio(num: int, den: int) -> float:
    return num / den if den else 0.0


def _add_lists(a: list[int], b: list[int]) -> list[int]:
    return [x + y for x, y in itertools.zip_longest(a, b, fillvalue=0)]
