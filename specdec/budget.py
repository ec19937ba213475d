"""Batch-level speculation budget: how many draft tokens each row of a batch may verify.

A target forward costs time that grows with the number of sequences and of tokens in it,
and with the context they attend to (`StepCost`); each draft position has a probability of being accepted (from the drafter's
learned confidence, or a**j for a request accepting token by token with probability a).
`allocate_drafts` adds draft positions in order of that probability for as long as the step's expected tokens per second
still rise. Where verification is nearly free (one sequence, weights-bound forward) every
row drafts its full K; where the batch is compute-bound only near-certain drafts pay for
themselves, and with none of those the step runs as it would without speculation.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import NamedTuple, Protocol

import numpy as np


class StepCostModel(Protocol):
    def seconds(self, num_seqs: int, num_tokens: int, num_kv_tokens: int, num_draft_kv_tokens: int = 0) -> float:
        """Predicted wall time of one forward over `num_seqs` rows and `num_tokens` scheduled
        tokens whose rows already hold `num_kv_tokens` tokens in the KV cache;
        `num_draft_kv_tokens` is the context held by the rows that schedule more than one
        token (a decoding row with a draft)."""
        ...


class StepSample(NamedTuple):
    """One measured decode step: rows, scheduled tokens (rows + draft tokens), the context
    those rows already held in the KV cache (their tokens before the step), the context of
    the rows that drafted, seconds. A named tuple: one is made every engine
    step, and a batch of them is one array."""

    num_seqs: int
    num_tokens: int
    num_kv_tokens: int
    num_draft_kv_tokens: int
    seconds: float


class PrefillSample(NamedTuple):
    """One timed prefill: prompts, their tokens, seconds (the generation's wall time less its
    decode steps, so it holds the engine's per-call overhead too)."""

    num_seqs: int
    num_tokens: int
    seconds: float


def fit_prefill_token_seconds(samples: Sequence[PrefillSample]) -> float | None:
    """Seconds per prompt token of prefill: the slope of a least-squares line through the
    samples (its intercept takes the per-call overhead); None with fewer than two distinct
    token counts."""
    tokens = np.array([s.num_tokens for s in samples], dtype=np.float64)
    if np.unique(tokens).shape[0] < 2:
        return None
    secs = np.array([s.seconds for s in samples], dtype=np.float64)
    a = np.stack([np.ones_like(tokens), tokens / tokens.max()], axis=1)
    return float(_nonnegative_lstsq(a, secs)[1] / tokens.max())


@dataclasses.dataclass(frozen=True)
class StepCost:
    """t = fixed + per_seq * rows + per_token * tokens + per_kv_token * KV tokens
    + per_draft_kv_token * the context of each row that drafts (seconds, >= 0).

    The KV term is attention reading the context: without it a batch of long requests is
    under-priced, and the budget over-values the drafts' share of the step. The draft-KV
    term is what a row's first drafted token costs over its context beyond its own token:
    vLLM's CPU attention takes a row with more than one query token at a cost that grows
    with its context, once per row rather than per drafted token (measured with forced
    drafts, 4 rows of 1,500 tokens: about 3 ms for one drafted token per row, 6.4 ms for
    five). The budget therefore prices a row's first drafted token higher than its others;
    on a GPU, where a decode step reads the KV cache once whatever its query tokens, the
    term should come out near zero.
    """

    fixed_s: float
    per_seq_s: float
    per_token_s: float
    per_kv_token_s: float = 0.0
    per_draft_kv_token_s: float = 0.0

    def seconds(self, num_seqs: int, num_tokens: int, num_kv_tokens: int, num_draft_kv_tokens: int = 0) -> float:
        return (self.fixed_s + self.per_seq_s * num_seqs + self.per_token_s * num_tokens
                + self.per_kv_token_s * num_kv_tokens + self.per_draft_kv_token_s * num_draft_kv_tokens)

    def seconds_for_tokens(self, num_seqs: int, num_tokens: np.ndarray, num_kv_tokens: int,
                           num_draft_kv_tokens: np.ndarray | int = 0) -> np.ndarray:
        """`seconds` for many token counts at once: its formula is element by element."""
        return self.seconds(num_seqs, num_tokens, num_kv_tokens, num_draft_kv_tokens)  # type: ignore[arg-type]


def fit_step_cost(samples: Sequence[StepSample], min_samples: int = 8) -> StepCost | None:
    """Least-squares fit of `StepCost` to relative errors (coefficients kept non-negative), or None.

    None when there are too few samples, or when they cannot tell the cost of a draft
    token apart from the cost of a row (every sample drafted nothing). Steps slowed by
    something else (another process, a collection) are dropped: a step is never faster than
    its work, so only samples far above the fit count as outliers (on a busy 2-core machine
    5 of 40 calibration steps took 5-10 times their fellows and tripled the per-row cost).
    """
    table = np.array(samples, dtype=np.float64).reshape(-1, NUM_SHAPE_FIELDS + 1)
    return fit_step_cost_arrays(table[:, :NUM_SHAPE_FIELDS], table[:, NUM_SHAPE_FIELDS], min_samples)


NUM_SHAPE_FIELDS = len(StepSample._fields) - 1  # a sample's shape: all but its seconds


def fit_step_cost_arrays(shapes: np.ndarray, secs: np.ndarray, min_samples: int = 8) -> StepCost | None:
    """`fit_step_cost` of samples held as arrays: `shapes` [n, 4] (rows, tokens, KV tokens,
    draft-KV tokens), `secs` [n] (the engine's step timer keeps them so: it refits every
    few dozen steps)."""
    if secs.shape[0] < min_samples:
        return None
    rows = np.empty((secs.shape[0], NUM_SHAPE_FIELDS + 1))
    rows[:, 0] = 1.0
    rows[:, 1:] = shapes
    drafted = rows[:, 2] > rows[:, 1]
    if not drafted.any():
        return None
    # Relative errors: a 200 ms step weighs no more than a 20 ms one. On a 2-core CPU the
    # calibration's 16 rows x 5 forced drafts took 100-250 ms from one engine start to the
    # next; fitted by absolute error those few steps set the line (10 ms fixed, 2.4 ms per
    # token, against 20-25 and 0.5-0.9 from the other 45), and the budget, seeing no draft
    # pay, never drafted again, so nothing new could correct it.
    weighted = rows / np.maximum(secs, 1e-9)[:, None]
    # Columns differ by orders of magnitude (KV tokens vs 1): scale them so that lstsq's
    # rank cut-off does not drop a small but real term.
    scale = np.maximum(np.abs(weighted).max(axis=0), 1e-12)
    coef = _trimmed_fit(weighted / scale, np.ones_like(secs), drafted, min_samples) / scale
    return StepCost(*coef.tolist())


OUTLIER_SIGMAS = 3.5  # how far above the fit (in robust standard deviations) a step is dropped
OUTLIER_PASSES = 3


def _median(values: np.ndarray) -> float:
    """np.median's value, by partial sort (this runs every few dozen engine steps)."""
    n = values.shape[0]
    half = n // 2
    if n % 2:
        return float(np.partition(values, half)[half])
    low, high = np.partition(values, (half - 1, half))[half - 1 : half + 1]
    return float((low + high) / 2)


def _trimmed_fit(a: np.ndarray, target: np.ndarray, drafted: np.ndarray, min_samples: int) -> np.ndarray:
    """`_nonnegative_lstsq`, refitted without the samples far above the fit, as long as
    enough remain and some of them drafted. `a` and `target` are a sample's shape and
    time divided by its time, so a residual is the step's relative error."""
    keep = np.ones(target.shape[0], dtype=bool)
    coef = _nonnegative_lstsq(a, target)
    floor = 0.01 * _median(target)  # the spread's floor: 1 % of a step
    for _ in range(OUTLIER_PASSES):
        residual = target - a @ coef
        kept = residual[keep]
        centre = _median(kept)
        # Median absolute deviation as a standard deviation.
        spread = max(1.4826 * _median(np.abs(kept - centre)), floor)
        trimmed = residual <= centre + OUTLIER_SIGMAS * spread
        if (trimmed == keep).all() or trimmed.sum() < min_samples or not drafted[trimmed].any():
            break
        keep = trimmed
        coef = _nonnegative_lstsq(a[keep], target[keep])
    return coef


def _nonnegative_lstsq(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Least squares with coefficients >= 0: refit without any column that came out negative
    (five columns: a few passes at most)."""
    active = list(range(a.shape[1]))
    coef = np.zeros(a.shape[1])
    while active:
        sol, *_ = np.linalg.lstsq(a[:, active], b, rcond=None)
        if np.all(sol >= 0):
            coef[active] = sol
            return coef
        active = [c for c, v in zip(active, sol) if v > 0]
    return coef


def geometric_gains(alpha: float, length: int) -> np.ndarray:
    """Acceptance probability of draft positions 1..length at per-token acceptance `alpha`."""
    return float(np.clip(alpha, 0.0, 1.0)) ** np.arange(1, length + 1)


def row_contexts(lengths: np.ndarray) -> np.ndarray:
    """Context each row holds in the KV cache for the next forward, from its tokens so far:
    all but its last (that one is scheduled with the draft)."""
    return np.maximum(np.asarray(lengths, dtype=np.int64) - 1, 0)


def draft_token_seconds(cost: StepCostModel, num_rows: int, num_kv_tokens: int, contexts: np.ndarray) -> np.ndarray:
    """What one drafted token adds to a step of `num_rows` rows without drafts, per row:
    verifying it, and its row's attention over its context with more than one query
    token (the first drafted token's price; further ones in that row cost only their own
    token)."""
    base = cost.seconds(num_rows, num_rows, num_kv_tokens, 0)
    many = getattr(cost, "seconds_for_tokens", None)
    with_one = (many(num_rows, num_rows + 1, num_kv_tokens, contexts) if many is not None
                else np.array([cost.seconds(num_rows, num_rows + 1, num_kv_tokens, int(c)) for c in contexts]))
    return np.asarray(with_one, dtype=np.float64) - base


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
    many = getattr(cost, "seconds_for_tokens", None)  # one array operation instead of a call per position
    seconds = (many(num_rows, num_tokens, num_kv_tokens, draft_kv) if many is not None
               else np.array([cost.seconds(num_rows, int(n), num_kv_tokens, int(d)) for n, d in zip(num_tokens, draft_kv)]))
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
