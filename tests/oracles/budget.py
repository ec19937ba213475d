"""The batch budget, naive (the oracle of packaging/specdec_native/src/budget.cc): how many
draft tokens each row of a batch may verify.

Each draft position has a probability of being accepted; `allocate_drafts` adds positions in
order of that probability per second for as long as the step's expected tokens per second
still rise.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np

from oracles.step_shapes import draft_token_seconds, seconds_for_tokens
from specdec.step_cost import StepCostModel


def geometric_gains(alpha: float, length: int) -> np.ndarray:
    """Acceptance probability of draft positions 1..length at per-token acceptance `alpha`."""
    return float(np.clip(alpha, 0.0, 1.0)) ** np.arange(1, length + 1)


def allocate_drafts(gains: Sequence[np.ndarray], cost: StepCostModel, contexts: np.ndarray) -> list[int]:
    """Draft length per row maximising expected tokens per second of the step.

    `contexts[i]` is the context row i holds in the KV cache (`row_contexts`): the rows'
    sum lengthens the step whatever is drafted, so drafts weigh less against it, and a row
    that drafts pays for its context once more (the draft-KV term), so a draft in a long
    row costs more. `gains[i][j]` is the probability that row i's draft position j+1 is
    accepted (non-increasing in j: a position counts only if all before it were accepted);
    every row yields one token per step whatever it drafts. Positions are taken best gain
    per second of a row's first drafted token first (within a row that is their order),
    and the step is priced exactly for every prefix of that order (a row's context counted
    at its first position); the best prefix is taken. Without the draft-KV term a row's
    tokens cost alike and that prefix is the optimum for expected tokens over an affine
    step time; with it a row's further tokens are ranked at its first token's price, so
    the budget errs towards fewer rows with longer drafts, the cheaper shape.
    """
    num_rows = len(gains)
    if num_rows == 0:
        return []
    lengths = np.array([g.shape[0] for g in gains], dtype=np.int64)
    if lengths.sum() == 0:
        return [0] * num_rows
    contexts = np.asarray(contexts, dtype=np.int64)
    num_kv_tokens = int(contexts.sum())
    gain = np.concatenate([np.asarray(g, dtype=np.float64) for g in gains])
    row = np.repeat(np.arange(num_rows), lengths)
    position = np.arange(row.size) - np.repeat(np.cumsum(lengths) - lengths, lengths)
    unit = np.maximum(draft_token_seconds(cost, num_rows, num_kv_tokens, contexts), MIN_TOKEN_SECONDS)
    order = np.lexsort((position, -(gain / unit[row])))  # best first; a row's positions stay in order
    expected = num_rows + np.concatenate([[0.0], np.cumsum(gain[order])])
    num_tokens = num_rows + np.arange(row.size + 1)
    first = position[order] == 0  # a row's first drafted token: its context is priced once
    draft_kv = np.concatenate([[0], np.cumsum(np.where(first, contexts[row[order]], 0))])
    seconds = seconds_for_tokens(cost, num_rows, num_tokens, num_kv_tokens, draft_kv)
    best = int(np.argmax(expected / np.maximum(seconds, 1e-12)))  # ties: fewest drafts
    return np.bincount(row[order[:best]], minlength=num_rows).astype(int).tolist()


MIN_TOKEN_SECONDS = 1e-30  # a drafted token said to cost nothing still orders by its gain


def first_draft_thresholds(cost: StepCostModel, contexts: np.ndarray, lookup_s: float = 0.0) -> np.ndarray:
    """Per row, the acceptance probability a draft token needs, at the least, to pay for
    itself in a step of these rows (`row_contexts`): its gain against the time it adds to
    a step without drafts (verifying it in that row, plus `lookup_s`, the drafter's time
    to find it). Further tokens face a higher bar (each one taken raises the step's tokens
    per second), so a row whose best token stays below this gets nothing from
    `allocate_drafts`."""
    contexts = np.asarray(contexts, dtype=np.int64)
    num_rows = int(contexts.shape[0])
    num_kv_tokens = int(contexts.sum())
    base = cost.seconds(num_rows, num_rows, num_kv_tokens, 0)
    extra = draft_token_seconds(cost, num_rows, num_kv_tokens, contexts)
    return num_rows * (extra + lookup_s) / max(base, 1e-12)


@dataclasses.dataclass
class AcceptanceEstimate:
    """Per-token acceptance of one request's drafts, shrunk towards a shared prior.

    Each verified draft is a run of accepted tokens ended by one rejection (unless all were
    accepted); counts decay so a request whose text changes character is re-learned.
    """

    accepted: float = 0.0
    rejected: float = 0.0

    def observe(self, num_drafted: int, num_accepted: int, decay: float) -> None:
        rejected = 1 if num_accepted < num_drafted else 0
        fade = decay ** (num_accepted + rejected)  # per token tried, so long drafts don't dominate
        self.accepted = self.accepted * fade + num_accepted
        self.rejected = self.rejected * fade + rejected

    def rate(self, prior: float, prior_weight: float) -> float:
        total = self.accepted + self.rejected + prior_weight
        return (self.accepted + prior * prior_weight) / total
