"""The step-cost model (`StepCost`), its fit to measured steps, and the timer that keeps it fitted
while the engine runs (docs/internals.md, "The step-cost model")."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import NamedTuple, Protocol

import numpy as np

REFIT_EVERY = 64  # new samples before a refit
REFIT_ROWS = 512  # rows those samples served, at the least


class StepCostModel(Protocol):
    def seconds(self, num_seqs: int, num_tokens: int, num_kv_tokens: int, num_draft_kv_tokens: int = 0) -> float:
        """Predicted wall time of one forward over `num_seqs` rows and `num_tokens` scheduled tokens
        whose rows hold `num_kv_tokens` in the KV cache, `num_draft_kv_tokens` of them in rows that
        schedule more than one token (a decoding row with a draft)."""


class StepSample(NamedTuple):
    """One measured decode step: rows, scheduled tokens (rows + draft tokens), the context
    those rows held in the KV cache, that of the rows that drafted, seconds. A named tuple:
    one is made every engine step, and a batch of them is one array."""

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


@dataclasses.dataclass(frozen=True)
class StepCost:
    """t = fixed + per_seq * rows + per_token * tokens + per_kv_token * KV tokens
    + per_draft_kv_token * the context of each row that drafts (seconds, >= 0)."""

    fixed_s: float
    per_seq_s: float
    per_token_s: float
    per_kv_token_s: float = 0.0
    per_draft_kv_token_s: float = 0.0

    def seconds(self, num_seqs: int, num_tokens: int, num_kv_tokens: int, num_draft_kv_tokens: int = 0) -> float:
        return (self.fixed_s + self.per_seq_s * num_seqs + self.per_token_s * num_tokens
                + self.per_kv_token_s * num_kv_tokens + self.per_draft_kv_token_s * num_draft_kv_tokens)


def fit_step_cost(samples: Sequence[StepSample], min_samples: int = 8) -> StepCost | None:
    """Least-squares fit of `StepCost` to relative errors (coefficients >= 0), or None: too few
    samples, or none drafted. Only samples far above the fit are dropped as outliers: a step
    is never faster than its work, but may be slowed by something else."""
    table = np.array(samples, dtype=np.float64).reshape(-1, NUM_SHAPE_FIELDS + 1)
    return fit_step_cost_arrays(table[:, :NUM_SHAPE_FIELDS], table[:, NUM_SHAPE_FIELDS], min_samples)


NUM_SHAPE_FIELDS = len(StepSample._fields) - 1  # a sample's shape: all but its seconds


def fit_step_cost_arrays(shapes: np.ndarray, secs: np.ndarray, min_samples: int = 8) -> StepCost | None:
    """`fit_step_cost` of samples held as arrays (as StepTimer keeps them): `shapes` [n, 4] (rows,
    tokens, KV tokens, draft-KV tokens), `secs` [n]."""
    if secs.shape[0] < min_samples:
        return None
    rows = np.column_stack([np.ones(secs.shape[0]), shapes])
    drafted = rows[:, 2] > rows[:, 1]
    if not drafted.any():
        return None
    # Relative errors: a slow step weighs no more than a fast one (a few slow steps fitted
    # by absolute error set the line, and a budget that sees no draft pay never corrects it).
    weighted = rows / np.maximum(secs, 1e-9)[:, None]
    # Columns differ by orders of magnitude (KV tokens vs 1): scale them so that lstsq's
    # rank cut-off does not drop a small but real term.
    scale = np.maximum(np.abs(weighted).max(axis=0), 1e-12)
    coef = _trimmed_fit(weighted / scale, np.ones_like(secs), drafted, min_samples) / scale
    return StepCost(*coef.tolist())


OUTLIER_SIGMAS = 3.5  # how far above the fit (in robust standard deviations) a step is dropped
OUTLIER_PASSES = 3


def _trimmed_fit(a: np.ndarray, target: np.ndarray, drafted: np.ndarray, min_samples: int) -> np.ndarray:
    """`nonnegative_lstsq`, refitted without the samples far above the fit, as long as
    enough remain and some of them drafted. `a` and `target` are a sample's shape and
    time divided by its time, so a residual is the step's relative error."""
    keep = np.ones(target.shape[0], dtype=bool)
    coef = nonnegative_lstsq(a, target)
    floor = 0.01 * float(np.median(target))  # the spread's floor: 1 % of a step
    for _ in range(OUTLIER_PASSES):
        residual = target - a @ coef
        kept = residual[keep]
        centre = float(np.median(kept))
        # Median absolute deviation as a standard deviation.
        spread = max(1.4826 * float(np.median(np.abs(kept - centre))), floor)
        trimmed = residual <= centre + OUTLIER_SIGMAS * spread
        if (trimmed == keep).all() or trimmed.sum() < min_samples or not drafted[trimmed].any():
            break
        keep = trimmed
        coef = nonnegative_lstsq(a[keep], target[keep])
    return coef


def nonnegative_lstsq(a: np.ndarray, b: np.ndarray) -> np.ndarray:
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


class StepTimer:
    """The clean steps' samples (calibration and the most recent) and the fit of them, refitted
    after `refit_every` new samples of at least `refit_rows` rows (till then a step costs an append)."""

    def __init__(self, max_samples: int = 512, refit_every: int = REFIT_EVERY, refit_rows: int = REFIT_ROWS) -> None:
        self.calibration: list[StepSample] = []
        self.model: StepCost | None = None
        self.refit_every = refit_every
        self.refit_rows = refit_rows
        self.max_samples = max_samples
        self.calibrating = False
        self._new: list[StepSample] = []
        self._new_rows = 0
        self._calibration = np.zeros((0, NUM_SHAPE_FIELDS + 1))
        self._recent = np.zeros((0, NUM_SHAPE_FIELDS + 1))  # StepSample's fields; oldest first

    def __len__(self) -> int:
        """Samples held besides the calibration's (at most max_samples)."""
        return min(self._recent.shape[0] + len(self._new), self.max_samples)

    def add(self, sample: StepSample) -> None:
        if self.calibrating:
            self.calibration.append(sample)
            return
        self._new.append(sample)
        self._new_rows += sample.num_seqs
        if len(self._new) >= self.refit_every and self._new_rows >= self.refit_rows:
            self.refit()

    def load_calibration(self, samples: Sequence[StepSample]) -> None:
        self.calibration = list(samples)
        self.refit()

    def refit(self) -> None:
        if self._new:
            self._recent = np.concatenate([self._recent, np.array(self._new, dtype=np.float64)])[-self.max_samples :]
            self._new = []
            self._new_rows = 0
        if len(self.calibration) != self._calibration.shape[0]:
            self._calibration = np.array(self.calibration, dtype=np.float64).reshape(-1, NUM_SHAPE_FIELDS + 1)
        table = np.concatenate([self._calibration, self._recent])
        fitted = fit_step_cost_arrays(table[:, :NUM_SHAPE_FIELDS], table[:, NUM_SHAPE_FIELDS])
        if fitted is not None:
            self.model = fitted
