"""SQIRL (Laidlaw, Russell & Dragan 2023): Monte-Carlo and fitted-Q targets by hand, learning CartPole, exact resume."""

from __future__ import annotations

import numpy as np
import pytest
import torch

pytest.importorskip("gymnasium")

from ascent.app.pipeline import train  # noqa: E402
from ascent.classic.base import ClassicContext  # noqa: E402
from ascent.classic.envs import VecEnv, make_env  # noqa: E402
from ascent.classic.sqirl import SQIRL, SQIRLParams, returns_to_go  # noqa: E402
from ascent.config import ConfigError, load_config  # noqa: E402
from ascent.trainer.checkpoint import Checkpointer  # noqa: E402

BASE = ["classic.env=CartPole-v1", "logging.progress=false"]


def test_returns_to_go_by_hand():
    rewards = np.array([[1.0, 2.0], [1.0, 0.0], [1.0, 4.0]], np.float32)  # (T=3, E=2)
    done = np.array([[0, 0], [1, 0], [0, 1]], np.float32)
    g = returns_to_go(rewards, done, 0.5)
    # env 0: G2 = 1 (round end), G1 = 1 (done), G0 = 1 + 0.5 * 1; env 1: G2 = 4, G1 = 0 + 2, G0 = 2 + 1
    np.testing.assert_allclose(g, [[1.5, 3.0], [1.0, 2.0], [1.0, 4.0]])


def test_fit_round_regresses_on_monte_carlo_then_fitted_q_targets(monkeypatch):
    envs = VecEnv(lambda: make_env("CartPole-v1"), 1, seed=0)
    algo = SQIRL(
        ClassicContext(envs, 100, 0, torch.device("cpu")),
        SQIRLParams(round_steps=3, k=3, gamma=0.5, scheme="stationary"),
    )
    last = algo.q.net[-1]
    with torch.no_grad():  # Q(s, .) = [1, 2] everywhere
        last.weight.zero_()
        last.bias.copy_(torch.tensor([1.0, 2.0]))
    d = algo.data
    d["rewards"][:, 0], d["terminated"][:, 0], d["done"][:, 0] = [1.0, 3.0, 5.0], [0, 1, 0], [0, 1, 1]
    seen = []

    def fake_regress(obs, actions, y):
        seen.append(y.tolist())
        with torch.no_grad():  # the next Q_j: [y.mean(), 2 y.mean()] everywhere
            last.bias.copy_(torch.tensor([1.0, 2.0]) * float(y.mean()))
        return 0.0

    monkeypatch.setattr(algo, "regress", fake_regress)
    algo.fit_round()
    assert seen[0] == [2.5, 3.0, 5.0]  # Monte-Carlo: 1 + 0.5 * 3, 3 (terminal), 5 (truncated: bootstrap 0)
    # Q_1 = [3.5, 7] after the fake fit: r + 0.5 * (1 - terminated) * 7; the truncated step bootstraps
    assert seen[1] == [4.5, 3.0, 8.5]
    m = 2 * np.mean([4.5, 3.0, 8.5])
    np.testing.assert_allclose(seen[2], [1 + 0.5 * m, 3.0, 5 + 0.5 * m], rtol=1e-6)


def test_bad_parameters_say_what_to_change():
    with pytest.raises(ConfigError, match="k must be > 0"):
        SQIRLParams(k=0)
    with pytest.raises(ConfigError, match="epsilon must be in"):
        load_config("acrobot-dqn", [*BASE, "classic.algorithm=sqirl(epsilon=1.5)"])


def test_sqirl_learns_cartpole(tmp_path):
    """Four rounds of 2,500 steps: well above a random policy's ~22."""
    over = [*BASE, f"output_dir={tmp_path}", "classic.total_steps=10000", "classic.algorithm=sqirl(round_steps=2500)"]
    assert train(load_config("acrobot-dqn", over))["final_return"] > 60


def _weights(run):
    from safetensors.torch import load_file

    return load_file(str(Checkpointer(run / "checkpoints").latest() / "model.safetensors"))


def test_resume_is_exact(tmp_path):
    """3,000 steps in one go == 1,500 (stopped mid-round), then resumed: same weights, same evaluation returns."""
    common = [*BASE, "classic.total_steps=3000", "classic.eval_episodes=2", f"output_dir={tmp_path}"]
    common.append("classic.algorithm=sqirl(round_steps=1000, chunk=40, fit_epochs=2)")
    whole = train(load_config("acrobot-dqn", [*common, "name=whole"]))
    assert train(load_config("acrobot-dqn", [*common, "name=split"]), stop_at=1500) is None
    split = train(run_dir=tmp_path / "split", resume=True)
    assert split["final_returns"] == whole["final_returns"] and split["env_steps"] == whole["env_steps"]
    a, b = _weights(tmp_path / "whole"), _weights(tmp_path / "split")
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_timestep_scheme_follows_the_learned_prefix_then_acts_randomly(monkeypatch):
    # the paper's scheme: round i acts with the frozen pi_0..pi_{i-1} at timesteps < i, uniformly at random after,
    # and regresses only on the random continuations of episodes that ended within the round
    envs = VecEnv(lambda: make_env("CartPole-v1"), 2, seed=0)
    algo = SQIRL(ClassicContext(envs, 10_000, 0, torch.device("cpu")), SQIRLParams(round_steps=200, k=1, chunk=100))
    seen = []

    def fake_regress(obs, actions, y):
        seen.append((obs.clone(), actions.clone(), y.clone()))
        return 0.0

    monkeypatch.setattr(algo, "regress", fake_regress)
    while algo.round == 0:
        algo.iteration(False)  # round 0: random episodes, then the fit that freezes pi_0
    start = algo.ep_t.copy()  # episodes run across rounds
    while algo.t < algo.T:
        algo.collect()  # round 1's data, not yet fitted
    assert len(algo.policies) == 1  # pi_0 frozen after round 0
    d = algo.data
    ep_t = start  # replay round 1's timesteps from the done flags
    prefix = 0
    for t in range(algo.T):
        for e in range(2):
            if ep_t[e] == 0:  # timestep 0: pi_0's greedy action
                want = int(algo.policies[0](torch.from_numpy(d["obs"][t, e : e + 1])).argmax())
                assert d["actions"][t, e] == want and d["keep"][t, e] == 0
                prefix += 1
            else:
                assert d["keep"][t, e] == 1
        ep_t = np.where(d["done"][t] > 0, 0, ep_t + 1)
    assert prefix >= 2
    # round 0's regression: every transition of the episodes that ended, targets = Monte-Carlo returns
    obs0, _, y0 = seen[0]
    assert len(y0) < 2 * algo.T and float(y0.min()) >= 1.0  # CartPole: reward 1 per step, G >= 1


def test_timestep_scheme_acts_with_the_policy_of_each_timestep():
    envs = VecEnv(lambda: make_env("CartPole-v1"), 1, seed=0)
    algo = SQIRL(ClassicContext(envs, 100, 0, torch.device("cpu")), SQIRLParams(round_steps=10))
    nets = []
    for favourite in (0, 1):  # pi_0 always pushes left, pi_1 always right
        net = type(algo.q)(envs.obs_dim, envs.n_actions, [8])
        with torch.no_grad():
            net.net[-1].weight.zero_()
            net.net[-1].bias.copy_(torch.tensor([1.0, 0.0] if favourite == 0 else [0.0, 1.0]))
        nets.append(net)
    algo.policies = nets
    obs = np.zeros((3, envs.obs_dim), np.float32)
    algo.begin_episodes()
    assert [int(algo.act(obs, True)[0]) for _ in range(4)] == [0, 1, 1, 1]  # beyond the learned depth: the last
    algo.begin_episodes()
    assert int(algo.act(obs, True)[0]) == 0
    with pytest.raises(ConfigError, match="scheme"):
        SQIRLParams(scheme="nope")
