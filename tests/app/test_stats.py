"""Bootstrap statistics of `ascent compare`: intervals on samples whose bootstrap distribution is known, paired
differences that are clearly there or clearly not, error rates under the null, reproducibility."""

from __future__ import annotations

import numpy as np
import pytest

from ascent.app.stats import Interval, bootstrap_difference, bootstrap_interval


def test_interval_of_a_sample_whose_bootstrap_distribution_is_binomial():
    # one success in ten: a resample's mean is Binomial(10, 0.1) / 10, so P(0) = 0.349 and P(<= 0.2) = 0.930,
    # P(<= 0.3) = 0.987: the 2.5% and 97.5% quantiles are 0 and 0.3
    assert bootstrap_interval([0.0] * 9 + [1.0]) == Interval(0.1, 0.0, 0.3)
    assert bootstrap_interval([0.0, 1.0]) == Interval(0.5, 0.0, 1.0)
    assert bootstrap_interval([0.7]) == Interval(0.7, 0.7, 0.7)
    with pytest.raises(ValueError, match="at least one value"):
        bootstrap_interval([])


def test_interval_of_a_large_sample_matches_the_normal_approximation():
    x = np.random.default_rng(1).normal(0.6, 0.1, size=400)
    ci = bootstrap_interval(x.tolist())
    half = 1.96 * x.std(ddof=1) / np.sqrt(len(x))  # mean +- 1.96 standard errors
    assert ci.mean == pytest.approx(x.mean())
    assert ci.lo == pytest.approx(x.mean() - half, abs=0.1 * half)
    assert ci.hi == pytest.approx(x.mean() + half, abs=0.1 * half)
    narrower = bootstrap_interval(x.tolist(), level=0.5)
    assert ci.lo < narrower.lo < narrower.hi < ci.hi


def test_resampling_is_seeded():
    x = [0.31, 0.42, 0.38, 0.55, 0.47]
    assert bootstrap_interval(x) == bootstrap_interval(x)
    wide = np.random.default_rng(3).random(50).tolist()  # enough distinct resample means for the seed to show
    assert bootstrap_interval(wide, seed=1) != bootstrap_interval(wide, seed=2)
    assert bootstrap_difference(x, x[::-1], paired=True) == bootstrap_difference(x, x[::-1], paired=True)


def test_a_clear_paired_difference_is_significant_where_an_unpaired_one_is_not():
    seed_effect = np.array([0.30, 0.45, 0.38, 0.52, 0.41, 0.60, 0.35])  # what the seed does to every variant
    base = seed_effect
    better = seed_effect + 0.03 + np.array([0.004, -0.003, 0.002, -0.004, 0.001, 0.0, -0.002])
    paired = bootstrap_difference(base.tolist(), better.tolist(), paired=True)
    assert paired.significant and paired.paired and 0 < paired.lo < paired.diff < paired.hi < 0.04
    assert paired.diff == pytest.approx(0.03 - 0.002 / 7)
    unpaired = bootstrap_difference(base.tolist(), better.tolist(), paired=False)
    assert not unpaired.significant and unpaired.lo < 0 < unpaired.hi  # the seeds' spread hides it
    worse = bootstrap_difference(better.tolist(), base.tolist(), paired=True)
    assert worse.significant and worse.hi < 0


def test_a_null_difference_is_not_significant():
    base = [0.30, 0.45, 0.38, 0.52, 0.41]
    noise = [0.02, -0.02, 0.01, -0.01, 0.0]  # symmetric about 0
    d = bootstrap_difference(base, [b + e for b, e in zip(base, noise)], paired=True)
    assert not d.significant and d.lo < 0 < d.hi and d.diff == pytest.approx(0.0, abs=1e-12)
    same = bootstrap_difference(base, base, paired=True)
    assert (same.diff, same.lo, same.hi, same.significant) == (0.0, 0.0, 0.0, False)
    one = bootstrap_difference([0.3], [0.9], paired=True)  # one seed: no test
    assert one.diff == pytest.approx(0.6) and not one.significant
    with pytest.raises(ValueError, match="same length"):
        bootstrap_difference([0.1, 0.2], [0.1, 0.2, 0.3], paired=True)


def test_false_positives_and_power_over_many_simulated_comparisons():
    """10 seeds a variant: under the null the paired test fires about 5% of the time (the percentile bootstrap runs
    a little hot at small n), and it finds a shift of one per-seed standard deviation almost always."""
    rng = np.random.default_rng(0)
    trials = 200

    def rate(shift: float) -> float:
        hits = 0
        for i in range(trials):
            seed_effect = rng.normal(0.5, 0.1, size=10)
            a = seed_effect + rng.normal(0, 0.02, size=10)
            b = seed_effect + shift + rng.normal(0, 0.02, size=10)
            hits += bootstrap_difference(a.tolist(), b.tolist(), paired=True, resamples=2000, seed=i).significant
        return hits / trials

    assert rate(0.0) < 0.12
    assert rate(0.02 * np.sqrt(2)) > 0.8  # one standard deviation of the per-seed difference
