"""vLLM's own speculative-decoding counters, read from `LLM.get_metrics()`."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import Any


@dataclasses.dataclass(frozen=True)
class SpecCounters:
    """Cumulative engine counters; subtract two snapshots for one batch's figures."""

    num_drafts: int = 0
    num_draft_tokens: int = 0
    num_accepted_tokens: int = 0
    accepted_per_pos: tuple[int, ...] = ()

    def __sub__(self, other: "SpecCounters") -> "SpecCounters":
        width = max(len(self.accepted_per_pos), len(other.accepted_per_pos))
        mine = list(self.accepted_per_pos) + [0] * (width - len(self.accepted_per_pos))
        theirs = list(other.accepted_per_pos) + [0] * (width - len(other.accepted_per_pos))
        return SpecCounters(
            self.num_drafts - other.num_drafts,
            self.num_draft_tokens - other.num_draft_tokens,
            self.num_accepted_tokens - other.num_accepted_tokens,
            tuple(a - b for a, b in zip(mine, theirs)),
        )


def read_spec_counters(metrics: Iterable[Any]) -> SpecCounters:
    """Sum the spec-decode counters over all engines/labels in a metrics snapshot."""
    values = {"num_drafts": 0, "num_draft_tokens": 0, "num_accepted_tokens": 0}
    per_pos: list[int] = []
    for metric in metrics:
        name = metric.name.removeprefix("vllm:spec_decode_")
        if name in values:
            values[name] += int(metric.value)
        elif name == "num_accepted_tokens_per_pos":
            for i, v in enumerate(metric.values):
                if i >= len(per_pos):
                    per_pos.append(0)
                per_pos[i] += int(v)
    return SpecCounters(accepted_per_pos=tuple(per_pos), **values)
