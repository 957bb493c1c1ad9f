"""Offline preference losses (DPO, cDPO, IPO, SimPO) against values computed by hand, their gradients, and their
parameter checks."""

from __future__ import annotations

import math

import pytest
import torch

from ascent.algorithms.preference import PREFERENCE_LOSSES, PreferenceInput
from ascent.typed import ConfigError


def nls(x: float) -> float:
    """-log σ(x)."""
    return math.log1p(math.exp(-x))


def pairs(policy_c, policy_r, ref_c=None, ref_r=None, n_c=(1, 1), n_r=(1, 1), grad=False) -> PreferenceInput:
    t = lambda v: None if v is None else torch.tensor(v, dtype=torch.float32, requires_grad=grad)  # noqa: E731
    return PreferenceInput(t(policy_c), t(policy_r), t(ref_c), t(ref_r), torch.tensor(n_c), torch.tensor(n_r))


# log-ratios: chosen [1, 0], rejected [-1, 1]
LOGRATIO = dict(policy_c=[-1.0, -2.0], policy_r=[-3.0, -1.0], ref_c=[-2.0, -2.0], ref_r=[-2.0, -2.0])


def test_dpo_by_hand():
    loss, m = PREFERENCE_LOSSES.resolve("dpo(beta=0.5)")(pairs(**LOGRATIO))
    # h = 0.5 * ((1 - (-1)), (0 - 1)) = (1, -0.5)
    assert float(loss) == pytest.approx((nls(1.0) + nls(-0.5)) / 2, abs=1e-6)
    assert float(loss) == pytest.approx(0.643670, abs=1e-5)
    assert m["pref/accuracy"] == 0.5
    assert m["pref/margin"] == pytest.approx(0.25)
    assert m["pref/reward_chosen"] == pytest.approx(0.25) and m["pref/reward_rejected"] == pytest.approx(0.0)


def test_cdpo_label_smoothing_by_hand_and_its_finite_optimum():
    loss, _ = PREFERENCE_LOSSES.resolve("dpo(beta=0.5, label_smoothing=0.2)")(pairs(**LOGRATIO))
    by_hand = (0.8 * nls(1.0) + 0.2 * nls(-1.0) + 0.8 * nls(-0.5) + 0.2 * nls(0.5)) / 2
    assert float(loss) == pytest.approx(by_hand, abs=1e-6)
    assert float(loss) == pytest.approx(0.693670, abs=1e-5)  # = DPO's 0.643670 + ε·mean(h) = + 0.2·0.25
    # cDPO's gradient in h is -σ(-h) + ε: zero at h = log((1-ε)/ε), where DPO's keeps pushing
    eps, beta = 0.2, 1.0
    h = torch.tensor([math.log((1 - eps) / eps)], requires_grad=True)
    inp = PreferenceInput(h, torch.zeros(1), torch.zeros(1), torch.zeros(1), torch.ones(1), torch.ones(1))
    PREFERENCE_LOSSES.resolve(f"dpo(beta={beta}, label_smoothing={eps})")(inp)[0].backward()
    assert float(h.grad) == pytest.approx(0.0, abs=1e-6)
    h.grad = None
    PREFERENCE_LOSSES.resolve(f"dpo(beta={beta})")(inp)[0].backward()
    assert float(h.grad) == pytest.approx(-eps, abs=1e-6)  # -σ(-log 4) = -0.2


def test_dpo_gradient_is_beta_sigma_minus_h_over_pairs():
    inp = pairs(**LOGRATIO, grad=True)
    loss, _ = PREFERENCE_LOSSES.resolve("dpo(beta=0.5)")(inp)
    loss.backward()
    sig = torch.sigmoid(-torch.tensor([1.0, -0.5]))
    assert torch.allclose(inp.policy_chosen.grad, -0.5 * sig / 2, atol=1e-6)
    assert torch.allclose(inp.policy_rejected.grad, 0.5 * sig / 2, atol=1e-6)


def test_ipo_by_hand():
    loss, m = PREFERENCE_LOSSES.resolve("ipo(tau=0.25)")(pairs(**LOGRATIO))
    # gaps of log-ratios (2, -1), target 1 / (2 * 0.25) = 2: ((2 - 2)^2 + (-1 - 2)^2) / 2
    assert float(loss) == pytest.approx(4.5, abs=1e-6)
    assert m["pref/accuracy"] == 0.5 and m["pref/margin"] == pytest.approx(0.5)


def test_simpo_by_hand_is_length_normalised_and_reference_free():
    inp = pairs([-2.0, -3.0], [-6.0, -1.0], n_c=(2, 3), n_r=(3, 1))
    loss, m = PREFERENCE_LOSSES.resolve("simpo(beta=2.0, gamma=0.5)")(inp)
    # r_c = 2 * (-2/2, -3/3) = (-2, -2); r_r = 2 * (-6/3, -1/1) = (-4, -2); l = -log σ((2, 0) - 0.5)
    assert float(loss) == pytest.approx((nls(1.5) + nls(-0.5)) / 2, abs=1e-6)
    assert float(loss) == pytest.approx(0.587745, abs=1e-5)
    assert m["pref/accuracy"] == 0.5  # the tie (-2 vs -2) counts as wrong
    assert m["pref/reward_chosen"] == pytest.approx(-2.0) and m["pref/reward_rejected"] == pytest.approx(-3.0)
    assert getattr(PREFERENCE_LOSSES.get("simpo"), "reference_free", False)


def test_reference_losses_need_reference_logprobs():
    for spec in ("dpo", "ipo"):
        with pytest.raises(ValueError, match="give ref_chosen and ref_rejected"):
            PREFERENCE_LOSSES.resolve(spec)(pairs([-1.0], [-2.0], n_c=(1,), n_r=(1,)))


@pytest.mark.parametrize(
    "spec, message",
    [
        ("dpo(beta=0)", "beta must be > 0"),
        ("dpo(label_smoothing=0.5)", r"label_smoothing must be in \[0, 0.5\)"),
        ("ipo(tau=-1)", "tau must be > 0"),
        ("simpo(gamma=-0.1)", "gamma must be >= 0"),
        ("simpo(delta=1)", "unknown key"),
        ("kto", "valid names: dpo, ipo, simpo"),
    ],
)
def test_bad_parameters_are_config_errors(spec, message):
    with pytest.raises(ConfigError, match=message):
        PREFERENCE_LOSSES.resolve(spec, key="pref.loss")
