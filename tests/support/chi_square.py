"""Chi-square test of homogeneity for two samples of categorical outcomes (token tuples),
shared by the sampling-distribution tests."""

from __future__ import annotations

import collections
import dataclasses
from collections.abc import Hashable, Sequence

import numpy as np

MIN_BIN = 10  # outcomes seen fewer times (both samples together) are pooled into "other"


@dataclasses.dataclass(frozen=True)
class ChiSquareResult:
    statistic: float
    dof: int
    p_value: float
    num_a: int
    num_b: int

    def __str__(self) -> str:
        return f"chi2={self.statistic:.1f} dof={self.dof} p={self.p_value:.3g} (n={self.num_a} vs {self.num_b})"


def same_distribution(a: Sequence[Hashable], b: Sequence[Hashable], min_bin: int = MIN_BIN) -> ChiSquareResult:
    """Are `a` and `b` drawn from one distribution? Outcomes with fewer than `min_bin`
    observations in both samples together share one "other" bin, so that the expected
    counts stay large enough for the chi-square approximation."""
    from scipy.stats import chi2_contingency

    count_a, count_b = collections.Counter(a), collections.Counter(b)
    common = sorted(
        (k for k in count_a.keys() | count_b.keys() if count_a[k] + count_b[k] >= min_bin), key=repr
    )
    rows = [[c[k] for k in common] for c in (count_a, count_b)]
    for row, sample in zip(rows, (a, b)):
        row.append(len(sample) - sum(row))  # the "other" bin
    table = np.array(rows)
    table = table[:, table.sum(axis=0) > 0]
    if table.shape[1] < 2:  # one outcome only: nothing can differ
        return ChiSquareResult(0.0, 0, 1.0, len(a), len(b))
    result = chi2_contingency(table, correction=False)
    return ChiSquareResult(float(result.statistic), int(result.dof), float(result.pvalue), len(a), len(b))


def first_tokens(samples: Sequence[Sequence[int]], n: int = 3) -> list[tuple[int, ...]]:
    """Each sample's first `n` generated tokens, as one joint outcome."""
    return [tuple(ids[:n]) for ids in samples]
