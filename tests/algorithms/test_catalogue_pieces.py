"""Numeric references for lite_ppo, reinforce_pp, gspo, cispo and truncated importance sampling."""

from __future__ import annotations

import math

import torch

from ascent.algorithms import ADVANTAGES, LOSSES, AdvantageInput, LossInput
from ascent.config.schema import AlgorithmConfig

CFG = AlgorithmConfig()


def adv_input(rewards, groups):
    r = torch.tensor(rewards, dtype=torch.float32)
    return AdvantageInput(
        rewards=r,
        valid=torch.ones(len(r), dtype=torch.bool),
        group_index=torch.tensor(groups),
        mask=torch.ones(len(r), 1),
    )


def test_lite_ppo_group_mean_batch_std():
    # groups [1,0,0,1] (mean .5) and [1,1,1,0] (mean .75); batch of 8 rewards: mean .625,
    # unbiased std = sqrt((5 * .375^2 + 3 * .625^2) / 7) = sqrt(1.875 / 7) = 0.517549
    adv = ADVANTAGES.get("lite_ppo")(adv_input([1, 0, 0, 1, 1, 1, 1, 0], [0, 0, 0, 0, 1, 1, 1, 1]), CFG)[:, 0]
    std = math.sqrt(1.875 / 7)
    expected = torch.tensor([0.5, -0.5, -0.5, 0.5, 0.25, 0.25, 0.25, -0.75]) / (std + 1e-6)
    assert torch.allclose(adv, expected, atol=1e-5)


def test_reinforce_pp_global_normalisation():
    adv = ADVANTAGES.get("reinforce_pp")(adv_input([1, 0, 0, 1, 1, 1, 1, 0], [0, 0, 0, 0, 1, 1, 1, 1]), CFG)[:, 0]
    std = math.sqrt(1.875 / 7)
    expected = (torch.tensor([1, 0, 0, 1, 1, 1, 1, 0.0]) - 0.625) / (std + 1e-6)
    assert torch.allclose(adv, expected, atol=1e-5)
    assert abs(float(adv.mean())) < 1e-6  # zero mean over the batch, unlike group baselines
    flat = ADVANTAGES.get("reinforce_pp")(adv_input([0.7] * 5, [0, 0, 1, 1, 1]), CFG)
    assert torch.equal(flat, torch.zeros_like(flat))


def loss_input(logp, old, adv, mask=None, sampled=None):
    logp = torch.tensor(logp, requires_grad=True)
    mask = torch.ones_like(logp) if mask is None else torch.tensor(mask)
    inp = LossInput(
        logprobs=logp,
        old_logprobs=torch.tensor(old),
        advantages=torch.tensor(adv),
        mask=mask,
        num_tokens=float(mask.sum()),
        num_seqs=float(mask.shape[0]),
        norm_length=float(mask.shape[1]),
        sampled_logprobs=None if sampled is None else torch.tensor(sampled),
    )
    return inp, logp


def test_gspo_sequence_ratio_value_and_gradient():
    cfg = AlgorithmConfig(clip_low=0.2, clip_high=0.2, loss_agg="seq-mean-token-mean")
    # one sequence of 2 tokens: log ratios 0.1, -0.3 -> s = exp(-0.1) = 0.904837 (inside the clip range)
    inp, logp = loss_input([[-1.0, -2.0]], [[-1.1, -1.7]], [[2.0, 2.0]])
    loss, m = LOSSES.get("gspo")(inp, cfg)
    s = math.exp(-0.1)
    assert abs(float(loss.detach()) - (-2.0 * s)) < 1e-6 and abs(m["loss/seq_ratio_mean"] - s) < 1e-6
    loss.backward()
    # d(-A s)/d logp_t = -A s / |y| for every token of the sequence
    assert torch.allclose(logp.grad, torch.full((1, 2), -2.0 * s / 2), atol=1e-6)


def test_gspo_clips_whole_sequences():
    cfg = AlgorithmConfig(clip_low=0.2, clip_high=0.2, loss_agg="seq-mean-token-mean")
    # s = exp(0.5) = 1.6487 > 1.2 with A > 0: every token of the sequence is clipped, gradient zero,
    # although one token alone (log ratio 0) would not be clipped by PPO
    inp, logp = loss_input([[-1.0, -1.0]], [[-1.0, -2.0]], [[1.0, 1.0]])
    loss, m = LOSSES.get("gspo")(inp, cfg)
    assert abs(float(loss.detach()) + 1.2) < 1e-6 and m["loss/clip_frac"] == 1.0
    loss.backward()
    assert torch.equal(logp.grad, torch.zeros(1, 2))


def test_cispo_detached_clipped_weight_times_logprob():
    cfg = AlgorithmConfig(clip_low=0.2, clip_high=0.2, loss_agg="token-mean")
    # ratios exp(0.5)=1.6487 -> clipped to 1.2; exp(-0.5)=0.6065 -> 0.8; exp(0)=1
    logp0, old = [[-1.0, -2.0, -1.5]], [[-1.5, -1.5, -1.5]]
    inp, logp = loss_input(logp0, old, [[1.0, -1.0, 1.0]])
    loss, m = LOSSES.get("cispo")(inp, cfg)
    w = torch.tensor([1.2, 0.8, 1.0])
    a = torch.tensor([1.0, -1.0, 1.0])
    assert abs(float(loss.detach()) - float((-w * a * torch.tensor(logp0[0])).mean())) < 1e-6
    loss.backward()
    # the clipped tokens still get gradient: -w * A / 3 (PPO would give 0 for the first token)
    assert torch.allclose(logp.grad[0], -w * a / 3, atol=1e-6)
    assert abs(m["loss/clip_frac"] - 2 / 3) < 1e-6


def test_truncated_importance_sampling_weights():
    cfg = AlgorithmConfig(tis_cap=2.0, loss_agg="token-mean")
    # learner vs sampler log-prob gaps: +0.1 -> w = 1.105; +1.0 -> e = 2.718 capped at 2; -0.5 -> 0.6065
    logp = [[-1.0, -1.0, -1.0]]
    inp, _ = loss_input(logp, logp, [[1.0, 1.0, 1.0]], sampled=[[-1.1, -2.0, -0.5]])
    loss, _ = LOSSES.get("ppo_clip")(inp, cfg)
    w = torch.tensor([math.exp(0.1), 2.0, math.exp(-0.5)])
    assert abs(float(loss.detach()) - float(-w.mean())) < 1e-5
    off, _ = LOSSES.get("ppo_clip")(
        loss_input(logp, logp, [[1.0, 1.0, 1.0]], sampled=[[-1.1, -2.0, -0.5]])[0],
        AlgorithmConfig(loss_agg="token-mean"),
    )
    assert abs(float(off.detach()) + 1.0) < 1e-6  # tis off: ratio 1 everywhere


def test_reinforce_pp_token_level_kl_penalised_return_by_hand():
    from ascent.algorithms.advantages import ReinforcePPParams

    mask = torch.tensor([[1.0, 1.0, 1.0], [1.0, 0.0, 0.0]])
    logp = torch.tensor([[-1.0, -1.0, -1.0], [-1.0, -9.0, -9.0]])
    ref = torch.tensor([[-1.1, -1.2, -1.3], [-1.4, 0.0, 0.0]])  # k1 KL: [0.1, 0.2, 0.3], [0.4]
    inp = AdvantageInput(
        rewards=torch.tensor([1.0, 0.0]),
        valid=torch.ones(2, dtype=torch.bool),
        group_index=torch.tensor([0, 1]),
        mask=mask,
        extras={"logprobs": logp, "ref_logprobs": ref},
    )
    adv = ADVANTAGES.get("reinforce_pp")(inp, CFG, ReinforcePPParams(kl_coef=0.5))
    # returns r - 0.5 * (KL still to come): [1 - .3, 1 - .25, 1 - .15], [0 - .2]; token mean .525, std sqrt(.7125/3)
    ret = torch.tensor([0.7, 0.75, 0.85, -0.2])
    want = (ret - 0.525) / (math.sqrt(0.7125 / 3) + 1e-6)
    assert torch.allclose(adv[mask > 0], want, atol=1e-5) and float(adv[1, 1:].abs().sum()) == 0.0
    # beta = 0: token-weighted statistics (the long correct response weighs 3 tokens): mean .75, not .5
    plain = ADVANTAGES.get("reinforce_pp")(inp, CFG)
    want0 = (torch.tensor([1.0, 1.0, 1.0, 0.0]) - 0.75) / (0.5 + 1e-6)  # unbiased std of [1, 1, 1, 0] = .5
    assert torch.allclose(plain[mask > 0], want0, atol=1e-5)


def test_reinforce_pp_state_gives_the_reference_logprobs(tiny_policy):
    import copy

    from ascent.algorithms.advantages import ReinforcePPParams, ReinforcePPState
    from ascent.policy.model import token_logprobs

    ref = copy.deepcopy(tiny_policy.model)

    class Harness:
        micro_batch_size = 1

        def reference(self):
            return ref

        def token_logprobs(self, model, ids, mask):
            return token_logprobs(model, ids, mask)

    ids = torch.tensor([[1, 5, 6, 7], [1, 8, 9, 0]])
    att = torch.tensor([[1, 1, 1, 1], [1, 1, 1, 0]])
    batch = type("B", (), {"input_ids": ids, "attention_mask": att})()
    out = ReinforcePPState(ReinforcePPParams(kl_coef=0.1), Harness()).advantage_extras(batch)
    assert torch.allclose(out["ref_logprobs"], token_logprobs(ref, ids, att), atol=1e-6)
    assert ReinforcePPState(ReinforcePPParams(), Harness()).advantage_extras(batch) == {}
