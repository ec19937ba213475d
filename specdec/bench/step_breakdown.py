"""Where the decode time goes, per method (`specdec bench --engine vllm --step-breakdown`).

Each timed decode pass of the real-engine bench becomes a `StepWindow`: its wall-clock span
and the steps vLLM's worker recorded in it (specdec/engines/step_profile.py). A decode
step's time is its forward, its sampling (the drafter included) and the engine core's gap
before it (scheduling the step, handling the previous one's output). Everything else in the
window is time outside steps: adding requests, collecting results and traces, the gap before
a prefill step; it is reported per request.

Methods draft different numbers of tokens, and on a CPU every drafted token lengthens the
forward, so step times are compared at matched drafted tokens: the steps of both methods
are grouped by their rows and their whole draft tokens per row (at batch 1: the exact number
of draft tokens), and the comparison weighs each group's median step time by how often the
compared method ran it. Groups either method ran only a few times are left out: their
medians are noise.
"""

from __future__ import annotations

import dataclasses
import statistics
from collections.abc import Sequence

from specdec.bench.rounds import Spread
from specdec.engines.step_profile import StepRecord

MIN_MATCHED_STEPS = 10  # a group needs this many steps on both sides to be compared


@dataclasses.dataclass(frozen=True)
class StepWindow:
    round: int
    method: str
    batch_size: int
    started: float  # perf_counter around the decode pass
    ended: float
    num_requests: int
    steps: tuple[StepRecord, ...]


@dataclasses.dataclass(frozen=True)
class TimedStep:
    record: StepRecord
    core_gap_s: float  # the engine core's time since the previous step ended

    @property
    def seconds(self) -> float:
        return self.core_gap_s + self.record.forward_s + self.record.sample_s


def decode_steps(window: StepWindow) -> list[TimedStep]:
    """The window's decoding steps that follow another step (the first has no gap to time)."""
    steps = sorted(window.steps, key=lambda s: s.started)
    return [TimedStep(s, s.started - prev.ended) for prev, s in zip(steps, steps[1:]) if s.decoding]


def outside_steps_s(window: StepWindow) -> float:
    """The window's time not spent in decode steps (see the module docstring)."""
    in_steps = sum(s.forward_s + s.sample_s for s in window.steps)
    return window.ended - window.started - in_steps - sum(s.core_gap_s for s in decode_steps(window))


@dataclasses.dataclass(frozen=True)
class Breakdown:
    """One method at one batch size: medians over the decode steps of all rounds (seconds)."""

    method: str
    batch_size: int
    num_steps: int
    draft_tokens: float  # mean per step
    step_s: float
    forward_s: float
    sample_s: float  # sampling and bookkeeping, the drafter left out
    propose_s: float
    core_gap_s: float
    outside_per_request_s: float  # median over rounds


def breakdown(windows: Sequence[StepWindow]) -> list[Breakdown]:
    rows = []
    for (method, batch_size), group in _grouped(windows).items():
        steps = [s for w in group for s in decode_steps(w)]
        if not steps:
            continue
        rows.append(Breakdown(
            method, batch_size, len(steps),
            statistics.fmean(s.record.num_draft_tokens for s in steps),
            statistics.median(s.seconds for s in steps),
            statistics.median(s.record.forward_s for s in steps),
            statistics.median(s.record.sample_s - s.record.propose_s for s in steps),
            statistics.median(s.record.propose_s for s in steps),
            statistics.median(s.core_gap_s for s in steps),
            statistics.median(outside_steps_s(w) / w.num_requests for w in group),
        ))
    return rows


def matched_groups(method: Sequence[TimedStep], reference: Sequence[TimedStep]
                   ) -> dict[tuple[int, int], tuple[list[float], list[float]]]:
    """Step times of both sides per group (rows, whole draft tokens per row) that each ran at
    least MIN_MATCHED_STEPS times."""
    ours, theirs = _by_drafts(method), _by_drafts(reference)
    return {key: (ours[key], theirs[key]) for key in sorted(ours)
            if len(ours[key]) >= MIN_MATCHED_STEPS and len(theirs.get(key, ())) >= MIN_MATCHED_STEPS}


def matched_ratio(method: Sequence[TimedStep], reference: Sequence[TimedStep]) -> float | None:
    """`method`'s step time over `reference`'s at matched drafted tokens: each of the
    `matched_groups` weighs in by how often `method` ran it."""
    groups = matched_groups(method, reference)
    if not groups:
        return None
    mine = sum(len(ours) * statistics.median(ours) for ours, _ in groups.values())
    other = sum(len(ours) * statistics.median(theirs) for ours, theirs in groups.values())
    return mine / other


def matched_ratios(windows: Sequence[StepWindow], method: str, reference: str) -> dict[int, Spread]:
    """Per batch size: `matched_ratio` in each round (method and reference from the same
    round), as the median and spread over rounds."""
    by_key = {(w.method, w.batch_size, w.round): w for w in windows}
    ratios: dict[int, list[float]] = {}
    for (name, batch_size, round_), window in by_key.items():
        other = by_key.get((reference, batch_size, round_))
        if name != method or other is None:
            continue
        ratio = matched_ratio(decode_steps(window), decode_steps(other))
        if ratio is not None:
            ratios.setdefault(batch_size, []).append(ratio)
    return {b: Spread.of(r) for b, r in sorted(ratios.items())}


def render_breakdown(windows: Sequence[StepWindow], method: str = "specdec", reference: str = "ngram[2..5]") -> str:
    lines = ["step breakdown (decode steps, medians in ms; outside steps: ms per request, median over rounds)",
             "| method | batch | steps | drafted/step | step | forward | sampling | drafter | engine core | "
             "outside steps / request |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for b in breakdown(windows):
        lines.append(f"| {b.method} | {b.batch_size} | {b.num_steps} | {b.draft_tokens:.2f} | {b.step_s * 1e3:.2f} | "
                     f"{b.forward_s * 1e3:.2f} | {b.sample_s * 1e3:.2f} | {b.propose_s * 1e3:.3f} | "
                     f"{b.core_gap_s * 1e3:.2f} | {b.outside_per_request_s * 1e3:.1f} |")
    groups = _grouped(windows)
    for batch_size, spread in matched_ratios(windows, method, reference).items():
        # Pooled: every round's steps together (the rounds interleave, so a slow spell is shared).
        pooled = [[s for w in groups[(name, batch_size)] for s in decode_steps(w)] for name in (method, reference)]
        lines.append(f"{method} / {reference} step time at matched drafted tokens, batch {batch_size}: "
                     f"{matched_ratio(*pooled):.3f} over all rounds; per round median {spread.median:.3f} "
                     f"({spread.low:.3f}-{spread.high:.3f})")
        lines += [f"  {rows} row(s), {per_row} draft token(s) per row: {statistics.median(ours) * 1e3:.2f} ms "
                  f"({len(ours)} steps) against {statistics.median(theirs) * 1e3:.2f} ms ({len(theirs)})"
                  for (rows, per_row), (ours, theirs) in matched_groups(*pooled).items()]
    return "\n".join(lines)


def _grouped(windows: Sequence[StepWindow]) -> dict[tuple[str, int], list[StepWindow]]:
    groups: dict[tuple[str, int], list[StepWindow]] = {}
    for w in windows:
        groups.setdefault((w.method, w.batch_size), []).append(w)
    return groups


def _by_drafts(steps: Sequence[TimedStep]) -> dict[tuple[int, int], list[float]]:
    groups: dict[tuple[int, int], list[float]] = {}
    for s in steps:
        rows = s.record.num_seqs
        groups.setdefault((rows, s.record.num_draft_tokens // rows), []).append(s.seconds)
    return groups
