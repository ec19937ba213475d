"""Replay simulator: what verification would accept, without running a model.

Given a request's prompt tokens and the target's continuation (its reference: greedy, or one
sample drawn at a temperature), step through decoding exactly as vLLM does: each target
forward verifies the current draft (the longest prefix matching the reference tokens is
accepted), then emits one token of its own, then the proposer drafts again from the grown
sequence. The same controller as in the real engine makes the decisions, so with a greedy
reference per-request accepted counts match the real engine's. With a sampled reference a
draft token is accepted iff it equals the sampled token at its position: as likely as the
engine's rejection sampling accepting it (docs/internals.md, "Benchmarks"), so acceptance
rates match in expectation, not token for token.

`greedy_tokens` may run past `max_tokens` (a reference generated with a few extra tokens and
`ignore_eos`): vLLM verifies drafts against the model even past the stop point and counts
those acceptances, and the replay can only match that when it knows those tokens.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np

from specdec.budget import StepCostModel
from specdec.config import SpecConfig
from specdec.controller import Controller, make_controller
from specdec.drafting.base import Proposer
from specdec.stats import RequestStats, request_stats


@dataclasses.dataclass(frozen=True)
class ReplayRequest:
    id: str
    prompt_token_ids: Sequence[int]
    # The target's continuation, greedy or sampled (may exceed max_tokens); named for the
    # greedy case, the replay makes no other use of greediness.
    greedy_tokens: Sequence[int]
    max_tokens: int
    stop_token_ids: frozenset[int] = frozenset()


@dataclasses.dataclass(frozen=True)
class ReplayResult:
    id: str
    output_token_ids: list[int]
    per_step_drafted: list[int]
    per_step_accepted: list[int]
    stats: RequestStats


def replay(
    requests: Sequence[ReplayRequest],
    config: SpecConfig,
    proposer: Proposer | None = None,
    cost: StepCostModel | None = None,
) -> list[ReplayResult]:
    """Replay requests one after another through one controller (state shared as in vLLM).

    With `cost` the batch budget sizes drafts as it would for a batch of one request
    under that step-cost model (a scripted stand-in for the engine's measured one).
    """
    return replay_with(make_controller(config, proposer), requests, cost)


def replay_with(
    controller: Controller, requests: Sequence[ReplayRequest], cost: StepCostModel | None = None
) -> list[ReplayResult]:
    """`replay` through a given controller: its state (cross-request cache, history) stays
    for the next call, as a vLLM engine's does from one generate call to the next."""
    return [_replay_one(req, controller, controller.config.k_ceiling, cost) for req in requests]


def _replay_one(
    req: ReplayRequest, controller: Controller, k_ceiling: int, cost: StepCostModel | None
) -> ReplayResult:
    greedy = np.asarray(req.greedy_tokens, dtype=np.int64)
    sequence = np.concatenate([np.asarray(req.prompt_token_ids, dtype=np.int64), greedy])
    prompt_len = len(req.prompt_token_ids)
    num_out = 1  # the prefill forward emits the first token
    drafted: list[int] = []
    accepted: list[int] = []
    num_accepted_last = 0
    while not is_finished(greedy, num_out, req):
        [draft] = controller.step_tokens([req.id], [sequence[: prompt_len + num_out]], [num_accepted_last], cost,
                                         num_prompt_tokens=[prompt_len])
        num_accepted_last = num_matching(draft, greedy[num_out:])
        if draft.shape[0]:
            drafted.append(int(draft.shape[0]))
            accepted.append(num_accepted_last)
        num_out += num_accepted_last + 1
        if num_out > len(greedy):
            raise ValueError(f"request {req.id}: greedy_tokens too short to replay to the stop point")
    # vLLM drafts once more
    controller.step_tokens([req.id], [sequence[: prompt_len + num_out]], [num_accepted_last],
                           num_prompt_tokens=[prompt_len])
    controller.finish(req.id)
    output = truncated_output(greedy, num_out, req)
    stats = request_stats(len(output), drafted, accepted, k_ceiling, controller.config.speculative)
    return ReplayResult(req.id, output, drafted, accepted, stats)


def num_matching(draft: np.ndarray, reference: np.ndarray) -> int:
    n = min(draft.shape[0], reference.shape[0])
    mismatch = np.flatnonzero(draft[:n] != reference[:n])
    return int(mismatch[0]) if mismatch.size else n


def is_finished(greedy: np.ndarray, num_out: int, req: ReplayRequest) -> bool:
    if num_out >= req.max_tokens:
        return True
    return bool(req.stop_token_ids) and any(int(t) in req.stop_token_ids for t in greedy[:num_out])


def truncated_output(greedy: np.ndarray, num_out: int, req: ReplayRequest) -> list[int]:
    out = [int(t) for t in greedy[: min(num_out, req.max_tokens)]]
    for i, tok in enumerate(out):
        if tok in req.stop_token_ids:
            return out[: i + 1]
    return out
