"""The causal LLM router (Tsiourvas, Sun & Perakis 2025, arXiv:2505.16037): DR estimates, the two regret
surrogates and the decoupled baseline, by hand-computed values, bounds and learning on a small world."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from gymnasium.utils.env_checker import check_env

from ascent.applications.router import (
    ROUTER_OBJECTIVES,
    LoggedRouting,
    RouterBatch,
    RouterRun,
    RoutingBanditEnv,
    compare_routers,
    dr_estimates,
    make_world,
)
from ascent.typed import ConfigError

LOG = LoggedRouting(torch.zeros(2, 1), torch.tensor([0, 2]), torch.tensor([1.0, -0.5]))
MU = torch.tensor([[0.5, 0.2, 0.1], [0.0, 0.3, 0.4]])


def test_dr_estimate_corrects_only_the_logged_model_by_its_inverse_propensity():
    prop = torch.tensor([[0.25, 0.5, 0.25], [0.5, 0.49, 0.01]])
    gamma = dr_estimates(LOG, MU, prop, clip=0.05)
    # query 0: model 0 logged, 0.5 + (1 - 0.5) / 0.25 = 2.5; query 1: model 2, e clipped to 0.05: 0.4 + (-0.9) / 0.05
    expected = torch.tensor([[2.5, 0.2, 0.1], [0.0, 0.3, 0.4 - 18.0]])
    assert torch.allclose(gamma, expected)


def test_dr_estimate_is_unbiased_with_the_true_propensity_and_a_wrong_outcome_model():
    g = torch.Generator().manual_seed(0)
    n, true_u = 200_000, torch.tensor([0.2, 0.7, 0.4])
    p = torch.tensor([0.6, 0.1, 0.3])
    t = torch.multinomial(p, n, replacement=True, generator=g)
    y = true_u[t] + 0.3 * torch.randn(n, generator=g)
    log = LoggedRouting(torch.zeros(n, 1), t, y)
    gamma = dr_estimates(log, torch.full((n, 3), -1.0), p.expand(n, 3), clip=0.01)
    assert torch.allclose(gamma.mean(0), true_u, atol=0.03)


def test_classification_bound_by_hand_and_bounds_the_dr_regret():
    gamma = torch.tensor([[1.0, 0.0, 0.5], [0.0, 2.0, 1.0]])
    batch = RouterBatch(torch.zeros(2, 1), torch.tensor([0, 1]), torch.zeros(2), gamma)
    scores = torch.tensor([[0.0, 0.0, 0.0], [1.0, 0.0, 0.0]])
    loss, metrics = ROUTER_OBJECTIVES.resolve("cls_bound")(scores, batch)
    ce1 = math.log(math.e + 2)  # query 1: label 1 with score 0 against scores 1 and 0: -log(1 / (e + 2))
    assert loss.item() == pytest.approx((1.0 * math.log(3) + 2.0 * ce1) / 2, rel=1e-6)
    assert metrics["router/agree_dr_argmax"] == pytest.approx(0.5)  # ties go to model 0: right on query 0 only
    for seed in range(20):  # (range * CE) / log 2 >= regret of argmax routing, query by query and on average
        s = torch.randn(2, 3, generator=torch.Generator().manual_seed(seed)) * 3
        route = s.argmax(-1)
        regret = (gamma.max(-1).values - gamma.gather(1, route[:, None]).squeeze(1)).mean()
        assert ROUTER_OBJECTIVES.resolve("cls_bound")(s, batch)[0].item() / math.log(2) >= regret.item() - 1e-6


def test_softmax_regret_by_hand_and_tends_to_the_argmax_regret():
    gamma = torch.tensor([[1.0, 0.0], [0.0, 3.0]])
    batch = RouterBatch(torch.zeros(2, 1), torch.tensor([0, 1]), torch.zeros(2), gamma)
    scores = torch.tensor([[0.0, 0.1], [0.2, 0.0]])
    loss, _ = ROUTER_OBJECTIVES.resolve("softmax_regret(temperature=1.0)")(scores, batch)
    w0, w1 = torch.softmax(scores[0], 0), torch.softmax(scores[1], 0)
    assert loss.item() == pytest.approx(((w0[1] * 1.0) + (w1[0] * 3.0)).item() / 2, rel=1e-6)
    cold, _ = ROUTER_OBJECTIVES.resolve("softmax_regret(temperature=0.001)")(scores, batch)
    assert cold.item() == pytest.approx((1.0 + 3.0) / 2, abs=1e-4)  # argmax picks the wrong model on both


def test_decoupled_is_the_squared_error_at_the_logged_model():
    batch = RouterBatch(LOG.x, LOG.t, LOG.y, MU)
    loss, _ = ROUTER_OBJECTIVES.resolve("decoupled")(MU, batch)
    assert loss.item() == pytest.approx(((0.5 - 1.0) ** 2 + (0.4 + 0.5) ** 2) / 2)


def test_bad_settings_fail_with_one_clear_line():
    with pytest.raises(ConfigError, match="temperature"):
        ROUTER_OBJECTIVES.resolve("softmax_regret(temperature=0)")
    with pytest.raises(ConfigError, match="clip"):
        dr_estimates(LOG, MU, torch.full((2, 3), 1 / 3), clip=0.0)
    with pytest.raises(ConfigError, match="unknown router objective"):
        ROUTER_OBJECTIVES.resolve("regret")


def test_environment_follows_the_gymnasium_api_and_rewards_the_utility():
    world = make_world(0)
    env = RoutingBanditEnv(world)
    check_env(env, skip_render_check=True)
    obs, _ = env.reset(seed=3)
    _, reward, terminated, truncated, info = env.step(2)
    assert terminated and not truncated
    assert reward == pytest.approx(info["correct"] - world.lam * float(world.cost[2]))
    env.reset(seed=3)
    with pytest.raises(ValueError, match="model index"):
        env.step(world.models)
    u = world.utility(torch.from_numpy(np.asarray(obs))[None])[0]
    assert torch.allclose(u, world.accuracy(torch.from_numpy(obs)[None])[0] - world.lam * world.cost)


def test_every_router_learns_to_beat_the_best_single_model_and_the_logging_policy():
    torch.set_num_threads(1)
    out = compare_routers(0, RouterRun(n_log=600, n_test=2000, steps=150))
    for name in ("decoupled", "cls_bound", "softmax_regret"):
        assert 0 <= out[name] < 0.6 * out["best_constant"], out
        assert out[name] < out["logging"], out


def test_the_benchmark_prints_each_seed_and_the_paired_differences(capsys):
    import importlib.util
    import json
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "benchmarks" / "router_compare.py"
    spec = importlib.util.spec_from_file_location("router_compare", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.main(["--seeds", "2", "--n-log", "200", "--n-test", "300", "--steps", "20"]) == 0
    out = capsys.readouterr().out
    rows = [json.loads(line) for line in out.splitlines()[:2]]
    summary = json.loads(out[out.index("{\n") :])["summary"]
    diff = [r["softmax_regret"] - r["decoupled"] for r in rows]
    assert summary["softmax_regret - decoupled"]["mean"] == pytest.approx(sum(diff) / 2, abs=1e-4)
    lo, hi = summary["cls_bound - decoupled"]["ci95"]
    assert lo <= summary["cls_bound - decoupled"]["mean"] <= hi
