"""Prices a batched replay's step log with a step-time model and a drafting cost.

Each step costs its forward, t(rows, scheduled tokens, KV tokens, draft-KV tokens) from the
cost model, plus the drafter's own time for the call that follows it (vLLM drafts between
forwards, with the accelerator idle). A step that mixes prefill chunks with decoding rows is
split: its decode part is what the step would cost over the decoding rows alone, plus the
drafting; the rest is prefill (at the cost model's prefill rate where it has one). Decode
tokens/s counts every output token but each request's first (prefill's).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from bench.cost_models import CostModel


@dataclasses.dataclass(frozen=True)
class DraftCost:
    """What drafting adds to a step: the drafter's measured CPU time, or a figure per call,
    per row called and per token emitted."""

    per_row_s: float = 0.0
    per_emitted_token_s: float = 0.0
    per_call_s: float = 0.0  # per step with a drafter call (a batch drafter's fixed cost)
    measured: bool = False
    source: str = "no drafter"

    def seconds(self, log: dict[str, np.ndarray]) -> np.ndarray:
        if self.measured:
            return log["draft_cpu_s"]
        return (self.per_call_s * (log["num_proposed"] > 0) + self.per_row_s * log["num_proposed"]
                + self.per_emitted_token_s * log["num_emitted"])


@dataclasses.dataclass(frozen=True)
class Priced:
    seconds: float  # end to end: prefill, decode and drafting
    decode_seconds: float  # decode forwards (their share of mixed steps) plus drafting
    draft_seconds: float
    num_steps: int
    mean_running: float  # requests running per step (vLLM's "Running: N reqs")
    mean_drafted_per_row_step: float  # draft tokens verified per decoding row per step
    num_decode_row_steps: int  # forwards of decoding rows (each request's prefill adds one more)

    def tokens_per_s(self, num_output_tokens: int) -> float:
        return num_output_tokens / self.seconds if self.seconds > 0 else 0.0

    def tokens_per_forward(self, num_output_tokens: int, num_requests: int) -> float:
        """Output tokens per target forward of a request (its prefill included); unlike the
        stats' figure, draft tokens accepted past the stop point do not count."""
        forwards = self.num_decode_row_steps + num_requests
        return num_output_tokens / forwards if forwards else 0.0

    def decode_tokens_per_s(self, num_output_tokens: int, num_requests: int) -> float:
        decode_tokens = num_output_tokens - num_requests  # the first token of each is prefill's
        return decode_tokens / self.decode_seconds if self.decode_seconds > 0 else 0.0


def price(log: dict[str, np.ndarray], cost: CostModel, draft: DraftCost) -> Priced:
    forward = cost.seconds(log["num_rows"], log["num_tokens"], log["num_kv_tokens"], log["num_draft_kv_tokens"])
    forward = forward + cost.prefill_correction(log["num_rows"] - log["num_decode_rows"],
                                                log["num_tokens"] - log["num_decode_tokens"])
    decoding = log["num_decode_rows"] > 0
    decode_forward = np.where(
        decoding, cost.seconds(log["num_decode_rows"], log["num_decode_tokens"], log["num_decode_kv_tokens"],
                               log["num_decode_draft_kv_tokens"]), 0.0
    )
    drafting = draft.seconds(log)
    decode_row_steps = float(log["num_decode_rows"].sum())
    return Priced(
        seconds=float(forward.sum() + drafting.sum()),
        decode_seconds=float(decode_forward.sum() + drafting.sum()),
        draft_seconds=float(drafting.sum()),
        num_steps=int(forward.shape[0]),
        mean_running=float(log["num_running"].mean()) if forward.shape[0] else 0.0,
        mean_drafted_per_row_step=float(log["num_drafted"].sum()) / decode_row_steps if decode_row_steps else 0.0,
        num_decode_row_steps=int(decode_row_steps),
    )
