"""PAMC (arXiv:2509.03790): the IPW low-rank completion and the weighted conformal quantile by hand, and a tiny run
of benchmarks/theory_pamc.py: weighted conformal sets cover at the nominal level, shrink with data, and the
completion's greedy policy needs far fewer samples than per-entry means."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

from ascent.applications.pamc import (
    REWARD_COMPLETERS,
    PAMCParams,
    RewardObservations,
    entry_means,
    make_world,
    pamc,
    weighted_quantile,
)
from ascent.typed import ConfigError


def _bench():
    path = Path(__file__).resolve().parents[2] / "benchmarks" / "theory_pamc.py"
    spec = importlib.util.spec_from_file_location("theory_pamc", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_weighted_quantile_by_hand():
    scores = np.array([3.0, 1.0, 2.0, 4.0])
    # equal weights, n = 4, alpha = 0.4: ceil(5 * 0.6) = 3rd smallest
    assert weighted_quantile(scores, np.ones(4), np.ones(1), 0.4).tolist() == [3.0]
    # weights (score order 1, 2, 3, 4) = (1, 1, 1, 5), test weight 2: need 0.5 * 10 = 5 -> cum 1, 2, 3, 8 -> score 4
    w = np.array([1.0, 1.0, 1.0, 5.0])  # for scores 3, 1, 2, 4
    assert weighted_quantile(scores, w, np.array([2.0]), 0.5).tolist() == [4.0]
    assert weighted_quantile(scores, np.ones(4), np.array([100.0]), 0.1).tolist() == [np.inf]  # too little mass


def test_pamc_recovers_a_low_rank_matrix_from_under_half_its_entries():
    rng = np.random.default_rng(0)
    R = rng.standard_normal((30, 2)) @ rng.standard_normal((2, 10))
    p = np.full((30, 10), 1 / 300)
    seen = rng.random((30, 10)) < 0.4
    seen[:, :3] = seen[:, :3] | (seen.sum(1, keepdims=True) < 3)  # every row at least 3 entries (rank 2 + 1)
    s, a = np.nonzero(seen)
    obs = RewardObservations(s, a, R[s, a], p)
    assert seen.mean() < 0.5
    err = np.abs(pamc(obs, PAMCParams(rank=2, ridge=1e-4, iters=100)) - R)[~seen]
    means = entry_means(obs)
    assert err.max() < 0.05 and np.abs(means - R)[~seen].mean() > 0.5
    assert REWARD_COMPLETERS.resolve("pamc(rank=2)").provenance.fidelity == "reduced"
    with pytest.raises(ConfigError, match="propensity"):
        RewardObservations(s, a, R[s, a], np.zeros((30, 10)))


def test_ipw_weights_undo_the_behaviour_policys_bias():
    """With a misspecified (rank-1) fit, the unweighted fit favours the often-sampled entries; IPW's uniform error
    over entries is lower."""
    world = make_world(3, rank=3)
    obs = world.observe(20000, np.random.default_rng(0))
    err = {ipw: np.mean((pamc(obs, PAMCParams(rank=1, ipw=ipw)) - world.R) ** 2) for ipw in (True, False)}
    assert err[True] < err[False]


def test_tiny_benchmark_covers_at_the_nominal_level_and_shrinks():
    out = _bench().measure([400, 3200], seeds=8, alpha=0.2, target=0.15)
    small, large = out["rows"]
    for row in (small, large):
        assert 0.74 <= row["coverage_weighted"][0] <= 0.95  # nominal 0.8, averaged over 8 draws
        assert row["coverage_unweighted"][0] < row["coverage_weighted"][0]  # MNAR: the plain quantile under-covers
    assert large["median_set_width"] < 0.5 * small["median_set_width"]
    assert large["regret_pamc"][0] < 0.5 * large["regret_entry_means"][0]
    assert out["samples_to_target"]["entry_means"] is None and out["samples_to_target"]["pamc"] == 3200
