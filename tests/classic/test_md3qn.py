"""MD3QN (arXiv:2110.13578) and the reward-channel wrappers: MMD and target references, channels that sum to the
reward, the discrete action map, distribution matching, exact resume."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

gym = pytest.importorskip("gymnasium")

from ascent.app.pipeline import train  # noqa: E402
from ascent.classic.envs import make_env  # noqa: E402
from ascent.classic.md3qn import md3qn_target, mmd2  # noqa: E402
from ascent.classic.reward_channels import pendulum_terms  # noqa: E402
from ascent.config import ConfigError, load_config  # noqa: E402
from ascent.trainer.checkpoint import Checkpointer  # noqa: E402


def slow_mmd2(x, y, bandwidths):
    """The V-statistic MMD² of one pair of particle lists, by loops."""

    def k(a, b):
        d2 = sum((ai - bi) ** 2 for ai, bi in zip(a, b))
        return sum(math.exp(-d2 / h) for h in bandwidths)

    def mean_k(p, q):
        return sum(k(a, b) for a in p for b in q) / (len(p) * len(q))

    return mean_k(x, x) + mean_k(y, y) - 2 * mean_k(x, y)


def test_mmd2_matches_a_slow_loop():
    g = torch.Generator().manual_seed(0)
    x, y = (
        torch.randn(3, 4, 2, generator=g, dtype=torch.float64),
        torch.randn(3, 5, 2, generator=g, dtype=torch.float64),
    )
    got = mmd2(x, y, [0.5, 2.0, 10.0])
    want = [slow_mmd2(x[b].tolist(), y[b].tolist(), [0.5, 2.0, 10.0]) for b in range(3)]
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-10)
    assert float(mmd2(x, x, [1.0]).abs().max()) < 1e-12


def test_target_is_greedy_on_the_summed_particle_means():
    # action 0: particles (1, 0), (3, 0) -> Q = 2; action 1: (0, 1), (0, 2) -> Q = 1.5: a* = 0
    nxt = torch.tensor([[[[1.0, 0.0], [3.0, 0.0]], [[0.0, 1.0], [0.0, 2.0]]]] * 2)  # (B=2, A=2, N=2, C=2)
    y = md3qn_target(torch.tensor([[1.0, -1.0], [0.5, 0.5]]), torch.tensor([0.0, 1.0]), nxt, 0.5)
    torch.testing.assert_close(y[0], torch.tensor([[1.5, -1.0], [2.5, -1.0]]))  # r + 0.5 z
    torch.testing.assert_close(y[1], torch.tensor([[0.5, 0.5], [0.5, 0.5]]))  # terminated: r only


def test_pendulum_channels_are_its_cost_terms_and_sum_to_the_scaled_reward():
    ref, env = (
        make_env("Pendulum-v1"),
        make_env("Pendulum-v1", ["pendulum_channels(scale=0.5)", "discrete_actions(n=5)"]),
    )
    ref.reset(seed=3), env.reset(seed=3)
    for i in [0, 4, 2, 1, 3, 0]:
        theta, theta_dot = ref.unwrapped.state
        _, r_ref, *_ = ref.step(np.array([-2.0 + i], np.float32))
        _, r, _, _, info = env.step(i)
        vec = info["reward_vector"]
        assert vec.shape == (3,) and r == pytest.approx(0.5 * r_ref) and vec.sum() == pytest.approx(r, rel=1e-5)
        np.testing.assert_allclose(vec, 0.5 * pendulum_terms(theta, theta_dot, -2.0 + i), rtol=1e-6)
    th = 4.0 - 2 * np.pi  # 4 rad wraps to 4 - 2π
    np.testing.assert_allclose(pendulum_terms(4.0, 1.0, 2.0), [-(th**2), -0.1, -0.004], rtol=1e-6)


def test_mujoco_channels_are_the_info_terms():
    pytest.importorskip("mujoco")
    env = make_env("InvertedDoublePendulum-v5", ["mujoco_channels(scale=0.1)", "discrete_actions(n=3)"])
    env.reset(seed=0)
    for a in [0, 2, 1, 2]:
        _, r, term, _, info = env.step(a)
        want = [info["distance_penalty"], info["reward_survive"], info["velocity_penalty"]]  # sorted keys
        np.testing.assert_allclose(info["reward_vector"], 0.1 * np.array(want), rtol=1e-5)
        assert info["reward_vector"].sum() == pytest.approx(r, rel=1e-5)
        if term:
            break


def test_discrete_actions_map_onto_the_box():
    env = make_env("Pendulum-v1", ["discrete_actions(n=5)"])
    assert env.action_space.n == 5
    assert [float(env.action(i)[0]) for i in range(5)] == [-2.0, -1.0, 0.0, 1.0, 2.0]
    assert env.action(3).shape == (1,)
    with pytest.raises(ConfigError, match="n must be >= 2"):
        load_config("acrobot-dqn", ["classic.env=Pendulum-v1", "classic.wrappers=[discrete_actions(n=1)]"])
    with pytest.raises(ConfigError, match="1-D continuous action box"):
        make_env("CartPole-v1", ["discrete_actions"])
    with pytest.raises(ConfigError, match="before discrete_actions"):
        make_env("Pendulum-v1", ["discrete_actions", "pendulum_channels"])
    cfg = load_config("acrobot-dqn", ["classic.env=Pendulum-v1", "classic.wrappers=[discrete_actions]"])
    assert cfg.classic.wrappers == ["discrete_actions"]  # dqn accepts Pendulum once discretised


def test_mmd_descent_matches_a_correlated_two_channel_distribution():
    """Free particles trained on MMD² reach the target's per-channel means, spreads and correlation (what a mean-only
    loss cannot): the target is the joint return {(0, 0), (2, 2)} with perfectly correlated channels."""
    torch.manual_seed(0)
    z = torch.nn.Parameter(torch.randn(1, 16, 2))
    target = torch.tensor([[0.0, 0.0], [2.0, 2.0]]).repeat(8, 1)[None]  # (1, 16, 2)
    opt = torch.optim.Adam([z], lr=0.05)
    for _ in range(400):
        opt.zero_grad()
        mmd2(z, target, [1.0, 4.0, 16.0]).sum().backward()
        opt.step()
    p = z.detach()[0]
    np.testing.assert_allclose(p.mean(0).numpy(), [1.0, 1.0], atol=0.05)
    np.testing.assert_allclose(p.std(0, unbiased=False).numpy(), [1.0, 1.0], atol=0.05)
    assert np.corrcoef(p.numpy().T)[0, 1] > 0.99


def test_md3qn_says_when_the_env_has_no_channels(tmp_path):
    cfg = load_config(
        "acrobot-dqn",
        [
            f"output_dir={tmp_path}",
            "classic.total_steps=8",
            "logging.progress=false",
            "classic.algorithm=md3qn(hidden=[8])",
        ],
    )
    with pytest.raises(ValueError, match="add a channel wrapper"):
        train(cfg)


def _weights(run_dir):
    from safetensors.torch import load_file

    return load_file(str(Checkpointer(run_dir / "checkpoints").latest() / "model.safetensors"))


def test_resume_is_exact(tmp_path):
    """N steps in one go == N/2, stop, resume: same weights and evaluation returns (reward vectors in the state)."""
    common = [
        "classic.env=Pendulum-v1",
        "classic.total_steps=300",
        "classic.eval_episodes=1",
        "classic.wrappers=[pendulum_channels(scale=0.1),discrete_actions(n=3)]",
        "classic.algorithm=md3qn(hidden=[16],particles=4,learning_starts=50,batch_size=16,target_update_interval=100)",
        "logging.progress=false",
        f"output_dir={tmp_path}",
    ]
    whole = train(load_config("acrobot-dqn", [*common, "name=whole"]))
    assert train(load_config("acrobot-dqn", [*common, "name=split"]), stop_at=150) is None
    split = train(run_dir=tmp_path / "split", resume=True)
    assert split["final_returns"] == whole["final_returns"] and split["env_steps"] == whole["env_steps"]
    a, b = _weights(tmp_path / "whole"), _weights(tmp_path / "split")
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
