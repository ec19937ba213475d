"""Replay: score a drafter on the target's known outputs without running the target.

Given each request's reference continuation (greedy, or one sample at a temperature), decode
as vLLM does: each target forward verifies the current draft (the longest prefix equal to the
reference is accepted) and emits one token of its own, then the drafter drafts again from the
grown sequence. With a greedy reference the accepted counts are the real engine's; with a
sampled one, accepting a draft token iff it equals the sampled token is exactly as likely as
the engine's rejection sampling accepting it, so acceptance matches in expectation.

`reference_tokens` may run past `max_tokens` (generated with a few extra tokens and EOS
ignored): vLLM verifies drafts past the stop point and counts those acceptances too.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np

from bench.drafters import Drafter
from specdec.stats import RequestStats, request_stats


@dataclasses.dataclass(frozen=True)
class ReplayRequest:
    id: str
    prompt_token_ids: Sequence[int]
    reference_tokens: Sequence[int]  # the target's continuation, greedy or sampled
    max_tokens: int
    stop_token_ids: frozenset[int] = frozenset()


@dataclasses.dataclass(frozen=True)
class ReplayResult:
    id: str
    output_token_ids: list[int]
    per_step_drafted: list[int]
    per_step_accepted: list[int]
    stats: RequestStats


def replay(requests: Sequence[ReplayRequest], drafter: Drafter) -> list[ReplayResult]:
    """Requests one after another through one drafter, whose state (the cross-request cache)
    carries over from one request, and one call, to the next as in a vLLM engine."""
    return [_replay_one(req, drafter) for req in requests]


def _replay_one(req: ReplayRequest, drafter: Drafter) -> ReplayResult:
    reference = np.asarray(req.reference_tokens, dtype=np.int64)
    sequence = np.concatenate([np.asarray(req.prompt_token_ids, dtype=np.int64), reference])
    prompt_len = len(req.prompt_token_ids)
    stop_at = stop_point(reference, req)
    num_out, num_accepted = 1, 0  # the prefill forward emits the first token
    drafted: list[int] = []
    accepted: list[int] = []
    while True:
        [draft] = drafter.step_tokens([req.id], [sequence[: prompt_len + num_out]], [num_accepted],
                                      num_prompt_tokens=[prompt_len])
        if num_out >= stop_at:  # vLLM drafts once more before it sees the request finished
            break
        num_accepted = num_matching(draft, reference[num_out:])
        if draft.shape[0]:
            drafted.append(int(draft.shape[0]))
            accepted.append(num_accepted)
        num_out += num_accepted + 1
        if num_out > len(reference):
            raise ValueError(f"request {req.id}: reference_tokens too short to replay to the stop point")
    drafter.finish(req.id)
    output = [int(t) for t in reference[:stop_at]]
    stats = request_stats(len(output), drafted, accepted, drafter.config.k_ceiling, drafter.config.speculative)
    return ReplayResult(req.id, output, drafted, accepted, stats)


def num_matching(draft: np.ndarray, reference: np.ndarray) -> int:
    """How many leading tokens of `draft` equal `reference`'s: the accepted ones."""
    n = min(draft.shape[0], reference.shape[0])
    mismatch = np.flatnonzero(draft[:n] != reference[:n])
    return int(mismatch[0]) if mismatch.size else n


def stop_point(reference: np.ndarray, req: ReplayRequest) -> int:
    """Output tokens once the first stop token is out, or max_tokens."""
    stops = np.flatnonzero(np.isin(reference, list(req.stop_token_ids))) if req.stop_token_ids else []
    return min(req.max_tokens, int(stops[0]) + 1) if len(stops) else req.max_tokens


def expected_output(req: ReplayRequest) -> list[int]:
    """The output the real engine gives: the reference up to its stop point."""
    reference = np.asarray(req.reference_tokens, dtype=np.int64)
    return [int(t) for t in reference[: stop_point(reference, req)]]
