"""P2R (arXiv:2306.14111): the confidence interval through the inverse link by hand, answers within epsilon with a
number of preference queries that stops growing, and a tiny run of benchmarks/theory_p2r.py."""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path

import numpy as np
import pytest

from ascent.applications.p2r import PREFERENCE_INTERFACES, P2RParams, TrueReward, make_mdp, run_reduction
from ascent.typed import ConfigError


def _bench():
    path = Path(__file__).resolve().parents[2] / "benchmarks" / "theory_p2r.py"
    spec = importlib.util.spec_from_file_location("theory_p2r", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_interval_is_hoeffding_through_kappa_logit():
    mdp = make_mdp(0)
    iface = PREFERENCE_INTERFACES.resolve("p2r(delta=0.1)")(mdp, np.random.default_rng(0))
    assert iface.interval(0) == (0.0, 0.0) and iface.interval(1) == (-1.0, 1.0)  # the reference; nothing asked yet
    iface.wins[1], iface.n[1] = 300, 400
    half = math.sqrt(math.log(2 * 6 / 0.1) / 800)
    lo, hi = iface.interval(1)
    assert lo == pytest.approx(0.25 * math.log((0.75 - half) / (0.25 + half)))
    assert hi == pytest.approx(0.25 * math.log((0.75 + half) / (0.25 - half)))
    with pytest.raises(ConfigError, match="epsilon"):
        P2RParams(epsilon=0)


def test_answers_are_epsilon_accurate_and_queries_stop():
    mdp = make_mdp(1)
    iface = PREFERENCE_INTERFACES.resolve("p2r(epsilon=0.1)")(mdp, np.random.default_rng(0))
    for s in range(6):
        assert abs(iface.reward(s) - (mdp.r[s] - mdp.r[0])) <= 0.1
    asked = iface.queries
    assert asked > 0 and [iface.reward(s) for s in range(6)] and iface.queries == asked  # tight: no new queries


def test_tiny_reduction_matches_reward_rl_with_queries_independent_of_episodes():
    mdp = make_mdp(2)
    runs = {}
    for T in (300, 900):
        for name in ("true_reward", "p2r", "per_episode"):
            src = (
                TrueReward(mdp)
                if name == "true_reward"
                else PREFERENCE_INTERFACES.resolve(name)(mdp, np.random.default_rng(5))
            )
            runs[name, T] = run_reduction(mdp, src, T, np.random.default_rng(0))
    assert runs["p2r", 300]["queries"] == runs["p2r", 900]["queries"] > 0  # all final states tight by T = 300
    assert runs["per_episode", 900]["queries"] == 900
    assert runs["p2r", 900]["final_gap"] <= 2 * 0.1  # the robustness of an epsilon-accurate reward
    assert runs["p2r", 900]["regret"] <= 1.25 * runs["true_reward", 900]["regret"] + 2.0


def test_the_benchmark_prints_regret_queries_and_paired_intervals():
    (row,) = _bench().measure([200], seeds=2, epsilon=0.2)
    assert row["per_episode_queries"] == 200 and row["true_reward_queries"] == 0
    lo, hi = row["p2r_minus_true_regret"][1]
    assert lo <= row["p2r_minus_true_regret"][0] <= hi
