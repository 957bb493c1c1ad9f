"""Numeric references and the property each paper relies on, for rebel (REBEL), agro (AGRO), a_star_po
(A*-PO), distil (DistIL) and the gae advantage estimator; the papers are in docs/references.md."""

from __future__ import annotations

import math
import types

import numpy as np
import pytest
import torch

from ascent.algorithms import ADVANTAGES, LOSSES, AdvantageInput, LossInput
from ascent.algorithms.a_star import AStarParams, soft_value
from ascent.algorithms.distil import DistilParams
from ascent.algorithms.gae import clipped_value_loss, compute_gae
from ascent.algorithms.losses import AgroParams, RebelParams, group_pairs
from ascent.config.schema import AlgorithmConfig


def _t(x):
    return None if x is None else torch.tensor(x, dtype=torch.float32)


def seq_input(logp, old=None, ref=None, rewards=None, groups=None, v_star=None, mask=None, sampled=None):
    """A LossInput whose (N, T) log-probs are a leaf with grad; everything else as given."""
    logp = torch.tensor(logp, dtype=torch.float32, requires_grad=True)
    mask = torch.ones_like(logp) if mask is None else _t(mask)
    inp = LossInput(
        logprobs=logp,
        old_logprobs=logp.detach().clone() if old is None else _t(old),
        advantages=torch.zeros_like(logp),
        mask=mask,
        num_tokens=float(mask.sum()),
        num_seqs=float(mask.shape[0]),
        norm_length=float(mask.shape[1]),
        ref_logprobs=_t(ref),
        sampled_logprobs=_t(sampled),
        rewards=_t(rewards),
        group_index=None if groups is None else torch.tensor(groups),
        v_star=_t(v_star),
    )
    return inp, logp


def toy_distribution(k=5, beta=0.5, seed=0):
    """A discrete 'generation' space of k outcomes: rewards, pi_ref, and the KL-regularised optimum
    pi* = pi_ref exp(r / beta) / Z with its value V* = beta log Z."""
    g = torch.Generator().manual_seed(seed)
    r = torch.rand(k, generator=g) * 2.0 - 0.5
    log_ref = torch.log_softmax(torch.randn(k, generator=g), -1)
    log_z = torch.logsumexp(log_ref + r / beta, -1)
    log_star = log_ref + r / beta - log_z
    return r, log_ref, log_star, beta * log_z


# ---------------------------------------------------------------------------------------------------------
# REBEL
# ---------------------------------------------------------------------------------------------------------
LOGP = [[-1.0, -2.0], [-0.5, -1.5], [-2.0, -0.1], [-1.2, -0.7], [-0.3, -0.9]]
OLD = [[-1.1, -1.8], [-0.5, -1.0], [-1.5, -0.3], [-1.0, -1.0], [-0.4, -0.6]]
MASK = [[1.0, 1.0], [1.0, 0.0], [1.0, 1.0], [1.0, 1.0], [0.0, 1.0]]
REWARDS = [1.0, 0.0, 0.5, 1.0, 0.0]
GROUPS = [0, 0, 0, 1, 1]


def rebel_slow(eta, pairs_of):
    """Per sequence: mean of its pairs' squared errors; then the sum over sequences / N."""
    s = [sum((a - b) * m for a, b, m in zip(lp, o, mk)) for lp, o, mk in zip(LOGP, OLD, MASK)]
    total = 0.0
    for i in range(len(s)):
        errs = [((s[i] - s[j]) / eta - (REWARDS[i] - REWARDS[j])) ** 2 for j in pairs_of(i)]
        total += sum(errs) / len(errs) if errs else 0.0
    return total / len(s)


def test_group_pairs():
    g, ok = torch.tensor([3, 3, 3, 3, 7, 7, 7]), torch.tensor([True, False, True, True, True, True, True])
    i, j = group_pairs(g, ok, "all")
    assert sorted(zip(i.tolist(), j.tolist())) == [(0, 2), (0, 3), (2, 3), (4, 5), (4, 6), (5, 6)]
    i, j = group_pairs(g, ok, "adjacent")
    assert list(zip(i.tolist(), j.tolist())) == [(0, 2), (4, 5)]  # an invalid row is skipped, the odd one out unpaired


@pytest.mark.parametrize("pairing", ["all", "adjacent"])
def test_rebel_matches_slow_loop(pairing):
    eta = 0.5
    inp, _ = seq_input(LOGP, OLD, rewards=REWARDS, groups=GROUPS, mask=MASK)
    loss, _ = LOSSES.get("rebel")(inp, AlgorithmConfig(), params=RebelParams(eta=eta, pairs=pairing))
    group = lambda i: [j for j in range(5) if GROUPS[j] == GROUPS[i] and j != i]  # noqa: E731
    partner = {0: [1], 1: [0], 2: [], 3: [4], 4: [3]}
    want = rebel_slow(eta, group if pairing == "all" else partner.__getitem__)
    assert loss.item() == pytest.approx(want, rel=1e-6)


def test_rebel_with_tis_weights_each_pair():
    eta, cap = 1.0, 1.5
    sampled = [[-1.0, -1.8], [-0.5, -1.0], [-1.5, -0.3], [-1.0, -1.0], [-0.4, -0.6]]
    sampled[0][0] = -1.6  # pi_old / pi_sampler = exp(0.5) on sequence 0's first token
    inp, _ = seq_input(LOGP, OLD, rewards=REWARDS, groups=GROUPS, mask=MASK, sampled=sampled)
    weighted, _ = LOSSES.get("rebel")(inp, AlgorithmConfig(tis_cap=cap), params=RebelParams(eta=eta, pairs="adjacent"))
    plain, _ = LOSSES.get("rebel")(
        seq_input(LOGP, OLD, rewards=REWARDS, groups=GROUPS, mask=MASK)[0],
        AlgorithmConfig(),
        params=RebelParams(eta=eta, pairs="adjacent"),
    )
    s = [sum((a - b) * m for a, b, m in zip(lp, o, mk)) for lp, o, mk in zip(LOGP, OLD, MASK)]
    err01 = ((s[0] - s[1]) / eta - (REWARDS[0] - REWARDS[1])) ** 2
    # only pair (0, 1) is reweighted, by min(exp(0.5), 1.5) = 1.5; it enters sequences 0 and 1 (2/5 of the mean)
    assert weighted.item() - plain.item() == pytest.approx((cap - 1.0) * err01 * 2 / 5, rel=1e-5)


def test_rebel_gradient_at_ratio_one_is_a_pairwise_policy_gradient():
    eta = 0.25
    rewards = [1.0, 0.0, 0.0, 1.0, 0.5, 0.0, 1.0, 1.0]
    groups = [0, 0, 0, 0, 1, 1, 1, 1]
    mask = [[1.0, 1.0, 1.0], [1.0, 1.0, 0.0], [1.0, 0.0, 0.0], [1.0, 1.0, 1.0]] * 2
    logp0 = (-torch.rand(8, 3, generator=torch.Generator().manual_seed(0))).tolist()
    n = 8.0
    # every pair: the gradient is 4/eta times plain PG with the RLOO advantage (summed over tokens, / N)
    inp, logp = seq_input(logp0, logp0, rewards=rewards, groups=groups, mask=mask)
    LOSSES.get("rebel")(inp, AlgorithmConfig(), params=RebelParams(eta=eta, pairs="all"))[0].backward()
    r = torch.tensor(rewards).view(2, 4)
    rloo = (4 / 3 * (r - r.mean(-1, keepdim=True))).flatten()
    pg_inp, pg_logp = seq_input(logp0, logp0, mask=mask)
    pg_inp.advantages = rloo[:, None] * pg_inp.mask
    LOSSES.get("pg")(pg_inp, AlgorithmConfig(loss_agg="seq-mean-token-sum"))[0].backward()
    assert torch.allclose(logp.grad, 4 / eta * pg_logp.grad, atol=1e-6)
    assert torch.allclose(logp.grad, -4 / (eta * n) * rloo[:, None] * pg_inp.mask, atol=1e-6)
    # adjacent pairs: -(4 / (eta N)) (r(y) - r(y')) on y's tokens, the paper's two-sample policy gradient
    inp, logp = seq_input(logp0, logp0, rewards=rewards, groups=groups, mask=mask)
    LOSSES.get("rebel")(inp, AlgorithmConfig(), params=RebelParams(eta=eta, pairs="adjacent"))[0].backward()
    partner = torch.tensor([1, 0, 3, 2, 5, 4, 7, 6])
    diff = torch.tensor(rewards) - torch.tensor(rewards)[partner]
    assert torch.allclose(logp.grad, -4 / (eta * n) * diff[:, None] * inp.mask, atol=1e-6)


# ---------------------------------------------------------------------------------------------------------
# AGRO
# ---------------------------------------------------------------------------------------------------------
def test_agro_matches_hand_computation_and_its_gradient_decomposition():
    beta = 0.5
    ref = [[-1.0, -1.0], [-0.5, -1.0], [-1.0, -0.5], [-1.0, -1.0], [-0.2, -0.9]]
    inp, logp = seq_input(LOGP, ref=ref, rewards=REWARDS, groups=GROUPS, mask=MASK)
    loss, m = LOSSES.get("agro")(inp, AlgorithmConfig(), params=AgroParams(beta=beta))
    s = [sum((a - b) * k for a, b, k in zip(lp, rf, mk)) for lp, rf, mk in zip(LOGP, ref, MASK)]
    c = [r - beta * x for r, x in zip(REWARDS, s)]
    mean = {g: np.mean([c[i] for i in range(5) if GROUPS[i] == g]) for g in (0, 1)}
    dev = [c[i] - mean[GROUPS[i]] for i in range(5)]
    assert loss.item() == pytest.approx(sum(d * d / (2 * beta) for d in dev) / 5, rel=1e-6)
    loss.backward()
    # -(c_i - b) d log pi(y_i): a policy gradient on r - b plus (beta/2) d (log pi/pi_ref)^2
    assert torch.allclose(logp.grad, -torch.tensor(dev, dtype=torch.float32)[:, None] * inp.mask / 5, atol=1e-6)


def test_agro_consistency_is_zero_at_the_regularised_optimum():
    r, log_ref, log_star, _ = toy_distribution(beta=0.5)
    ys = [0, 1, 2, 3, 4, 3, 3, 0]  # any sample of generations, from any distribution (here: not pi*)
    cfg, params = AlgorithmConfig(), AgroParams(beta=0.5, score_coef=1.0)
    inp, logp = seq_input(
        [[float(log_star[y])] for y in ys],
        ref=[[float(log_ref[y])] for y in ys],
        rewards=[float(r[y]) for y in ys],
        groups=[0] * len(ys),
    )
    loss, m = LOSSES.get("agro")(inp, cfg, params=params)
    loss.backward()
    assert abs(loss.item()) < 1e-10 and m["loss/agro_consistency"] < 1e-10
    assert logp.grad.abs().max() < 1e-6
    at_ref, _ = LOSSES.get("agro")(
        seq_input(
            [[float(log_ref[y])] for y in ys],
            ref=[[float(log_ref[y])] for y in ys],
            rewards=[float(r[y]) for y in ys],
            groups=[0] * len(ys),
        )[0],
        cfg,
        params=params,
    )
    assert at_ref.item() > 1e-2  # pi_ref itself is not consistent


def test_agro_converges_to_the_optimum_from_off_policy_data():
    """A tabular policy trained on a FIXED sample (every generation once: off-policy, uniform) reaches pi*."""
    beta = 0.5
    r, log_ref, log_star, _ = toy_distribution(beta=beta)
    theta = torch.zeros(5, requires_grad=True)
    opt = torch.optim.SGD([theta], lr=1.0)
    cfg, params = AlgorithmConfig(), AgroParams(beta=beta)
    for _ in range(400):
        logp = torch.log_softmax(theta, -1)[:, None]  # (5, 1): generation k has log pi(k)
        inp = LossInput(
            logprobs=logp,
            old_logprobs=logp.detach(),
            advantages=torch.zeros(5, 1),
            mask=torch.ones(5, 1),
            num_tokens=5.0,
            num_seqs=5.0,
            norm_length=1.0,
            ref_logprobs=log_ref[:, None],
            rewards=r,
            group_index=torch.zeros(5, dtype=torch.long),
        )
        opt.zero_grad()
        LOSSES.get("agro")(inp, cfg, params=params)[0].backward()
        opt.step()
    log_pi = torch.log_softmax(theta.detach(), -1)
    kl = float((log_star.exp() * (log_star - log_pi)).sum())
    assert kl < 1e-6


# ---------------------------------------------------------------------------------------------------------
# A*-PO
# ---------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("beta", [0.2, 1.0])
def test_a_star_v_star_monte_carlo_matches_closed_form(beta):
    r, log_ref, _, v_star = toy_distribution(beta=beta)
    samples = torch.multinomial(log_ref.exp(), 200_000, replacement=True, generator=torch.Generator().manual_seed(1))
    estimate = soft_value(r[samples][None], torch.ones(1, len(samples), dtype=torch.bool), beta)
    assert float(estimate) == pytest.approx(float(v_star), abs=5e-3)
    # the limits: small beta -> the best sampled reward, large beta -> the mean reward
    few = torch.tensor([[0.0, 1.0, 0.5]])
    ok = torch.ones(1, 3, dtype=torch.bool)
    assert float(soft_value(few, ok, 1e-4)) == pytest.approx(1.0, abs=1e-3)
    assert float(soft_value(few, ok, 1e4)) == pytest.approx(0.5, abs=1e-3)
    assert math.isnan(float(soft_value(few, torch.zeros(1, 3, dtype=torch.bool), 1.0)))  # every reward failed


def test_a_star_po_matches_hand_computation():
    beta2 = 0.1
    ref = [[-1.0, -1.0], [-0.5, -1.0], [-1.0, -0.5], [-1.0, -1.0], [-0.2, -0.9]]
    v = [0.5, 0.2, float("nan"), 0.9, 0.0]  # row 2's V* unknown: left out (but still counted in N)
    inp, logp = seq_input(LOGP, ref=ref, rewards=REWARDS, v_star=v, mask=MASK)
    loss, _ = LOSSES.get("a_star_po")(inp, AlgorithmConfig(), params=AStarParams(beta=0.5, beta2=beta2))
    s = [sum((a - b) * k for a, b, k in zip(lp, rf, mk)) for lp, rf, mk in zip(LOGP, ref, MASK)]
    want = sum((beta2 * s[i] - (REWARDS[i] - v[i])) ** 2 for i in (0, 1, 3, 4)) / 5
    assert loss.item() == pytest.approx(want, rel=1e-6)
    loss.backward()
    assert torch.equal(logp.grad[2], torch.zeros(2)) and torch.isfinite(logp.grad).all()


def test_a_star_po_is_zero_at_the_optimum():
    beta = 0.5
    r, log_ref, log_star, v_star = toy_distribution(beta=beta)
    ys = [0, 1, 2, 3, 4]
    inp, logp = seq_input(
        [[float(log_star[y])] for y in ys],
        ref=[[float(log_ref[y])] for y in ys],
        rewards=[float(r[y]) for y in ys],
        v_star=[float(v_star)] * 5,
    )
    loss, _ = LOSSES.get("a_star_po")(inp, AlgorithmConfig(), params=AStarParams(beta=beta))
    loss.backward()
    assert abs(loss.item()) < 1e-10 and logp.grad.abs().max() < 1e-5
    off, _ = LOSSES.get("a_star_po")(
        seq_input(
            [[float(log_ref[y])] for y in ys],
            ref=[[float(log_ref[y])] for y in ys],
            rewards=[float(r[y]) for y in ys],
            v_star=[float(v_star)] * 5,
        )[0],
        AlgorithmConfig(),
        params=AStarParams(beta=beta),
    )
    assert off.item() > 1e-2


# ---------------------------------------------------------------------------------------------------------
# DistIL
# ---------------------------------------------------------------------------------------------------------
def distil_input(student_logits, teacher_logits, mask):
    z = torch.tensor(student_logits, requires_grad=True)  # (N, T, V)
    logits = torch.log_softmax(z, -1)
    ids = torch.zeros(z.shape[:2], dtype=torch.long)
    logp = logits.gather(-1, ids[..., None]).squeeze(-1)
    m = torch.tensor(mask)
    inp = LossInput(
        logprobs=logp,
        old_logprobs=logp.detach(),
        advantages=torch.zeros_like(m),
        mask=m,
        num_tokens=float(m.sum()),
        num_seqs=float(m.shape[0]),
        norm_length=float(m.shape[1]),
        logits=logits,
        teacher_logprobs=torch.log_softmax(torch.tensor(teacher_logits), -1),
    )
    return inp, z


def test_distil_is_the_forward_cross_entropy():
    student = [[[0.0, 0.0, 0.0], [1.0, 0.0, -1.0], [0.5, 2.0, 0.0]]]
    teacher = [[[3.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 2.0]]]
    mask = [[0.0, 1.0, 1.0]]  # position 0 is the prompt
    inp, _ = distil_input(student, teacher, mask)
    loss, m = LOSSES.get("distil")(inp, AlgorithmConfig(loss_agg="token-mean"))
    ce = []
    for t in (1, 2):
        p = np.exp(teacher[0][t]) / np.exp(teacher[0][t]).sum()
        q = np.exp(student[0][t]) / np.exp(student[0][t]).sum()
        ce.append(-(p * np.log(q)).sum())
    assert loss.item() == pytest.approx(np.mean(ce), rel=1e-6)
    kl = [
        c + (p * np.log(p)).sum()
        for c, p in zip(ce, [np.exp(teacher[0][t]) / np.exp(teacher[0][t]).sum() for t in (1, 2)])
    ]
    assert m["loss/distil_kl"] == pytest.approx(np.mean(kl), rel=1e-5)


def test_distil_is_minimised_when_student_equals_teacher():
    teacher = torch.randn(2, 4, 6, generator=torch.Generator().manual_seed(0))
    mask = [[0.0, 1.0, 1.0, 1.0], [0.0, 0.0, 1.0, 1.0]]
    inp, z = distil_input(teacher.tolist(), teacher.tolist(), mask)
    at_teacher, m = LOSSES.get("distil")(inp, AlgorithmConfig())
    at_teacher.backward()
    assert z.grad.abs().max() < 1e-6 and abs(m["loss/distil_kl"]) < 1e-6
    for seed in range(3):
        other = teacher + 0.3 * torch.randn(2, 4, 6, generator=torch.Generator().manual_seed(seed + 1))
        worse, _ = LOSSES.get("distil")(distil_input(other.tolist(), teacher.tolist(), mask)[0], AlgorithmConfig())
        assert worse.item() > at_teacher.item()


# ---------------------------------------------------------------------------------------------------------
# GAE
# ---------------------------------------------------------------------------------------------------------
def gae_numpy(values, rewards, mask, gamma, lam):
    """The textbook loop over each row's completion tokens (cf. SB3's RolloutBuffer.compute_returns_and_advantage)."""
    adv = np.zeros_like(values)
    for i in range(values.shape[0]):
        pos = np.nonzero(mask[i])[0]
        last = 0.0
        for k in reversed(range(len(pos))):
            t = pos[k]
            terminal = k == len(pos) - 1
            next_value = 0.0 if terminal else values[i, pos[k + 1]]
            reward = rewards[i] if terminal else 0.0
            delta = reward + gamma * next_value - values[i, t]
            last = delta + gamma * lam * (0.0 if terminal else last)
            adv[i, t] = last
    return adv


def gae_case():
    g = torch.Generator().manual_seed(0)
    mask = torch.zeros(3, 8)
    mask[0, 2:7] = 1.0  # prompt of 2, completion of 5
    mask[1, 4:6] = 1.0  # prompt of 4, completion of 2
    mask[2, 1:8] = 1.0  # prompt of 1, completion to the end
    values = torch.randn(3, 8, generator=g)
    return torch.tensor([1.0, 0.0, 0.5]), values, mask


@pytest.mark.parametrize("gamma,lam", [(1.0, 0.95), (0.99, 0.9), (0.9, 0.0)])
def test_gae_matches_numpy_loop(gamma, lam):
    rewards, values, mask = gae_case()
    inp = AdvantageInput(
        rewards=rewards,
        valid=torch.ones(3, dtype=torch.bool),
        group_index=torch.arange(3),
        mask=mask,
        extras={"values": values},
    )
    adv = ADVANTAGES.resolve(f"gae(gamma={gamma}, lam={lam}, whiten=false)")(inp, AlgorithmConfig())
    want = gae_numpy(values.numpy(), rewards.numpy(), mask.numpy(), gamma, lam)
    assert np.allclose(adv.numpy(), want, atol=1e-6)
    _, returns = compute_gae(values, torch.zeros_like(values), mask, gamma, lam)
    assert torch.equal(returns * (1 - mask), torch.zeros_like(returns))


def test_gae_lambda_one_is_monte_carlo_minus_value_and_whitening():
    rewards, values, mask = gae_case()
    valid = torch.tensor([True, True, False])
    inp = AdvantageInput(
        rewards=torch.tensor([1.0, 0.0, float("nan")]),
        valid=valid,
        group_index=torch.arange(3),
        mask=mask,
        extras={"values": values},
    )
    adv = ADVANTAGES.resolve("gae(gamma=1, lam=1, whiten=false)")(inp, AlgorithmConfig())
    assert torch.allclose(adv[:2], (rewards[:2, None] - values[:2]) * mask[:2], atol=1e-6)  # A_t = R - V_t
    assert torch.equal(adv[2], torch.zeros(8))  # failed reward: no advantage
    white = ADVANTAGES.resolve("gae(gamma=1, lam=1)")(inp, AlgorithmConfig())
    keep = mask * valid[:, None]
    on = white[keep.bool()]
    assert abs(float(on.mean())) < 1e-5 and float(on.std()) == pytest.approx(1.0, abs=1e-4)
    assert torch.equal(white * (1 - keep), torch.zeros_like(white))
    assert ADVANTAGES.get("gae").requires == frozenset({"values"})


def test_clipped_value_loss():
    new, old, ret = torch.tensor([[0.0, 1.0, 3.0]]), torch.tensor([[0.0, 0.0, 2.0]]), torch.tensor([[1.0, 2.0, 2.0]])
    mask = torch.tensor([[0.0, 1.0, 1.0]])
    # token 1: unclipped (1-2)^2 = 1, clipped V = 0.2 -> 3.24 (max wins); token 2: 1 vs clipped 2.2 -> 0.04
    loss, frac = clipped_value_loss(new, old, ret, mask, 0.2, num_tokens=2.0)
    assert loss.item() == pytest.approx(0.5 * (3.24 + 1.0) / 2) and frac == 0.5
    loss, _ = clipped_value_loss(new, old, ret, mask, None, num_tokens=2.0)
    assert loss.item() == pytest.approx(0.5 * (1.0 + 1.0) / 2)


def test_new_losses_declare_what_they_need():
    assert LOSSES.get("rebel").requires == {"rewards", "groups"}
    assert LOSSES.get("agro").requires == {"rewards", "groups", "ref"}
    assert LOSSES.get("a_star_po").requires == {"rewards", "ref", "v_star"}
    assert LOSSES.get("distil").requires == {"full_logits", "teacher", "groups"}
    with pytest.raises(ValueError, match="rebel.*rewards"):
        LOSSES.get("rebel")(seq_input(LOGP, OLD, groups=GROUPS)[0], AlgorithmConfig())


def two_step_toy(seed: int):
    """A tabular student over two tokens of a 3-letter vocabulary (step 2 conditioned on step 1) and a fixed
    teacher of the same shape: theta1 (V,), theta2 (V, V)."""
    g = torch.Generator().manual_seed(seed)
    th1 = torch.randn(3, generator=g, dtype=torch.float64).requires_grad_()
    th2 = torch.randn(3, 3, generator=g, dtype=torch.float64).requires_grad_()
    t1 = torch.log_softmax(torch.randn(3, generator=g, dtype=torch.float64), -1)
    t2 = torch.log_softmax(torch.randn(3, 3, generator=g, dtype=torch.float64), -1)
    return th1, th2, t1, t2


def kl(p_log, q_log):
    return (p_log.exp() * (p_log - q_log)).sum(-1)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_distil_gradient_is_the_exact_gradient_of_the_sequence_objective(seed):
    # J = E_{y ~ pi}[KL_0 + KL_1(y_1)], enumerated exactly; the loss on each of the 9 sequences, weighted by
    # its probability, must give the same gradient (seq-mean-token-sum: one sequence, tokens summed)
    th1, th2, t1, t2 = two_step_toy(seed)
    s1, s2 = torch.log_softmax(th1, -1), torch.log_softmax(th2, -1)
    exact = kl(t1, s1) + (s1.exp() * kl(t2, s2)).sum()
    g_exact = torch.autograd.grad(exact, (th1, th2))
    cfg = AlgorithmConfig(loss_agg="seq-mean-token-sum")
    for future, should_match in ((True, True), (False, False)):
        acc = [torch.zeros_like(th1), torch.zeros_like(th2)]
        for a in range(3):
            for b in range(3):
                s1, s2 = torch.log_softmax(th1, -1), torch.log_softmax(th2, -1)
                logits = torch.stack([s1, s2[a]])[None]  # (1, 2, V)
                ids = torch.tensor([[a, b]])
                logp = logits.gather(-1, ids[..., None]).squeeze(-1)
                inp = LossInput(
                    logprobs=logp,
                    old_logprobs=logp.detach(),
                    advantages=torch.zeros(1, 2),
                    mask=torch.ones(1, 2, dtype=torch.float64),
                    num_tokens=2.0,
                    num_seqs=1.0,
                    norm_length=2.0,
                    logits=logits,
                    teacher_logprobs=torch.stack([t1, t2[a]])[None],
                    group_index=torch.zeros(1, dtype=torch.long),
                )
                loss, _ = LOSSES.get("distil")(inp, cfg, DistilParams(teacher="x", future=future))
                grads = torch.autograd.grad(loss, (th1, th2))
                weight = float(torch.exp(logp.detach().sum()))  # pi(a, b)
                acc = [x + weight * gr for x, gr in zip(acc, grads)]
        close = all(torch.allclose(x, e, atol=1e-10) for x, e in zip(acc, g_exact))
        assert close == should_match, (future, acc, g_exact)


def test_distil_future_disagreement_and_its_baseline_by_hand():
    from ascent.algorithms.losses import future_disagreement

    d = torch.tensor([[1.0, 2.0, 3.0], [0.5, 0.5, 0.0], [4.0, 0.0, 0.0]])
    mask = torch.tensor([[1.0, 1.0, 1.0], [1.0, 1.0, 0.0], [1.0, 1.0, 1.0]])
    plain = future_disagreement(d, mask, None, baseline=True)
    assert plain.tolist() == [[5.0, 3.0, 0.0], [0.5, 0.0, 0.0], [0.0, 0.0, 0.0]]
    groups = torch.tensor([0, 0, 1])
    got = future_disagreement(d, mask, groups, baseline=True)
    # rows 0 and 1 share a group: each is baselined by the other at the positions both have
    assert got.tolist() == [[4.5, 3.0, 0.0], [-4.5, -3.0, 0.0], [0.0, 0.0, 0.0]]


def test_distil_self_teacher_is_the_policy_conditioned_on_the_feedback(tiny_policy, tokenizer):
    from ascent.algorithms.distil import DistilState
    from ascent.policy.model import full_logprobs

    class Harness:
        def __init__(self) -> None:
            self.policy_model, self.tokenizer = tiny_policy.model, tokenizer

        def full_logprobs(self, model, ids, mask):
            return full_logprobs(model, ids, mask)

        def load_frozen(self, path):
            raise AssertionError("teacher=self loads nothing")

    enc = lambda text: list(tokenizer(text, add_special_tokens=False)["input_ids"])  # noqa: E731
    rows = [enc("12+3="), enc("4+5=9")]
    width = max(map(len, rows)) + 1
    ids = torch.full((2, width), tokenizer.pad_token_id)
    att = torch.zeros(2, width, dtype=torch.long)
    for i, r in enumerate(rows):
        ids[i, : len(r)], att[i, : len(r)] = torch.tensor(r), 1
    batch = types.SimpleNamespace(input_ids=ids, attention_mask=att, fields=[{"answer": "15"}, {"answer": "9"}])
    state = DistilState(DistilParams(teacher="self", feedback="{answer}="), Harness())
    state.begin_update(batch, None, None, None)
    out = state.token_inputs(ids[[1, 0], :-1], att[[1, 0], :-1])["teacher_logprobs"]  # another order, trimmed
    for j, i in enumerate((1, 0)):
        note = enc(batch.fields[i]["answer"] + "=")
        seq = torch.tensor([note + rows[i]])
        want = full_logprobs(tiny_policy.model, seq, torch.ones_like(seq))[0, len(note) :]
        assert torch.allclose(out[j, : len(rows[i])], want, atol=1e-5)
    plain = full_logprobs(tiny_policy.model, ids[:1, :-1], att[:1, :-1])[0, : len(rows[0])]
    assert not torch.allclose(out[1, : len(rows[0])], plain, atol=1e-3)  # the feedback changed the teacher
    with pytest.raises(ValueError, match="feedback"):
        DistilParams(teacher="self")
