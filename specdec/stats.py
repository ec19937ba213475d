"""Acceptance statistics: per step -> per request -> per shard. Data only, no I/O.

Notation as in vLLM: a *draft* is one proposal of up to K tokens for one request in one
step; *accepted* tokens are draft tokens the target agreed with; every target forward also
yields one more token (recovered or bonus), so tokens per target forward = 1 + accepted/steps.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import Any


@dataclasses.dataclass
class RequestTrace:
    """What our proposer did for one request (recorded in the worker)."""

    num_steps: int = 0  # decode steps the proposer was consulted for
    num_fallback_steps: int = 0  # steps run without a draft (paused or no match)
    num_verified_drafts: int = 0
    num_verified_draft_tokens: int = 0
    num_verified_accepted: int = 0
    k_histogram: list[int] = dataclasses.field(default_factory=list)  # index = K chosen

    @classmethod
    def empty(cls, k_max: int) -> "RequestTrace":
        return cls(k_histogram=[0] * (k_max + 1))

    def record_step(self, k: int, num_drafted: int) -> None:
        self.num_steps += 1
        self.k_histogram[k] += 1
        if num_drafted == 0:
            self.num_fallback_steps += 1

    def record_verified(self, num_drafted: int, num_accepted: int) -> None:
        self.num_verified_drafts += 1
        self.num_verified_draft_tokens += num_drafted
        self.num_verified_accepted += num_accepted

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclasses.dataclass
class RequestStats:
    """Per-request acceptance figures as the engine really ran them."""

    num_output_tokens: int
    num_steps: int  # target forwards that produced output tokens (prefill included)
    num_drafts: int
    num_draft_tokens: int
    num_accepted_tokens: int
    accepted_per_pos: list[int]
    k_histogram: list[int]
    num_fallback_steps: int

    @property
    def acceptance_rate(self) -> float:
        return self.num_accepted_tokens / self.num_draft_tokens if self.num_draft_tokens else 0.0

    @property
    def mean_accepted_length(self) -> float:
        """Tokens per target forward: output tokens / forwards."""
        return self.num_output_tokens / self.num_steps if self.num_steps else 0.0

    def to_columns(self) -> dict[str, Any]:
        row = dataclasses.asdict(self)
        row["acceptance_rate"] = self.acceptance_rate
        row["mean_accepted_length"] = self.mean_accepted_length
        return row


@dataclasses.dataclass
class ShardStats:
    """Sums over the requests of one shard (or any group of requests)."""

    num_requests: int = 0
    num_output_tokens: int = 0
    num_steps: int = 0
    num_drafts: int = 0
    num_draft_tokens: int = 0
    num_accepted_tokens: int = 0
    num_fallback_steps: int = 0
    accepted_per_pos: list[int] = dataclasses.field(default_factory=list)
    k_histogram: list[int] = dataclasses.field(default_factory=list)

    @classmethod
    def aggregate(cls, requests: Iterable[RequestStats]) -> "ShardStats":
        total = cls()
        for req in requests:
            total.num_requests += 1
            total.num_output_tokens += req.num_output_tokens
            total.num_steps += req.num_steps
            total.num_drafts += req.num_drafts
            total.num_draft_tokens += req.num_draft_tokens
            total.num_accepted_tokens += req.num_accepted_tokens
            total.num_fallback_steps += req.num_fallback_steps
            total.accepted_per_pos = _add_lists(total.accepted_per_pos, req.accepted_per_pos)
            total.k_histogram = _add_lists(total.k_histogram, req.k_histogram)
        return total

    @property
    def acceptance_rate(self) -> float:
        return self.num_accepted_tokens / self.num_draft_tokens if self.num_draft_tokens else 0.0

    @property
    def mean_accepted_length(self) -> float:
        return self.num_output_tokens / self.num_steps if self.num_steps else 0.0

    def to_dict(self) -> dict[str, Any]:
        row = dataclasses.asdict(self)
        row["acceptance_rate"] = self.acceptance_rate
        row["mean_accepted_length"] = self.mean_accepted_length
        return row


def _add_lists(a: list[int], b: list[int]) -> list[int]:
    out = list(a) + [0] * max(0, len(b) - len(a))
    for i, value in enumerate(b):
        out[i] += value
    return out
