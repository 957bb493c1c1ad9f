"""Bootstrap statistics over seeds for `ascent compare`: a mean's percentile interval, and whether two variants
differ (Efron & Tibshirani 1993, "An Introduction to the Bootstrap", ch. 13 and 16).

Resampling is seeded, so a table written twice from the same runs is the same table. With fewer than about 5 seeds
a percentile interval is too narrow (it cannot reach past the smallest and largest value seen): read it as a
description of the seeds run, not as a guarantee.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

RESAMPLES = 10_000
"""Bootstrap resamples per interval."""
LEVEL = 0.95
"""Coverage of every interval."""
SEED = 0
"""Seed of the resampling generator (a fresh generator per interval: the result does not depend on call order)."""


@dataclass(frozen=True)
class Interval:
    """A mean over seeds and its bootstrap percentile interval."""

    mean: float
    lo: float
    hi: float


@dataclass(frozen=True)
class Difference:
    """mean(other) - mean(base) with its bootstrap interval; `significant`: the interval excludes 0."""

    diff: float
    lo: float
    hi: float
    significant: bool
    paired: bool
    """True: per-seed differences were resampled (same seeds, so the same data order); False: each side apart."""


def _resampled_means(values: np.ndarray, resamples: int, rng: np.random.Generator) -> np.ndarray:
    """(resamples,) means of `values` drawn with replacement, each resample as long as `values`."""
    idx = rng.integers(0, len(values), size=(resamples, len(values)))  # (B, n)
    return values[idx].mean(axis=1)  # (B,)


def _percentiles(means: np.ndarray, level: float) -> tuple[float, float]:
    alpha = (1.0 - level) / 2
    lo, hi = np.quantile(means, [alpha, 1.0 - alpha])
    return float(lo), float(hi)


def bootstrap_interval(
    values: Sequence[float], resamples: int = RESAMPLES, level: float = LEVEL, seed: int = SEED
) -> Interval:
    """Mean and percentile bootstrap interval of the mean: the (1-level)/2 and (1+level)/2 quantiles of the means
    of `resamples` resamples drawn with replacement. One value: the interval is that value.

    >>> bootstrap_interval([0.5, 0.5, 0.5])
    Interval(mean=0.5, lo=0.5, hi=0.5)
    >>> bootstrap_interval([0.0, 1.0])  # resampled means 0, 0.5, 1 with chances 1/4, 1/2, 1/4
    Interval(mean=0.5, lo=0.0, hi=1.0)
    """
    x = np.asarray(values, dtype=np.float64)
    if x.size == 0:
        raise ValueError("bootstrap_interval needs at least one value")
    mean = float(x.mean())
    if x.size == 1:
        return Interval(mean, mean, mean)
    lo, hi = _percentiles(_resampled_means(x, resamples, np.random.default_rng(seed)), level)
    return Interval(mean, lo, hi)


def bootstrap_difference(
    base: Sequence[float],
    other: Sequence[float],
    paired: bool,
    resamples: int = RESAMPLES,
    level: float = LEVEL,
    seed: int = SEED,
) -> Difference:
    """mean(other) - mean(base) and its bootstrap interval. Paired (`base[i]`, `other[i]` from the same seed): the
    per-seed differences are resampled, which removes what the seed does to both; unpaired: each side is resampled
    on its own. Significant when the interval excludes 0; never with fewer than 2 values a side.

    >>> d = bootstrap_difference([0.40, 0.60, 0.50, 0.70, 0.30], [0.43, 0.62, 0.54, 0.72, 0.33], paired=True)
    >>> round(d.diff, 3), d.significant, d.lo > 0
    (0.028, True, True)
    >>> bootstrap_difference([0.40, 0.60, 0.50, 0.70, 0.30], [0.43, 0.62, 0.54, 0.72, 0.33], paired=False).significant
    False
    """
    a, b = np.asarray(base, dtype=np.float64), np.asarray(other, dtype=np.float64)
    if paired and a.shape != b.shape:
        raise ValueError(f"paired samples must have the same length, got {a.size} and {b.size}")
    diff = float(b.mean() - a.mean())
    if min(a.size, b.size) < 2:
        return Difference(diff, diff, diff, False, paired)
    rng = np.random.default_rng(seed)
    if paired:
        means = _resampled_means(b - a, resamples, rng)
    else:
        means = _resampled_means(b, resamples, rng) - _resampled_means(a, resamples, rng)
    lo, hi = _percentiles(means, level)
    return Difference(diff, lo, hi, bool(lo > 0 or hi < 0), paired)
