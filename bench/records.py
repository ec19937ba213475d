"""The records `specdec bench --json` writes: one per method, K and batch size (and cost
model), for the real engine and the projection. `specdec store-bench` reads them."""

from __future__ import annotations

import dataclasses

from specdec.stats import Totals


@dataclasses.dataclass(frozen=True)
class BenchRecord:
    """One method at one K and batch size on the real engine, over interleaved rounds."""

    method: str
    engine: str  # vllm
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
    # Medians over the rounds:
    tokens_per_s: float | None = None  # end to end: the prefill pass and the decode pass
    seconds: float | None = None  # the same, per round
    decode_tokens_per_s: float | None = None  # prompts already in the prefix cache
    prefill_seconds: float | None = None
    rounds: int | None = None
    # Ratio to none in the same round: median, and min and max over the rounds.
    speedup_vs_none: float | None = None  # end to end
    speedup_min: float | None = None
    speedup_max: float | None = None
    decode_speedup_vs_none: float | None = None
    decode_speedup_min: float | None = None
    decode_speedup_max: float | None = None
    # The workload (bench.reference.Workload): greedy, or sampled; the epoch measured.
    temperature: float = 0.0
    samples: int = 1
    epoch: int = 1

    @classmethod
    def from_stats(cls, total: Totals, **fields) -> "BenchRecord":
        return cls(
            tokens_per_forward=total.tokens_per_forward,
            acceptance_rate=total.acceptance_rate,
            accepted_per_pos=total.accepted_per_pos,
            num_output_tokens=total.num_output_tokens,
            **fields,
        )


@dataclasses.dataclass(frozen=True)
class ProjectionRecord:
    """One method at one K and batch size, replayed in batches and priced by a cost model
    (bench/projection.py). Not a measurement: acceptance from the bundled model's
    greedy or sampled outputs, step times from `cost_model`."""

    method: str
    engine: str  # projected:<cost model>
    cost_model: str
    dataset: str
    batch_size: int
    k_max: int  # 0 for none
    num_requests: int
    mean_running: float  # requests running per step
    projected_tokens_per_s: float  # end to end: prefill, decode and drafting
    projected_decode_tokens_per_s: float  # decode steps (their share of mixed steps) and drafting
    speedup_vs_none: float  # end to end, against none at the same batch size and cost model
    decode_speedup_vs_none: float
    tokens_per_forward: float
    acceptance_rate: float
    mean_drafted_tokens_per_step: float  # draft tokens verified per running request per step
    drafting_share: float  # the drafter's share of the projected time
    best_k: bool  # the fastest K of this method, dataset, batch size and cost model
    outputs_identical_to_none: bool
    started_from: str
    draft_cost: str  # how the drafter's time was counted
    accepted_per_pos: list[int]
    num_output_tokens: int
    tokens_per_s: float  # = projected_tokens_per_s, the column plots and store-bench read
    temperature: float = 0.0  # the workload (bench.reference.Workload); the epoch measured
    samples: int = 1
    epoch: int = 1
