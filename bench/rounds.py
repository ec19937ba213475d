"""The real-engine bench's rounds: in which order methods and batch sizes are measured, and
what the rounds add up to (median ratio to `none`, with its spread over rounds).

Rounds alternate the methods over the same prompts, so that a slow minute of a shared
machine hits every method alike; the method order rotates from round to round, so no method
always runs first (or right after `none`).
"""

from __future__ import annotations

import dataclasses
import statistics
from collections.abc import Sequence

REFERENCE = "none"
# Methods whose cross-request state lives inside vLLM, out of our reach: a fresh engine for
# every measurement is the only way to start each one cold.
UNRESETTABLE = frozenset({"suffix"})


@dataclasses.dataclass(frozen=True)
class Step:
    round: int  # from 0
    method: str
    batch_size: int


def schedule(methods: Sequence[str], batch_sizes: Sequence[int], rounds: int) -> list[Step]:
    """Every round measures every method at every batch size, the methods alternating at
    each batch size in an order that rotates from round to round."""
    if rounds < 1:
        raise ValueError(f"rounds must be at least 1, not {rounds}")
    steps: list[Step] = []
    for round_ in range(rounds):
        shift = round_ % len(methods)
        order = list(methods[shift:]) + list(methods[:shift])
        steps += [Step(round_, m, b) for b in batch_sizes for m in order]
    return steps


@dataclasses.dataclass(frozen=True)
class Timing:
    """One measurement: the prefill pass (before the decode clock starts) and the decode pass."""

    round: int
    method: str
    batch_size: int
    num_output_tokens: int
    prefill_s: float  # the max_tokens=1 pass that fills the prefix cache before the clock
    decode_s: float  # generating the outputs with every prompt already in the prefix cache

    @property
    def decode_tokens_per_s(self) -> float:
        return self.num_output_tokens / self.decode_s

    @property
    def tokens_per_s(self) -> float:
        """End to end: prefill and decode (the prefill pass's one token counted once)."""
        return self.num_output_tokens / (self.prefill_s + self.decode_s)


@dataclasses.dataclass(frozen=True)
class Spread:
    median: float
    low: float
    high: float

    @classmethod
    def of(cls, values: Sequence[float]) -> "Spread":
        return cls(statistics.median(values), min(values), max(values))


@dataclasses.dataclass(frozen=True)
class Summary:
    """One method at one batch size over all rounds."""

    method: str
    batch_size: int
    rounds: int
    decode_tokens_per_s: Spread
    tokens_per_s: Spread
    prefill_s: float  # median
    decode_ratio: Spread | None  # to none in the same round; None without none
    ratio: Spread | None


def summarize(timings: Sequence[Timing]) -> list[Summary]:
    """Per method and batch size (in first-seen order). Ratios pair each round with `none`'s
    in the same round, so a slow round slows both sides of the ratio."""
    by_key: dict[tuple[str, int], list[Timing]] = {}
    for t in timings:
        by_key.setdefault((t.method, t.batch_size), []).append(t)
    summaries = []
    for (method, batch_size), runs in by_key.items():
        paired = _same_round(runs, by_key.get((REFERENCE, batch_size), []))
        summaries.append(Summary(
            method, batch_size, len(runs),
            Spread.of([t.decode_tokens_per_s for t in runs]),
            Spread.of([t.tokens_per_s for t in runs]),
            statistics.median(t.prefill_s for t in runs),
            Spread.of([t.decode_tokens_per_s / n.decode_tokens_per_s for t, n in paired]) if paired else None,
            Spread.of([t.tokens_per_s / n.tokens_per_s for t, n in paired]) if paired else None,
        ))
    return summaries


def _same_round(runs: Sequence[Timing], others: Sequence[Timing]) -> list[tuple[Timing, Timing]]:
    base = {t.round: t for t in others}
    return [(t, base[t.round]) for t in runs if t.round in base]
