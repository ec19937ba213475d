"""Method `auto`: which engine pays on this run's own data. A pilot runs a sample of a shard
kind's requests on a speculation-free engine, then with specdec, and the kind continues on
the faster one; speculation must win by a margin, since it also costs memory and a second
engine start. This module holds the measurements and the decision; specdec.auto_run runs them.
"""

from __future__ import annotations

import dataclasses
from typing import Any


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
