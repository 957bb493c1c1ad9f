"""LHF (Chen et al. 2025, arXiv:2505.15143): the scores by hand, the weighted window sampling, the experiment end to
end at a tiny size, and the command's one-line errors."""

import numpy as np
import pytest
import torch

from ascent.incontext.histories import collect
from ascent.incontext.lhf import LHFParams, lhf_scores, lhf_weights, mixed_history, run_lhf
from ascent.incontext.meta import main
from ascent.incontext.methods import META_METHODS, paired
from ascent.incontext.model import TransformerParams
from ascent.incontext.tasks import make_family
from ascent.incontext.train import TrainParams, history_tokens, sample_windows, train_model


def test_scores_rank_a_steady_learner_above_a_flat_and_a_collapsing_history():
    returns = np.array(
        [
            [0, 0, 1, 1, 2, 2, 3, 3],  # steady improvement
            [1, 1, 1, 1, 1, 1, 1, 1],  # flat
            [0, 0, 3, 3, 0, 0, 3, 3],  # improves but falls back
            [3, 3, 2, 2, 1, 1, 0, 0],  # gets worse
        ],
        dtype=float,
    )
    imp, stab, u = lhf_scores(returns, lam=1.0, blocks=4)
    np.testing.assert_allclose(imp, [1.0, 0.0, 1.0, -1.0])
    np.testing.assert_allclose(stab, [0.0, 0.0, -1.0 / 3, -1.0 / 3])
    assert u[0] > u[2] > u[1] > u[3]
    w = lhf_weights(u)
    assert w[3] == 0.0 and w[0] == 1.0 and np.all(np.diff(w[[3, 1, 2, 0]]) > 0)
    # lambda = 0: improvement only, the unstable learner ties with the steady one
    assert lhf_scores(returns, lam=0.0, blocks=4)[2][2] == pytest.approx(1.0)
    with pytest.raises(ValueError, match="blocks"):
        lhf_scores(returns, 1.0, blocks=9)


def test_weighted_windows_never_come_from_a_zero_weight_history():
    fam = make_family("darkroom(horizon=5)")
    h = collect(fam, fam.tasks("train", 4, 0), "q_learning", 3, 0)
    tok = history_tokens(h, fam.num_actions)
    tok.obs[:] = torch.arange(4)[:, None]  # mark each window by its row
    w = sample_windows(tok, 5, 400, torch.Generator().manual_seed(0), torch.tensor([0.0, 0.5, 0.0, 0.5]))
    assert set(w.obs[:, 0].tolist()) == {1, 3}
    with pytest.raises(ValueError, match="history_weights"):
        train_model(_model(fam), h, TrainParams(steps=1, context=5), 0, history_weights=np.zeros(4))


def _model(fam):
    from ascent.incontext.model import InContextTransformer

    return InContextTransformer(fam.num_obs, fam.num_actions, fam.horizon, 5, TransformerParams(16, 1, 2, 32), 3)


def test_lhf_puts_most_weight_on_the_learning_histories_and_runs_end_to_end():
    p = LHFParams(
        family="darkroom(size=5,horizon=8)",
        sources=["q_learning", "noisy_expert(eps_start=1.0,eps_end=1.0)"],
        histories=12,
        episodes=30,
        eval_tasks=3,
        eval_episodes=10,
        model=TransformerParams(16, 1, 2, 32),
        train=TrainParams(context=16, steps=3, warmup=1),
        cache_dir=None,
    )
    h = mixed_history(p, 0)
    assert h.obs.shape == (12, 30 * 8) and h.episode_returns()[:6, -5:].mean() > h.episode_returns()[6:].mean()
    out = run_lhf(0, p)
    assert out["lhf_mass_first_source"] > 0.8  # Q-learning improves, uniform-random histories do not
    for key in ("first5_ad", "last5_ad", "first5_lhf", "last5_lhf", "mean_lhf"):
        assert 0.0 <= out[key] <= 8.0
    assert len(out["curve_lhf"]) == 10 and "lhf" in META_METHODS


def test_paired_interval_and_command_errors(capsys):
    d = paired([1.0, 2.0, 3.0, 4.0, 5.0], [0.0, 0.0, 0.0, 0.0, 0.0])
    assert d["mean"] == 3.0 and d["ci95"][0] == pytest.approx(3.0 - 2.776445 * np.sqrt(2.5) / np.sqrt(5), rel=1e-5)
    assert main(["lhf", "lam=-1"]) == 2
    assert "lam >= 0" in capsys.readouterr().err
    assert main(["nope"]) == 2
