"""opd (on-policy distillation: GKD's reverse KL, HyperEyes' failed-rollout variant) and edge's loss: hand-computed
reverse KL on tiny distributions, the sampled-token estimator's gradient, only_failed masking, the RL part."""

from __future__ import annotations

import math

import pytest
import torch

from ascent.algorithms import LOSSES, LossInput
from ascent.algorithms.opd import EdgeParams, OpdParams
from ascent.config.schema import AlgorithmConfig

STUDENT = [[[0.5, 0.5], [0.9, 0.1]], [[0.2, 0.8], [0.6, 0.4]]]  # (N=2, T=2, V=2) probabilities
TEACHER = [[[0.25, 0.75], [0.5, 0.5]], [[0.5, 0.5], [0.6, 0.4]]]
KL = [  # KL(student || teacher) at each (row, position), by hand
    [0.5 * math.log(0.5 / 0.25) + 0.5 * math.log(0.5 / 0.75), 0.9 * math.log(0.9 / 0.5) + 0.1 * math.log(0.1 / 0.5)],
    [0.2 * math.log(0.2 / 0.5) + 0.8 * math.log(0.8 / 0.5), 0.0],
]
TOKENS = [[1, 0], [1, 1]]  # the sampled token at each position


def opd_input(rewards=(0.0, 0.0), advantages=None):
    z = torch.log(torch.tensor(STUDENT)).requires_grad_(True)  # (N, T, V) logits whose softmax is STUDENT
    logits = torch.log_softmax(z, -1)
    ids = torch.tensor(TOKENS)
    logp = logits.gather(-1, ids[..., None]).squeeze(-1)  # (N, T)
    teacher = torch.log(torch.tensor(TEACHER))
    mask = torch.ones(2, 2)
    inp = LossInput(
        logprobs=logp,
        old_logprobs=logp.detach(),
        advantages=torch.zeros(2, 2) if advantages is None else torch.tensor(advantages),
        mask=mask,
        num_tokens=4.0,
        num_seqs=2.0,
        norm_length=2.0,
        rewards=torch.tensor(rewards),
        logits=logits,
        teacher_logprobs=teacher,
        teacher_token_logprobs=teacher.gather(-1, ids[..., None]).squeeze(-1),
    )
    return inp, z


def test_full_reverse_kl_matches_hand_computed_values():
    inp, z = opd_input()
    loss, m = LOSSES.get("opd")(inp, AlgorithmConfig(loss_agg="token-mean"), params=OpdParams(teacher="t"))
    expected = sum(sum(r) for r in KL) / 4
    assert loss.item() == pytest.approx(expected, rel=1e-6)
    assert m["loss/opd_kl"] == pytest.approx(expected, rel=1e-6)
    loss.backward()
    # d KL / d z_v = p_v (log p_v / q_v - KL) at each position; token-mean divides by the 4 tokens
    p, q = torch.tensor(STUDENT), torch.tensor(TEACHER)
    hand = p * (torch.log(p / q) - torch.tensor(KL)[..., None]) / 4
    assert torch.allclose(z.grad, hand, atol=1e-6)


def test_full_estimator_is_zero_with_zero_gradient_at_the_teacher():
    inp, z = opd_input()
    inp.teacher_logprobs = inp.logits.detach().clone()
    loss, _ = LOSSES.get("opd")(inp, AlgorithmConfig(), params=OpdParams(teacher="t"))
    loss.backward()
    assert abs(loss.item()) < 1e-7 and z.grad.abs().max() < 1e-7


def test_sampled_estimator_value_and_policy_gradient():
    inp, z = opd_input()
    loss, m = LOSSES.get("opd")(inp, AlgorithmConfig(), params=OpdParams(teacher="t", estimator="sampled"))
    k1 = torch.tensor(
        [[math.log(0.5 / 0.75), math.log(0.9 / 0.5)], [math.log(0.8 / 0.5), math.log(0.4 / 0.4)]]
    )  # log pi(y_t) - log pi_T(y_t) of the sampled tokens
    assert loss.item() == pytest.approx(float(k1.mean()), rel=1e-6)
    assert m["loss/opd_kl"] == pytest.approx(sum(sum(r) for r in KL) / 4, rel=1e-6)  # the exact KL is reported
    inp2, _ = opd_input()
    inp2.logprobs.retain_grad()
    LOSSES.get("opd")(inp2, AlgorithmConfig(), params=OpdParams(teacher="t", estimator="sampled"))[0].backward()
    assert torch.allclose(inp2.logprobs.grad, k1 / 4, atol=1e-6)  # sg(k1) * grad log pi, token-mean


def test_only_failed_masks_successful_rollouts():
    inp, z = opd_input(rewards=(1.0, 0.0))  # row 0 succeeded, row 1 failed
    loss, m = LOSSES.get("opd")(inp, AlgorithmConfig(), params=OpdParams(teacher="t", only_failed=True))
    assert loss.item() == pytest.approx(sum(KL[1]) / 4, rel=1e-6)  # normalised by the mini-batch's tokens
    assert m["loss/opd_rows"] == 0.5 and m["loss/opd_kl"] == pytest.approx(sum(KL[1]) / 2, rel=1e-6)
    loss.backward()
    assert z.grad[0].abs().max() == 0 and z.grad[1, 0].abs().max() > 0
    inp, _ = opd_input(rewards=(0.7, 0.2))  # threshold 0.5: only row 1 failed
    loss, _ = LOSSES.get("opd")(inp, AlgorithmConfig(), params=OpdParams(teacher="t", only_failed=True, threshold=0.5))
    assert loss.item() == pytest.approx(sum(KL[1]) / 4, rel=1e-6)


def test_rl_adds_the_ppo_clip_loss_and_coef_scales_the_distillation():
    adv = [[1.0, 1.0], [-0.5, -0.5]]
    cfg = AlgorithmConfig()
    inp, _ = opd_input(advantages=adv)
    loss, m = LOSSES.get("opd")(inp, cfg, params=OpdParams(teacher="t", rl=True, coef=0.3))
    ppo, _ = LOSSES.get("ppo_clip")(opd_input(advantages=adv)[0], cfg)
    assert loss.item() == pytest.approx(ppo.item() + 0.3 * sum(sum(r) for r in KL) / 4, rel=1e-6)
    assert "loss/clip_frac" in m and m["loss/opd_term"] == pytest.approx(0.3 * sum(sum(r) for r in KL) / 4, rel=1e-6)


def test_edge_loss_distils_only_the_admitted_rows():
    inp, _ = opd_input(advantages=[[1.0, 1.0], [-1.0, -1.0]])
    inp.distil_rows = torch.tensor([0.0, 1.0])
    inp.logprobs.retain_grad()
    loss, m = LOSSES.get("edge")(inp, AlgorithmConfig(), params=EdgeParams(rl=False))
    k1_row1 = [math.log(0.8 / 0.5), 0.0]
    assert loss.item() == pytest.approx(sum(k1_row1) / 4, rel=1e-6)
    assert m["loss/edge_rows"] == 0.5
    loss.backward()
    assert inp.logprobs.grad[0].abs().max() == 0
    with pytest.raises(ValueError, match="edge.*distil_rows"):
        bare, _ = opd_input()
        LOSSES.get("edge")(bare, AlgorithmConfig(), params=EdgeParams())


def test_params_are_checked():
    with pytest.raises(ValueError, match="needs a teacher"):
        OpdParams()
    with pytest.raises(ValueError, match="coef"):
        OpdParams(teacher="t", coef=-1)
    with pytest.raises(ValueError, match="estimator"):
        OpdParams(teacher="t", estimator="k3")
    assert LOSSES.get("opd").requires == {"full_logits", "teacher", "rewards"}
