"""The statistics behind the tables: exact intervals for rates, labelled bootstraps elsewhere."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
from scipy import stats

BOOTSTRAP = 2000  # resamples of every percentile-bootstrap interval
LEVEL = 0.95


def clopper_pearson(successes: int, n: int) -> tuple[float, float, float]:
    """A proportion with its exact (Clopper-Pearson) two-sided 95% interval; NaNs for n = 0."""
    if n == 0:
        return math.nan, math.nan, math.nan
    alpha = 1 - LEVEL
    lo = stats.beta.ppf(alpha / 2, successes, n - successes + 1) if successes > 0 else 0.0
    hi = stats.beta.ppf(1 - alpha / 2, successes + 1, n - successes) if successes < n else 1.0
    return successes / n, float(lo), float(hi)


def upper_bound(successes: int, n: int) -> float:
    """The exact one-sided 95% upper bound of a proportion (3/n-ish at 0 of n)."""
    if n == 0:
        return math.nan
    if successes == n:
        return 1.0
    return float(stats.beta.ppf(LEVEL, successes + 1, n - successes))


def bootstrap(values, stat: Callable = np.median, seed: int = 0) -> tuple[float, float, float]:
    """A statistic with its 95% percentile-bootstrap interval; NaNs when there are no values."""
    x = np.asarray([v for v in values if v is not None and np.isfinite(v)], dtype=float)
    if len(x) == 0:
        return math.nan, math.nan, math.nan
    rng = np.random.default_rng(seed)
    draws = stat(x[rng.integers(0, len(x), size=(BOOTSTRAP, len(x)))], axis=1)
    lo, hi = np.percentile(draws, [2.5, 97.5])
    return float(stat(x)), float(lo), float(hi)
