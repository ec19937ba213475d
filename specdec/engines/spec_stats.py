"""Turn what the engine reports per request into `RequestStats` (one definition for all).

Each target forward yields exactly one token of its own (recovered or bonus) plus the draft
tokens it accepted, so forwards = output tokens - accepted tokens. The replay simulator and
the real engine both go through `request_stats` so their figures mean the same thing.
"""

from __future__ import annotations

from collections.abc import Sequence

from specdec.stats import RequestStats, RequestTrace


def accepted_per_position(per_step_accepted: Sequence[int], k_max: int) -> list[int]:
    counts = [0] * k_max
    for accepted in per_step_accepted:
        for pos in range(min(accepted, k_max)):
            counts[pos] += 1
    return counts


def request_stats(
    num_output_tokens: int,
    per_step_drafted: Sequence[int],
    per_step_accepted: Sequence[int],
    k_max: int,
    trace: RequestTrace | None = None,
) -> RequestStats:
    """Per-request figures from the verified drafts (+ our proposer's trace when present)."""
    num_accepted = int(sum(per_step_accepted))
    return RequestStats(
        num_output_tokens=num_output_tokens,
        num_steps=max(1, num_output_tokens - num_accepted) if num_output_tokens else 0,
        num_drafts=len(per_step_drafted),
        num_draft_tokens=int(sum(per_step_drafted)),
        num_accepted_tokens=num_accepted,
        accepted_per_pos=accepted_per_position(per_step_accepted, k_max),
        k_histogram=list(trace.k_histogram) if trace else [],
        num_fallback_steps=trace.num_fallback_steps if trace else 0,
    )
