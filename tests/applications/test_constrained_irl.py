"""IRL in constrained MDPs (arXiv:2306.00629): the soft-optimal policy and occupancy by hand, the constrained
optimum's budget and multiplier, shaping invariance, and a tiny run of benchmarks/theory_constrained_irl.py: the
constrained IRL reward reproduces the expert under the constraint, and the unconstrained baseline's absorbs the
cost and transfers badly to a tighter budget."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

from ascent.applications.constrained_irl import CMDP, IRL_METHODS, IRLParams, gridworld
from ascent.typed import ConfigError


def _bench():
    path = Path(__file__).resolve().parents[2] / "benchmarks" / "theory_constrained_irl.py"
    spec = importlib.util.spec_from_file_location("theory_constrained_irl", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_one_state_soft_policy_and_occupancy_by_hand():
    world = CMDP(np.ones((1, 3, 1)), np.ones(1), np.array([[0.0, 1.0, 0.0]]), budget=0.2, gamma=0.5, tau=0.5)
    r = np.array([[0.0, 1.0, 0.5]])
    pi, v = world.soft_policy(r)
    want = np.exp(r[0] / 0.5) / np.exp(r[0] / 0.5).sum()
    np.testing.assert_allclose(pi[0], want, atol=1e-9)
    assert v[0] == pytest.approx(0.5 * np.log(np.exp(r[0] / 0.5).sum()) / (1 - 0.5), abs=1e-8)
    np.testing.assert_allclose(world.occupancy(pi), pi)  # one state: mu = pi
    mu, lam = world.constrained_soft_optimum(r)  # unconstrained cost want[1] ~ 0.51 > 0.2: active
    assert lam > 0 and mu[0, 1] == pytest.approx(0.2, abs=1e-7)
    shifted = np.exp((r[0] - lam * world.cost[0]) / 0.5)
    np.testing.assert_allclose(mu[0], shifted / shifted.sum(), atol=1e-7)  # softmax of r - lambda c


def test_gridworld_constraint_binds_and_shaping_keeps_the_optimum():
    world, r = gridworld(4)
    assert (world.cost * world.soft_optimum(r)).sum() > world.budget
    mu, lam = world.constrained_soft_optimum(r)
    assert lam > 0 and (world.cost * mu).sum() == pytest.approx(world.budget, abs=1e-6)
    np.testing.assert_allclose(world.occupancy(world.soft_policy(r)[0]).sum(), 1.0)
    phi = np.random.default_rng(0).standard_normal(16)
    shaped = r + world.gamma * world.P @ phi - phi[:, None]
    np.testing.assert_allclose(world.constrained_soft_optimum(shaped)[0], mu, atol=1e-6)
    with pytest.raises(ConfigError, match="infeasible"):
        world.constrained_soft_optimum(r, budget=-1.0)
    with pytest.raises(ConfigError, match="steps"):
        IRLParams(steps=0)
    assert IRL_METHODS.resolve("constrained").provenance.fidelity == "reduced"


def test_tiny_benchmark_reproduces_the_expert_and_the_transfer_gap():
    out = _bench().measure(3, 150, [0.05], 0.3)
    c, u, shaped = out["constrained"], out["unconstrained"], out["true+shaping"]
    assert out["expert_cost"] == pytest.approx(out["budget"], abs=1e-6)
    assert out["budget"] < out["unconstrained_optimum_cost"]
    assert c["match_l1"] < 0.01 and c["expert_suboptimality"] < 1e-3
    assert c["residual_shaping_const_cost"] < 0.05  # identified up to shaping, a constant and the cost direction
    assert u["residual_shaping_const"] > 0.3 > 0.05 > u["residual_shaping_const_cost"]  # it absorbed -lambda c
    assert c["transfer_budget_0.05_l1"] < 0.01 < u["transfer_budget_0.05_l1"]
    assert shaped["match_l1"] < 1e-6 < 0.005 < shaped["transfer_slip_0.3_l1"]  # shaping breaks under new dynamics


def test_sampled_occupancy_converges_and_more_expert_data_gives_a_closer_reward():
    from ascent.applications.constrained_irl import sample_occupancy

    world, r = gridworld(3)
    mu_e, _ = world.constrained_soft_optimum(r)
    pi_e = mu_e / mu_e.sum(1, keepdims=True)
    err = [np.abs(sample_occupancy(world, pi_e, n, np.random.default_rng(0)) - mu_e).sum() for n in (100, 10000)]
    assert err[1] < 0.3 * err[0] and abs(sample_occupancy(world, pi_e, 5, np.random.default_rng(1)).sum() - 1) < 1e-12
    rows = _bench().finite_sample(3, 80, [10, 3000], seeds=1)
    assert rows[1]["l1_to_expert"][0] < 0.5 * rows[0]["l1_to_expert"][0]
