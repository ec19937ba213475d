"""Greedy decoding replayed through a controller without a model: each step's draft is
verified against the known continuation."""

from __future__ import annotations

import numpy as np


def seq(*parts: list[int]) -> np.ndarray:
    return np.array([t for part in parts for t in part], dtype=np.int64)


def num_matching(draft: np.ndarray, reference: np.ndarray) -> int:
    """How many of the draft's tokens greedy verification accepts."""
    n = min(draft.shape[0], reference.shape[0])
    mismatch = np.flatnonzero(draft[:n] != reference[:n])
    return int(mismatch[0]) if mismatch.size else n


def replay_greedy(ctl, req_id: str, prompt: list[int], greedy: list[int]) -> list[tuple[int, int]]:
    """Decode `greedy` after `prompt` with `ctl`'s drafts (a controller or its oracle; vLLM's
    order: the prefill emits the first token); (drafted, accepted) per step. The request is
    finished at the end."""
    tokens = seq(prompt, greedy)
    num_out, accepted, steps = 1, 0, []
    while num_out < len(greedy):
        [draft] = ctl.step_tokens([req_id], [tokens[: len(prompt) + num_out]], [accepted], None, [len(prompt)])
        accepted = num_matching(draft, np.array(greedy[num_out:]))
        steps.append((int(draft.size), accepted))
        num_out += accepted + 1
    # vLLM drafts once more from the whole sequence (whose last tokens come past `greedy`'s end
    # when the last draft reached it)
    ctl.step_tokens([req_id], [tokens], [min(accepted, len(greedy))], None, [len(prompt)])
    ctl.finish(req_id)
    return steps
