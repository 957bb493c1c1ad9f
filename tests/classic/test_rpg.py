"""RPG (Huang et al. 2023, arXiv:2307.10710): the lambda-value and the bound's terms by hand, the whole imagined bound
of a model with known heads by hand, the reparameterised gradient reaching the actor through the model's
transitions (and leaving the model alone), the replayed windows' masks, the count bonus, the deceptive point mass,
the world model learning the point mass, and bad settings."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from ascent.classic.rpg import RPGParams, elbo_extras, lambda_value


def test_lambda_value_by_hand():
    """H = 2, gamma = lam = 0.5: V_0 = e_0 + q_0 = 3.5; V_1 = e_0 + r_0 + g e_1 + g q_1 = 0.5 + 1 + 0.125 + 2 = 3.625;
    mixture (3.5 + 0.5 * 3.625) / 1.5."""
    r, e = torch.tensor([[1.0], [2.0]]), torch.tensor([[0.5], [0.25]])
    q = torch.tensor([[[3.0, 0.0]], [[4.0, 1.0]]])  # (H, B, 2)
    v = lambda_value(r, e, q, gamma=0.5, lam=0.5)
    assert v.shape == (1, 2)
    assert math.isclose(float(v[0, 0]), (3.5 + 0.5 * 3.625) / 1.5, rel_tol=1e-6)
    assert math.isclose(float(v[0, 1]), (0.5 + 0.5 * (0.5 + 1 + 0.125 + 0.5)) / 1.5, rel_tol=1e-6)


def test_elbo_extras_by_hand():
    """-alpha log pi_a + beta log q each step; -beta log pi_z only at step 0 of rollouts that start an episode."""
    log_pi_a = torch.tensor([[-1.0, -2.0], [0.5, 0.0]])
    log_q = torch.tensor([[-0.1, -0.2], [-0.3, -0.4]])
    e = elbo_extras(log_pi_a, log_q, torch.tensor([-1.5, -1.5]), torch.tensor([1.0, 0.0]), alpha=0.2, beta=0.5)
    want = [[0.2 - 0.05 + 0.75, 0.4 - 0.1], [-0.1 - 0.15, -0.2]]
    assert torch.allclose(e, torch.tensor(want), atol=1e-6)


def _algo(seed: int = 0, **kw):
    pytest.importorskip("gymnasium")
    import gymnasium as gym

    from ascent.classic.base import ClassicContext
    from ascent.classic.envs import VecEnv, gymnasium
    from ascent.classic.rpg import RPG

    gymnasium()  # registers ascent/DecoyPoint-v0
    torch.manual_seed(seed)
    envs = VecEnv(lambda: gym.make("ascent/DecoyPoint-v0"), 1, seed=seed)
    params = {"learning_starts": 200, "hidden": [32, 32], "batch_size": 32, **kw}
    return RPG(ClassicContext(envs, 1000, seed, torch.device("cpu")), RPGParams(**params))


def _zero_last(net: torch.nn.Module) -> None:
    with torch.no_grad():
        last = [m for m in net.modules() if isinstance(m, torch.nn.Linear)][-1]
        last.weight.zero_()
        last.bias.zero_()


def test_imagined_bound_by_hand():
    """Predicted rewards and Q fixed at 1 and 2 (zero last layers, biases set), a uniform posterior q(z|s, a) = 1/K
    and a uniform pi(z|s_0) = 1/K: from an episode start with alpha, beta the value is the lambda-mixture of
    V_i = sum_{k<=i} g^k (-alpha log pi_a,k - beta log K) + beta log K + sum_{k<i} g^k + 2 g^i."""
    algo = _algo(n_latents=4, info_coef=0.3, alpha_init=0.2, gamma=0.9, lam=0.8, horizon=3)
    for net in (algo.model.rew, algo.model.q1, algo.model.q2, algo.posterior, algo.latent_q):
        _zero_last(net)
    with torch.no_grad():
        algo.model.rew[-1].bias.fill_(1.0)
        algo.model.q1[-1].bias.fill_(2.0)
        algo.model.q2[-1].bias.fill_(2.0)
    h0 = algo.model.enc(torch.tensor([[0.0, 0.0, 0.0], [0.5, 0.1, 0.2]]))
    z1h = algo.onehot(torch.tensor([1, 3]))
    torch.manual_seed(1)
    im = algo.imagine(algo.model, h0, z1h)
    v = algo.value(im, z1h, torch.tensor([1.0, 0.0]), alpha=0.2)
    g, lam, beta, logk = 0.9, 0.8, 0.3, math.log(4)
    for b, first in enumerate((1.0, 0.0)):
        prefix, want, weights = beta * logk * first, 0.0, 0.0
        for i in range(3):
            prefix += g**i * (-0.2 * im.log_pi_a[i, b].item() - beta * logk)
            want += lam**i * (prefix + 2.0 * g**i)
            weights += lam**i
            prefix += g**i * 1.0
        assert math.isclose(v[b, 0].item(), want / weights, rel_tol=1e-5)


def test_gradient_flows_through_the_model_to_the_actor_only():
    """Step 1's predicted reward depends on a_0 through the learned transition h_1 = h_0 + f(h_0, a_0) (d r_1 / d a_0
    is not zero); an actor update changes the actor and nothing in the model."""
    algo = _algo()
    for _ in range(250):
        algo.collect()
    h0 = algo.model.enc(torch.zeros(8, 3)).detach()
    z1h = algo.onehot(torch.arange(8) % algo.p.n_latents)
    a0 = algo.actor.sample(torch.cat([h0, z1h], -1))[0]
    h1, _ = algo.model.step(h0, a0)
    _, r1 = algo.model.step(h1, algo.actor.sample(torch.cat([h1, z1h], -1))[0])
    (g_a0,) = torch.autograd.grad(r1.sum(), [a0])
    assert float(g_a0.abs().sum()) > 0
    model_before = [p.detach().clone() for p in algo.model.parameters()]
    actor_before = [p.detach().clone() for p in algo.actor.parameters()]
    algo.update_actor()
    assert all(torch.equal(a, b) for a, b in zip(model_before, algo.model.parameters()))
    assert any(not torch.equal(a, b) for a, b in zip(actor_before, algo.actor.parameters()))


def test_mutual_information_term_makes_latents_distinguishable():
    """No reward and no value (zero heads), a tiny alpha and beta = 1: maximising the bound alone makes the two
    latents' actions tell apart, so the posterior's cross-entropy falls well below log 2 (the multimodality the
    mutual-information term buys)."""
    algo = _algo(n_latents=2, info_coef=1.0, alpha_init=1e-3)
    for net in (algo.model.rew, algo.model.q1, algo.model.q2):
        _zero_last(net)
    for _ in range(250):
        algo.collect()
    nll = [algo.update_actor()["loss/posterior_nll"] for _ in range(300)]
    assert np.mean(nll[:10]) > 0.6 and np.mean(nll[-20:]) < 0.5 * math.log(2)


def test_world_model_learns_the_point_mass():
    """On 600 random steps the model's reward and value errors fall to a fraction of their start."""
    algo = _algo(seed=3, learning_starts=600, batch_size=32, bonus_scale=0.0)
    for _ in range(600):
        algo.collect()
    losses = [algo.update_model() for _ in range(200)]
    for key in ("loss/model_reward", "loss/value"):
        start, end = np.mean([m[key] for m in losses[:5]]), np.mean([m[key] for m in losses[-20:]])
        assert end < 0.2 * start, (key, start, end)


def test_episode_starts_and_latents_are_recorded():
    algo = _algo()
    for _ in range(60):
        algo.collect()
    a = algo.buffer.arrays
    assert a["first"][:60].nonzero()[0].tolist() == [0, 30] and a["done"][:60].nonzero()[0].tolist() == [29, 59]
    assert len(set(a["z"][:30].tolist())) == 1 and len(set(a["z"][30:60].tolist())) == 1


def test_decoy_point_rewards():
    pytest.importorskip("gymnasium")
    from ascent.classic.pointmass import make, reward

    env = make()
    obs, _ = env.reset(seed=0)
    assert obs.shape == (3,) and abs(obs[0]) <= 0.05 and obs[2] == 0.0
    total = 0.0
    for t in range(30):  # full speed to the goal, then stay
        obs, r, term, trunc, _ = env.step(np.array([1.0 if obs[0] < 1.2 else 0.0, 0.0]))
        total += r
    assert trunc and not term and total > 15.0
    assert float(reward(np.array([0.0, 0.0]))) < 0.15 and float(reward(np.array([-0.4, 0.0]))) > 0.29


def test_bad_settings_say_what_to_change():
    with pytest.raises(ValueError, match="learning_starts must be >= horizon"):
        RPGParams(learning_starts=1, horizon=3)
    with pytest.raises(ValueError, match="lam must be in"):
        RPGParams(lam=0.0)
    with pytest.raises(ValueError, match="bonus_dims"):
        _algo(bonus_dims=[5])
    from ascent.classic.rpg import check

    with pytest.raises(ValueError, match="classic.num_envs=1"):
        check(RPGParams(), 4)
