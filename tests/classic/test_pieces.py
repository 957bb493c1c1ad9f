"""Numeric references for the classic pieces: GAE over environment rollouts, the PPO, DQN and SAC losses, the
squashed Gaussian, the replay buffer and the normalisers."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

pytest.importorskip("gymnasium")

from ascent.classic.dqn import DQNParams, dqn_target, linear_epsilon  # noqa: E402
from ascent.classic.networks import SquashedGaussianPolicy  # noqa: E402
from ascent.classic.normalize import ObsNormalizer, RewardNormalizer, RunningMeanStd  # noqa: E402
from ascent.classic.ppo import PPOParams, ppo_loss  # noqa: E402
from ascent.classic.replay import ReplayBuffer  # noqa: E402
from ascent.classic.sac import actor_loss, alpha_loss, critic_loss  # noqa: E402
from ascent.classic.storage import Rollout  # noqa: E402


def gae_loop(rewards, values, dones, last, gamma, lam):
    """The textbook loop, one environment at a time."""
    T, E = rewards.shape
    adv = np.zeros((T, E))
    for e in range(E):
        running = 0.0
        for t in reversed(range(T)):
            next_value = last[e] if t == T - 1 else values[t + 1, e]
            nonterminal = 1.0 - dones[t, e]
            delta = rewards[t, e] + gamma * next_value * nonterminal - values[t, e]
            running = delta + gamma * lam * nonterminal * running
            adv[t, e] = running
    return adv


def test_rollout_gae_matches_a_numpy_loop():
    rng = np.random.default_rng(0)
    T, E = 7, 3
    ro = Rollout.empty(T, E, obs_dim=2, action_shape=(), discrete=True)
    ro.rewards = torch.tensor(rng.normal(size=(T, E)), dtype=torch.float32)
    ro.values = torch.tensor(rng.normal(size=(T, E)), dtype=torch.float32)
    ro.dones = torch.tensor(rng.random((T, E)) < 0.3, dtype=torch.float32)
    last = torch.tensor(rng.normal(size=E), dtype=torch.float32)
    adv, ret = ro.advantages(last, gamma=0.9, lam=0.8)
    ref = gae_loop(ro.rewards.numpy(), ro.values.numpy(), ro.dones.numpy(), last.numpy(), 0.9, 0.8)
    np.testing.assert_allclose(adv.numpy(), ref, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(ret.numpy(), ref + ro.values.numpy(), rtol=1e-5, atol=1e-6)


def test_ppo_loss_by_hand():
    # advantages [1, -1] normalise to [1/sqrt2, -1/sqrt2]; ratios 1.5 and 0.5 are both clipped (eps 0.2):
    # policy = mean(-0.7071 * 1.2, 0.7071 * 0.8) = -0.1414; value = 0.5 * mean(1, 4); entropy = -0.1 * 0.6
    params = PPOParams(vf_coef=0.5, ent_coef=0.1)
    loss, m = ppo_loss(
        torch.log(torch.tensor([1.5, 0.5])),
        torch.zeros(2),
        torch.tensor([1.0, -1.0]),
        torch.tensor([1.0, 2.0]),
        torch.zeros(2),
        torch.tensor([0.5, 0.7]),
        0.2,
        params,
    )
    assert float(loss) == pytest.approx(-0.2 / math.sqrt(2) + 1.25 - 0.06, abs=1e-6)
    assert m["loss/policy"] == pytest.approx(-0.2 / math.sqrt(2), abs=1e-6)
    assert m["loss/clip_frac"] == 1.0 and m["loss/value"] == pytest.approx(2.5)


def test_dqn_target_and_epsilon_by_hand():
    y = dqn_target(torch.tensor([1.0, 0.5]), torch.tensor([0.0, 1.0]), torch.tensor([[2.0, -1.0], [9.0, 9.0]]), 0.9)
    assert y.tolist() == pytest.approx([1.0 + 0.9 * 2.0, 0.5])
    p = DQNParams(exploration_fraction=0.12, eps_start=1.0, eps_end=0.1)
    assert linear_epsilon(6_000, 100_000, p) == pytest.approx(0.55)
    assert linear_epsilon(50_000, 100_000, p) == 0.1


def test_sac_losses_by_hand():
    q = torch.tensor([[1.0, 2.0], [3.0, 4.0]])  # (2 critics, B=2)
    next_q = torch.tensor([[0.5, 2.0], [1.0, 1.0]])  # min over critics: [0.5, 1]
    # y = r + 0.9 (1 - term) (min Q' - 0.5 log pi') = [1 + 0.9 * (0.5 + 0.5), 0] = [1.9, 0]
    c = critic_loss(q, next_q, torch.tensor([-1.0, 0.0]), torch.tensor([1.0, 0.0]), torch.tensor([0.0, 1.0]), 0.9, 0.5)
    assert float(c) == pytest.approx(0.5 * ((0.81 + 4.0) / 2 + (1.21 + 16.0) / 2))
    a = actor_loss(torch.tensor([[1.0, 3.0], [2.0, 0.0]]), torch.tensor([-1.0, -2.0]), 0.5)
    assert float(a) == pytest.approx(((-0.5 - 1.0) + (-1.0 - 0.0)) / 2)
    log_alpha = torch.tensor(0.3, requires_grad=True)
    alpha_loss(log_alpha, torch.tensor([-1.0, -3.0]), 1.0).backward()
    assert float(log_alpha.grad) == pytest.approx(1.0)  # d/dlog_alpha of -log_alpha * mean(0, -2)


def test_squashed_gaussian_log_prob_matches_torch_distributions():
    torch.manual_seed(0)
    low, high = np.array([-2.0, 0.0], np.float32), np.array([2.0, 1.0], np.float32)
    actor = SquashedGaussianPolicy(3, 2, [8], low, high)
    obs = torch.randn(5, 3)
    torch.manual_seed(1)
    action, log_prob = actor.sample(obs)
    h = actor.trunk(obs)
    base = torch.distributions.Normal(actor.mean(h), actor.log_std(h).clamp(-20, 2).exp())
    squash = [torch.distributions.TanhTransform(), torch.distributions.AffineTransform(actor.bias, actor.scale)]
    dist = torch.distributions.TransformedDistribution(base, squash)
    assert torch.all(action > torch.as_tensor(low)) and torch.all(action < torch.as_tensor(high))
    torch.testing.assert_close(log_prob, dist.log_prob(action).sum(-1), atol=2e-3, rtol=1e-3)


def test_replay_buffer_wraps_around_and_samples_only_what_it_holds():
    buf = ReplayBuffer(4, obs_dim=2, action_shape=(1,), discrete=False)
    for step in range(2):
        ids = np.arange(3) + 3 * step
        obs = np.stack([ids, ids], 1).astype(np.float32)
        buf.add(obs, ids[:, None].astype(np.float32), ids.astype(np.float32), obs + 100, ids % 2 == 0)
    assert len(buf) == 4 and buf.full and buf.pos == 2
    assert buf.rewards.tolist() == [4.0, 5.0, 2.0, 3.0]  # 0 and 1 overwritten by 4 and 5
    batch = buf.sample(64, np.random.default_rng(0))
    assert set(batch.rewards.tolist()) == {2.0, 3.0, 4.0, 5.0}
    torch.testing.assert_close(batch.next_obs, batch.obs + 100)
    torch.testing.assert_close(batch.terminated, (batch.rewards % 2 == 0).float())
    again = ReplayBuffer(4, obs_dim=2, action_shape=(1,), discrete=False)
    again.load_state_dict(buf.state_dict())
    assert again.rewards.tolist() == buf.rewards.tolist() and again.pos == 2 and again.full


def test_normalisers_match_numpy():
    rng = np.random.default_rng(0)
    data = [rng.normal(3.0, 2.0, size=(n, 4)) for n in (5, 1, 17)]
    rms = RunningMeanStd((4,), count=0.0)
    for batch in data:
        rms.update(batch)
    everything = np.concatenate(data)
    np.testing.assert_allclose(rms.mean, everything.mean(0))
    np.testing.assert_allclose(rms.var, everything.var(0))
    norm = ObsNormalizer((4,), clip=5.0)
    for batch in data:
        out = norm(batch, update=True)
    expected = np.clip((data[-1] - norm.rms.mean) / np.sqrt(norm.rms.var + 1e-8), -5, 5)
    np.testing.assert_allclose(out, expected, rtol=1e-5)
    rewards, dones = rng.normal(size=(6, 2)), np.array([[0, 0], [0, 1], [0, 0], [1, 0], [0, 0], [0, 0]], bool)
    scaler, returns, seen = RewardNormalizer(2, gamma=0.9), np.zeros(2), []
    for r, d in zip(rewards, dones):
        scaled = scaler(r, d)
        returns = 0.9 * returns + r
        seen.append(returns.copy())
        var = np.concatenate(seen).var() * len(seen) * 2 / (len(seen) * 2 + 1e-4)  # count starts at 1e-4, var 1
        var += 1e-4 / (len(seen) * 2 + 1e-4) * (1.0 + np.concatenate(seen).mean() ** 2)
        np.testing.assert_allclose(scaled, r / np.sqrt(var + 1e-8), rtol=1e-4)
        returns[d] = 0.0
