"""CM-GRPO on the toy consistency model: the exact mixture denoiser and the consistency parametrisation by hand,
distillation lowering its loss, each sampling step's Gaussian log-likelihood against torch.distributions, the
clipped surrogate and the closed-form KL, and GRPO raising the reward of samples over the untuned model."""

from __future__ import annotations

import copy

import pytest
import torch

from ascent.generative import GENERATIVE
from ascent.generative.cm_grpo import (
    CMGRPOParams,
    cm_grpo_loss,
    group_advantages,
    rollout,
    target_reward,
    transition_logprob,
)
from ascent.generative.consistency import SIGMA_MIN, ConsistencyModel, DistillConfig, ToyData, distill, sample

pytestmark = pytest.mark.usefixtures("one_thread")


def test_exact_denoiser_by_hand():
    one = ToyData(modes=1, radius=2.0, spread=0.5)  # one mode at (2, 0)
    got = one.denoise(torch.tensor([[0.0, 0.0]]), torch.tensor(0.5))
    assert torch.allclose(got, torch.tensor([[1.0, 0.0]]))  # (2, 0) + 0.25 / 0.5 * ((0, 0) - (2, 0))
    ring = ToyData()
    x = torch.randn(5, 2)
    assert torch.allclose(ring.denoise(x, torch.tensor(0.0)), x, atol=1e-6)  # no noise: the point itself
    assert ring.denoise(x, torch.tensor(1e4)).abs().max() < 1e-3  # all noise: the mean of the ring, the origin


def test_consistency_parametrisation_is_the_identity_at_sigma_min():
    torch.manual_seed(0)
    model, x = ConsistencyModel(hidden=16), torch.randn(4, 2)
    assert torch.allclose(model(x, torch.tensor(SIGMA_MIN)), x)
    assert not torch.allclose(model(x, torch.tensor(1.0)), x)


def test_distillation_brings_the_samples_onto_the_ring():
    torch.manual_seed(0)
    data, model = ToyData(), ConsistencyModel(hidden=32)

    def distance() -> float:  # mean distance of 512 samples to their nearest mode
        x = sample(model, 512, 4.0, (1.0, 0.3), torch.Generator().manual_seed(1))
        return float(torch.cdist(x, data.means()).min(1).values.mean())

    untrained = distance()
    losses = distill(model, data, DistillConfig(steps=150, batch_size=64), seed=0)
    assert distance() < 0.7 * untrained and len(losses) == 150  # measured: 1.34 -> 0.81


def test_transition_logprob_matches_torch_distributions():
    torch.manual_seed(0)
    model, p = ConsistencyModel(hidden=16), CMGRPOParams(taus=(1.0, 0.3))
    r = rollout(model, 6, p, torch.Generator().manual_seed(0))
    logp, means = transition_logprob(model, r)
    for k in range(2):
        cov = r.stds[k] ** 2 * torch.eye(2)
        want = torch.distributions.MultivariateNormal(means[k], covariance_matrix=cov).log_prob(r.states[k + 1])
        assert torch.allclose(logp[k], want, atol=1e-5)
    assert torch.allclose(r.stds, torch.tensor([1.0, 0.3]), atol=1e-5)


def test_group_advantages_and_the_clipped_surrogate_by_hand():
    assert torch.allclose(
        group_advantages(torch.tensor([0.0, 2.0, 1.0, 1.0]), 2), torch.tensor([-1.0, 1.0, 0, 0]), atol=1e-5
    )
    torch.manual_seed(0)
    model, p = ConsistencyModel(hidden=16), CMGRPOParams(taus=(0.5,), clip=0.2)
    r = rollout(model, 4, p, torch.Generator().manual_seed(0))
    logp, _ = transition_logprob(model, r)
    adv = torch.tensor([1.0, -1.0, 2.0, 0.0])
    loss, _ = cm_grpo_loss(model, r, logp.detach(), adv, p)
    assert float(loss.detach()) == pytest.approx(
        -float(adv.mean())
    )  # ratio 1 everywhere: the surrogate is the advantage
    far = logp.detach() - 1.0  # ratio e > 1 + ε: positive advantages clip (no gradient), negative ones do not
    loss, metrics = cm_grpo_loss(model, r, far, adv, p)
    assert float(loss.detach()) == pytest.approx(-float((torch.tensor([1.2, -torch.e, 2.4, 0.0])).mean()), rel=1e-4)
    assert metrics["cm_grpo/clip_frac"] == 1.0


def test_kl_to_the_untuned_model_is_zero_then_the_closed_form():
    torch.manual_seed(0)
    model, p = ConsistencyModel(hidden=16), CMGRPOParams(taus=(0.5,), kl_coef=1.0)
    reference = copy.deepcopy(model)
    r = rollout(model, 8, p, torch.Generator().manual_seed(0))
    logp, _ = transition_logprob(model, r)
    zero_adv = torch.zeros(8)
    assert cm_grpo_loss(model, r, logp.detach(), zero_adv, p, reference)[1]["cm_grpo/kl"] == pytest.approx(0.0)
    with torch.no_grad():
        model.net[-1].bias += torch.tensor([0.1, 0.0])  # shifts every mean by c_out(σ_max) * 0.1 along x
    shift = 1.0 * (4.0 - SIGMA_MIN) / (1 + 16) ** 0.5 * 0.1
    _, metrics = cm_grpo_loss(model, r, logp.detach(), zero_adv, p, reference)
    assert metrics["cm_grpo/kl"] == pytest.approx(shift**2 / (2 * 0.5**2), rel=1e-3)


def test_cm_grpo_raises_the_reward_of_samples_over_the_untuned_model():
    torch.manual_seed(0)
    data, model = ToyData(), ConsistencyModel(hidden=32)
    distill(model, data, DistillConfig(steps=150, batch_size=64), seed=0)
    reward = target_reward(tuple(data.means()[1].tolist()), 0.5)
    before = reward(sample(model, 512, 4.0, (1.0, 0.3), torch.Generator().manual_seed(1))).mean()
    fn = GENERATIVE.get("cm_grpo")
    history = fn(model, reward, CMGRPOParams(steps=15, groups=4, group_size=8, lr=3e-3), seed=0)
    after = reward(sample(model, 512, 4.0, (1.0, 0.3), torch.Generator().manual_seed(1))).mean()
    assert float(after) > float(before) + 0.15 and len(history) == 15  # measured: 0.06 -> 0.30


def test_bad_params_fail_with_a_clear_message():
    with pytest.raises(ValueError, match="taus must decrease"):
        CMGRPOParams(taus=(0.3, 1.0))
    with pytest.raises(ValueError, match="group_size >= 2"):
        CMGRPOParams(group_size=1)
    with pytest.raises(ValueError, match="taus must be non-empty"):
        CMGRPOParams(taus=(5.0,))
