"""HDPO for inventory control (Alvo, Russo, Kanoria & Lee 2023, arXiv:2306.11246): the differentiable simulator
by hand, its pathwise gradient against finite differences, the symmetry of the store network, learning."""

from __future__ import annotations

import pytest
import torch

from ascent.applications.inventory import (
    INVENTORY_METHODS,
    InventoryProblem,
    StorePolicy,
    make_problem,
    order_up_to,
    simulate,
)
from ascent.typed import ConfigError


def one_store(lead: int = 1, horizon: int = 3, warmup: int = 0) -> InventoryProblem:
    t = torch.tensor
    return InventoryProblem(t([2.0]), t([0.0]), t([1.0]), t([5.0]), lead, horizon, warmup)


def test_simulator_by_hand():
    p = one_store()  # start: stock 2, pipeline [2]; constant orders of 1
    demand = torch.tensor([[[3.0], [4.0], [0.5]]])  # (1, 3, 1)
    cost, orders = simulate(p, lambda s, q: torch.ones_like(s), demand, record=True)
    # t0: stock 2+2=4, sell 3, left 1 -> h 1; t1: 1+1=2, demand 4, lost 2 -> 10; t2: 0+1=1, sell 0.5, left .5 -> .5
    assert cost.item() == pytest.approx((1 + 10 + 0.5) / 3)
    assert orders.shape == (1, 3, 1)


def test_pathwise_gradient_matches_finite_differences():
    p = one_store(lead=2, horizon=8, warmup=2)
    demand = (
        p.demand(16, torch.Generator().manual_seed(0))
        + torch.rand(16, 8, 1, generator=torch.Generator().manual_seed(1)) * 3
    )
    level = torch.tensor([5.3], requires_grad=True)
    simulate(p, lambda s, q: (level - s - q.sum(-1)).clamp_min(0), demand).mean().backward()
    eps = 1e-3
    with torch.no_grad():
        hi = simulate(p, order_up_to(level + eps), demand).mean()
        lo = simulate(p, order_up_to(level - eps), demand).mean()
    assert level.grad.item() == pytest.approx(((hi - lo) / (2 * eps)).item(), rel=1e-2, abs=1e-3)


def test_store_network_is_permutation_equivariant_and_orders_are_nonnegative():
    p = make_problem(0, stores=4)
    torch.manual_seed(0)
    net = StorePolicy(p)
    stock, pipe = torch.rand(3, 4) * 5, torch.rand(3, 4, p.lead) * 5
    perm = torch.tensor([2, 0, 3, 1])
    permuted = InventoryProblem(p.mean[perm], p.std[perm], p.holding[perm], p.penalty[perm], p.lead)
    net2 = StorePolicy(permuted)
    net2.load_state_dict(net.state_dict())
    q = net(stock, pipe)
    assert (q >= 0).all()
    assert torch.allclose(net2(stock[:, perm], pipe[:, perm]), q[:, perm], atol=1e-6)


def test_hdpo_learns_and_gets_within_a_few_percent_of_the_best_base_stock():
    torch.set_num_threads(1)
    p = make_problem(1, stores=2)
    test = p.demand(256, torch.Generator().manual_seed(7))
    base, trained = (
        INVENTORY_METHODS.resolve("base_stock")(p, 0),
        INVENTORY_METHODS.resolve("hdpo(steps=40, lr=0.01)")(p, 0),
    )
    torch.manual_seed(0)
    with torch.no_grad():
        bs = simulate(p, base, test).mean().item()
        untrained = simulate(p, StorePolicy(p), test).mean().item()
        learned = simulate(p, trained, test).mean()
    assert learned.item() < 0.6 * untrained
    assert learned.item() < 1.05 * bs


def test_bad_problems_fail_with_one_clear_line():
    t = torch.tensor
    with pytest.raises(ConfigError, match="holding and penalty"):
        InventoryProblem(t([2.0]), t([1.0]), t([0.0]), t([5.0]))
    with pytest.raises(ConfigError, match="lead"):
        InventoryProblem(t([2.0]), t([1.0]), t([1.0]), t([5.0]), lead=0)
    with pytest.raises(ConfigError, match="steps"):
        INVENTORY_METHODS.resolve("hdpo(steps=0)")


def test_gymnasium_environment_replays_the_differentiable_simulator():
    from gymnasium.utils.env_checker import check_env

    from ascent.applications.inventory import InventoryEnv

    p = make_problem(2, stores=3)
    env = InventoryEnv(p)
    check_env(env, skip_render_check=True)
    demand = p.demand(1, torch.Generator().manual_seed(5))  # (1, T, K)
    policy = order_up_to(p.mean * 3)
    obs, _ = env.reset(seed=0, options={"demand": demand[0]})
    total, done = 0.0, False
    while not done:
        K = p.stores
        stock, pipe = torch.from_numpy(obs[:K])[None], torch.from_numpy(obs[K:]).reshape(1, K, p.lead)
        obs, reward, terminated, truncated, _ = env.step(policy(stock, pipe)[0].numpy())
        total, done = total + reward, terminated or truncated
    expected = simulate(p, policy, demand).item() * (p.horizon - p.warmup) * p.stores
    assert -total == pytest.approx(expected, rel=1e-5)
    env.reset(seed=1)
    with pytest.raises(ValueError, match="orders >= 0"):
        env.step(-torch.ones(p.stores).numpy())
