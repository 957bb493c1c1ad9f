"""PSDRL (Sasso, Conserva & Rauber 2023, arXiv:2305.00477): the Bayesian last layer's posterior by hand and its
concentration with data, the lookahead by hand, Thompson samples that differ before data and agree after, learning on
CartPole above a random policy, and exact resume."""

from __future__ import annotations

import math

import pytest
import torch

from ascent.classic.psdrl import PSDRLParams, blr_posterior


def test_posterior_by_hand_one_feature():
    """phi = (1, 2), y = (1, 3), prior precision 1, noise variance 0.5: precision = 1 + 5 / 0.5 = 11,
    mu = (1 + 6) / 0.5 / 11 = 14 / 11."""
    mu, sigma = blr_posterior(torch.tensor([[1.0], [2.0]]), torch.tensor([[1.0], [3.0]]), 1.0, 0.5)
    assert math.isclose(float(sigma), 1 / 11, rel_tol=1e-6) and math.isclose(float(mu), 14 / 11, rel_tol=1e-6)


def test_posterior_concentrates_on_the_truth_with_data():
    g = torch.Generator().manual_seed(0)
    w = torch.tensor([[2.0, -1.0], [0.5, 3.0]])
    few, many = torch.randn(3, 2, generator=g), torch.randn(3000, 2, generator=g)
    _, s_few = blr_posterior(few, few @ w, 1.0, 0.01)
    mu, s_many = blr_posterior(many, many @ w + 0.1 * torch.randn(3000, 2, generator=g), 1.0, 0.01)
    assert torch.allclose(mu, w, atol=0.02)
    assert float(s_many.trace()) < 0.01 * float(s_few.trace())


def test_bad_params_say_what_to_change():
    with pytest.raises(ValueError, match="noise_var must be > 0"):
        PSDRLParams(noise_var=0.0)
    with pytest.raises(ValueError, match="gamma and target_tau"):
        PSDRLParams(gamma=0.0)


def _algo(total_steps: int = 1000, **kw):
    pytest.importorskip("gymnasium")
    import gymnasium as gym

    from ascent.classic.base import ClassicContext
    from ascent.classic.envs import VecEnv
    from ascent.classic.psdrl import PSDRL

    torch.manual_seed(0)
    envs = VecEnv(lambda: gym.make("CartPole-v1"), 1, seed=0)
    return PSDRL(ClassicContext(envs, total_steps, 0, torch.device("cpu")), PSDRLParams(**kw))


def test_lookahead_by_hand():
    """A head that predicts ds = 0 and r = 1 from the bias feature only, p_done = sigmoid(0) = 1/2, V = 4
    everywhere: Q = 1 + gamma * 0.5 * 4 for both actions."""
    algo = _algo(gamma=0.5)
    weights = torch.zeros(algo.p.features + 1, 5)
    weights[-1, -1] = 1.0
    with torch.no_grad():
        algo.model.done.weight.zero_()
        value = lambda x: torch.full((x.shape[0], 1), 4.0)  # noqa: E731
        q = algo.lookahead(torch.zeros(3, 4), weights, value)
    assert torch.allclose(q, torch.full((3, 2), 2.0))


def test_thompson_samples_spread_then_agree():
    """With 20 transitions two posterior samples predict the next states and rewards very differently; with 2,000
    they nearly agree (compared on predictions: a feature that is 0 everywhere keeps its prior spread, harmlessly)."""
    algo = _algo(learning_starts=10**9)
    spreads = []
    for n in (20, 2000):
        while len(algo.buffer) < n:
            algo.iteration(False)
        with torch.no_grad():
            phi = algo.model.features(
                torch.from_numpy(algo.buffer.obs[:20]), torch.from_numpy(algo.buffer.actions[:20])
            )
            algo.resample()
            a = phi @ algo.sampled
            algo.resample()
            spreads.append(float((phi @ algo.sampled - a).abs().mean()))
    assert spreads[1] < 0.3 * spreads[0]


def test_psdrl_learns_cartpole(tmp_path):
    """3,000 steps: well above a random policy's ~22 (seed 0 reached 325 at 5,000 steps in the comparison)."""
    pytest.importorskip("gymnasium")
    from ascent.app.pipeline import train
    from ascent.config import load_config

    over = ["classic.env=CartPole-v1", "classic.total_steps=3000", "logging.progress=false"]
    over += ["classic.algorithm=psdrl(learning_starts=500)", f"output_dir={tmp_path}", "classic.eval_episodes=5"]
    assert train(load_config("acrobot-dqn", over))["final_return"] > 60


def test_resume_is_exact(tmp_path):
    pytest.importorskip("gymnasium")
    from safetensors.torch import load_file

    from ascent.app.pipeline import train
    from ascent.config import load_config
    from ascent.trainer.checkpoint import Checkpointer

    common = ["classic.env=CartPole-v1", "classic.total_steps=400", "logging.progress=false"]
    common += ["classic.algorithm=psdrl(learning_starts=100,hidden=[16,16],features=8)", "classic.eval_episodes=2"]
    common += [f"output_dir={tmp_path}"]
    whole = train(load_config("acrobot-dqn", [*common, "name=whole"]))
    assert train(load_config("acrobot-dqn", [*common, "name=split"]), stop_at=200) is None
    split = train(run_dir=tmp_path / "split", resume=True)
    assert split["final_returns"] == whole["final_returns"]
    a, b = (
        load_file(str(Checkpointer(tmp_path / n / "checkpoints").latest() / "model.safetensors"))
        for n in ("whole", "split")
    )
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
