"""One benchmark result row, for both engines (replay and real vLLM)."""

from __future__ import annotations

import dataclasses

from specdec.stats import Totals


@dataclasses.dataclass(frozen=True)
class BenchRecord:
    method: str
    engine: str  # replay | vllm
    dataset: str
    batch_size: int
    k_max: int
    num_requests: int
    tokens_per_forward: float
    acceptance_rate: float
    outputs_identical_to_none: bool | None
    started_from: str
    accepted_per_pos: list[int]
    num_output_tokens: int
    tokens_per_s: float | None = None  # real engine only
    seconds: float | None = None  # real engine only

    @classmethod
    def from_stats(cls, total: Totals, **fields) -> "BenchRecord":
        return cls(
            tokens_per_forward=total.tokens_per_forward,
            acceptance_rate=total.acceptance_rate,
            accepted_per_pos=total.accepted_per_pos,
            num_output_tokens=total.num_output_tokens,
            **fields,
        )
