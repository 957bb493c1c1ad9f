"""Distractor features and SEEK: the knockoff threshold and statistic against hand-computed values and a slow
reference, knockoffs with the right covariance, the sequential selection on a hand-made MDP and on CartPole among
20 distractors, and exact resume of runs that use them."""

from __future__ import annotations

import numpy as np
import pytest
import torch

gym = pytest.importorskip("gymnasium")

from ascent.app.pipeline import train  # noqa: E402
from ascent.classic.envs import env_state, make_env, set_env_state  # noqa: E402
from ascent.classic.seek import (  # noqa: E402
    SeekParams,
    collect,
    gaussian_knockoffs,
    knockoff_statistic,
    knockoff_threshold,
    seek_indices,
    seek_select,
)
from ascent.config import ConfigError, load_config  # noqa: E402
from ascent.trainer.checkpoint import Checkpointer  # noqa: E402

W = np.array([5.0, 4.0, 3.0, -1.0, 2.0, -2.5, 0.5])


def test_knockoff_threshold_by_hand():
    # t:             0.5   1    2    2.5   3    4    5
    # #{W <= -t}:     2    2    1    1     0    0    0
    # #{W >= t}:      5    4    4    3     3    2    1
    # knockoff+:     3/5  3/4  2/4  2/3   1/3  1/2  1      knockoff: 2/5  2/4  1/4  1/3  0 ...
    assert knockoff_threshold(W, q=0.35, offset=1) == 3.0
    assert knockoff_threshold(W, q=0.3, offset=0) == 2.0
    assert knockoff_threshold(W, q=0.45, offset=0) == 0.5
    assert knockoff_threshold(W, q=0.2, offset=1) == float("inf")  # knockoff+ needs 1/q selections
    assert knockoff_threshold(np.zeros(3), q=0.5) == float("inf")


def slow_lasso(F: np.ndarray, t: np.ndarray, lam: float) -> np.ndarray:
    """The lasso 1/2n |t - F b|^2 + lam |b|_1 by plain cyclic coordinate descent on the data, one column at a time."""
    n, m = F.shape
    beta = np.zeros(m)
    for _ in range(3000):
        before = beta.copy()
        for j in range(m):
            partial = t - F @ beta + F[:, j] * beta[j]
            rho = F[:, j] @ partial / n
            beta[j] = np.sign(rho) * max(abs(rho) - lam, 0.0) / (F[:, j] @ F[:, j] / n)
        if np.max(np.abs(beta - before)) < 1e-12:
            break
    return beta


def test_knockoff_statistic_matches_a_slow_reference():
    rng = np.random.default_rng(0)
    n, p = 300, 3
    X, Xk, A = rng.normal(size=(n, p)), rng.normal(size=(n, p)), rng.normal(size=(n, 1))
    y = 2.0 * X[:, 0] - X[:, 1] ** 2 + 0.5 * A[:, 0] + 0.1 * rng.normal(size=n)

    def z(v):
        return (v - v.mean()) / v.std()

    cols = [z(X[:, j]) for j in range(p)] + [z(X[:, j] ** 2) for j in range(p)]
    cols += [z(Xk[:, j]) for j in range(p)] + [z(Xk[:, j] ** 2) for j in range(p)] + [z(A[:, 0])]
    F = np.stack(cols, 1)  # (n, 13)
    beta = slow_lasso(F, z(y), lam=np.sqrt(2 * np.log(13) / n))
    expected = [abs(beta[j]) + abs(beta[p + j]) - abs(beta[2 * p + j]) - abs(beta[3 * p + j]) for j in range(p)]
    W = knockoff_statistic(X, Xk, y, A)
    np.testing.assert_allclose(W, expected, atol=1e-4)
    assert W[0] > 0.5 and W[1] > 0.2 and W[2] == 0.0  # the linear and the squared signal; the null exactly 0


def test_gaussian_knockoffs_have_the_knockoff_covariance():
    rng = np.random.default_rng(1)
    sigma = np.array([[1.0, 0.5, 0.0], [0.5, 1.0, 0.3], [0.0, 0.3, 1.0]])
    X = rng.multivariate_normal([1.0, -2.0, 0.0], sigma, size=200_000)
    Xk = gaussian_knockoffs(X, rng)
    joint = np.cov(np.concatenate([X, Xk], 1), rowvar=False)
    s = min(1.0, 2 * np.linalg.eigvalsh(sigma).min()) * 0.999
    np.testing.assert_allclose(joint[3:, 3:], sigma, atol=0.02)  # cov(X~) = Sigma
    np.testing.assert_allclose(joint[:3, 3:], sigma - s * np.eye(3), atol=0.02)  # cov(X, X~) = Sigma - D
    np.testing.assert_allclose(Xk.mean(0), [1.0, -2.0, 0.0], atol=0.02)


def test_seek_follows_the_dynamics_to_variables_the_reward_does_not_name():
    """r depends on s0; s0' on s1; s1 on itself; s2 and five noises are irrelevant (s2 has its own dynamics)."""
    rng = np.random.default_rng(0)
    n, p = 3000, 8
    S = rng.normal(size=(n, p))
    A = rng.integers(2, size=(n, 1)).astype(float)
    R = S[:, 0] + 0.5 * rng.normal(size=n)
    S2 = rng.normal(size=(n, p))
    S2[:, 0] = 0.8 * S[:, 1] + 0.3 * A[:, 0] + 0.3 * rng.normal(size=n)
    S2[:, 1] = 0.9 * S[:, 1] + 0.3 * rng.normal(size=n)
    S2[:, 2] = 0.9 * S[:, 2] + 0.3 * rng.normal(size=n)
    done = np.zeros(n)
    assert seek_select(S, A, R, S2, done, q=0.1, offset=0, seed=0) == [0, 1]


@pytest.mark.parametrize("kind", ["noise", "ar1"])
def test_seek_keeps_cartpoles_pole_and_drops_20_distractors(kind):
    """From random-policy data SEEK keeps the pole (angle 2, angular velocity 3) and drops all 20 distractors. The
    cart's position and velocity matter only through |x| > 2.4 endings, which a random policy never reaches in
    CartPole (every ending in these samples is the pole's), so the data cannot show them: they go too."""
    for seed in range(3):
        env = make_env("CartPole-v1", [f"distractors(n=20, kind={kind})"])
        S, A, R, S2, D = collect(env, 4000, seed)
        assert not np.any((np.abs(S2[:, 0]) > 2.4) & (D > 0))  # no cart ending in the data
        assert seek_indices(env, SeekParams(samples=4000, seed=seed)) == [2, 3]


def test_distractors_are_irrelevant_processes_of_the_asked_kind():
    env = make_env("CartPole-v1", ["distractors(n=3, kind=ar1, rho=0.9)"])
    obs, _ = env.reset(seed=0)
    zs = [obs[4:]]
    for t in range(4000):
        obs, _, term, trunc, _ = env.step(t % 2)
        zs.append(obs[4:])
        if term or trunc:
            obs, _ = env.reset()
            zs.append(obs[4:])
    z = np.array(zs)
    lag = np.mean([np.corrcoef(z[:-1, i], z[1:, i])[0, 1] for i in range(3)])
    assert 0.85 < lag < 0.95 and abs(z.std() - 1.0) < 0.1  # rho 0.9, stationary unit variance
    a = make_env("CartPole-v1", ["distractors(n=3)"])
    b = make_env("CartPole-v1", ["distractors(n=3)"])
    np.testing.assert_array_equal(a.reset(seed=5)[0], b.reset(seed=5)[0])
    np.testing.assert_array_equal(a.step(0)[0], b.step(0)[0])
    S, *_ = collect(a, 300, 0)
    assert abs(np.corrcoef(S[:-1, 5], S[1:, 5])[0, 1]) < 0.2  # noise: no autocorrelation


def test_keep_selects_exactly_and_bad_parameters_fail():
    env = make_env("CartPole-v1", ["distractors(n=2)", "seek(keep=[3, 0, 5])"])
    obs, _ = env.reset(seed=0)
    assert obs.shape == (3,) and env.observation_space.shape == (3,)
    np.testing.assert_array_equal(obs[:2], env.unwrapped.state[[0, 3]].astype(np.float32))
    with pytest.raises(ValueError, match="keep indices must be < the observation size 6"):
        make_env("CartPole-v1", ["distractors(n=2)", "seek(keep=[6])"])
    with pytest.raises(ConfigError, match="q must be in"):
        load_config("cartpole-ppo", ["classic.wrappers=[seek(q=1.5)]"])
    with pytest.raises(ConfigError, match="rho must be in"):
        load_config("cartpole-ppo", ["classic.wrappers=[distractors(rho=1.0)]"])


def test_mujoco_snapshot_keeps_the_distractor_stream():
    pytest.importorskip("mujoco")
    spec = ["distractors(n=4, kind=ar1)", "seek(keep=[1, 3, 4, 7])"]
    env = make_env("InvertedPendulum-v5", spec)
    env.reset(seed=0)
    for _ in range(3):
        env.step(np.zeros(1, np.float32))
    fresh = set_env_state(make_env("InvertedPendulum-v5", spec), env_state(env))
    for t in range(5):
        a = np.full(1, 0.1 * t, np.float32)
        np.testing.assert_array_equal(env.step(a)[0], fresh.step(a)[0])


def _weights(run_dir) -> dict[str, torch.Tensor]:
    from safetensors.torch import load_file

    return load_file(str(Checkpointer(run_dir / "checkpoints").latest() / "model.safetensors"))


def test_resume_with_distractors_and_seek_is_exact(tmp_path):
    common = [
        "classic.wrappers=[{distractors: {n: 8, kind: ar1}}, {seek: {samples: 1000}}]",
        "classic.total_steps=512",
        "classic.num_envs=4",
        "classic.algorithm.ppo.batch_size=64",
        "classic.algorithm.ppo.n_epochs=2",
        "classic.eval_episodes=2",
        "logging.progress=false",
        f"output_dir={tmp_path}",
    ]
    whole = train(load_config("cartpole-ppo", [*common, "name=whole"]))
    assert train(load_config("cartpole-ppo", [*common, "name=split"]), stop_at=256) is None
    split = train(run_dir=tmp_path / "split", resume=True)
    assert split["final_returns"] == whole["final_returns"]
    a, b = _weights(tmp_path / "whole"), _weights(tmp_path / "split")
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
