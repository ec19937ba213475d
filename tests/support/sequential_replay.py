"""The replay one request at a time, written as plainly as it reads: the oracle the batched
replay (bench/replay.py `simulate`) is checked against at batch size 1."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from bench.replay import Drafter, ReplayRequest, ReplayResult, num_matching, stop_point
from specdec.stats import request_stats


def sequential_replay(requests: Sequence[ReplayRequest], drafter: Drafter) -> list[ReplayResult]:
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
