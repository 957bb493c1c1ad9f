"""The one aggregation, the KL estimators and the policy losses (ppo_clip, pg)."""

from __future__ import annotations

import math

import pytest
import torch

from ascent.algorithms import AGG_MODES, LOSSES, LossInput, aggregate, kl_penalty
from ascent.config.schema import AlgorithmConfig
from ascent.registry import UnknownNameError

E05 = math.exp(0.5)  # 1.6487213
EM05 = math.exp(-0.5)  # 0.6065307


# ---------------------------------------------------------------------------------------------------------
# aggregate
# ---------------------------------------------------------------------------------------------------------
# l = [[1, 2, 4], [3, 5, 0], [6, 0, 0]] with mask [[1, 1, 0], [1, 1, 1], [0, 0, 0]] (the 4 and 6 are masked out)
#   masked sum = 1 + 2 + 3 + 5 + 0 = 11, tokens = 5, sequences = 3
#   token-mean = 11 / 5 = 2.2
#   seq-mean-token-mean = ((1+2)/2 + (3+5+0)/3 + 0/max(0,1)) / 3 = (1.5 + 8/3 + 0) / 3 = 1.3888889
#   seq-mean-token-sum = 11 / 3 = 3.6666667
#   seq-mean-token-sum-norm (L=4) = 11 / (3 * 4) = 0.9166667; default L = T = 3 -> 11 / 9 = 1.2222222
L_MAT = torch.tensor([[1.0, 2.0, 4.0], [3.0, 5.0, 0.0], [6.0, 0.0, 0.0]])
L_MASK = torch.tensor([[1.0, 1.0, 0.0], [1.0, 1.0, 1.0], [0.0, 0.0, 0.0]])


@pytest.mark.parametrize(
    "mode,kwargs,want",
    [
        ("token-mean", {}, 2.2),
        ("seq-mean-token-mean", {}, 1.3888889),
        ("seq-mean-token-sum", {}, 3.6666667),
        ("seq-mean-token-sum-norm", {"norm_length": 4}, 0.9166667),
        ("seq-mean-token-sum-norm", {}, 1.2222222),
        # explicit normalisers replace this batch's counts
        ("token-mean", {"num_tokens": 10}, 1.1),
        ("seq-mean-token-sum", {"num_seqs": 11}, 1.0),
        ("seq-mean-token-mean", {"num_seqs": 6}, 0.6944444),
        ("seq-mean-token-sum-norm", {"num_seqs": 2, "norm_length": 11}, 0.5),
    ],
)
def test_aggregate_hand_values(mode, kwargs, want):
    assert float(aggregate(L_MAT, L_MASK, mode, **kwargs)) == pytest.approx(want, abs=1e-6)


def test_aggregate_unknown_mode():
    with pytest.raises(ValueError) as info:
        aggregate(L_MAT, L_MASK, "mean-of-everything")
    msg = str(info.value)
    assert "mean-of-everything" in msg and all(m in msg for m in AGG_MODES)


def test_aggregate_empty_mask_is_zero_not_nan():
    for mode in AGG_MODES:
        out = aggregate(torch.ones(2, 3), torch.zeros(2, 3), mode)
        assert float(out) == 0.0, mode


@pytest.mark.parametrize("mode", AGG_MODES)
def test_micro_batches_sum_to_full_batch(mode):
    g = torch.Generator().manual_seed(0)
    N, T = 10, 7
    loss = torch.randn(N, T, generator=g)
    mask = (torch.rand(N, T, generator=g) < 0.6).float()
    mask[3] = 0.0  # a sequence with no tokens at all
    num_tokens, num_seqs, L = float(mask.sum()), float(N), 9.0
    full = aggregate(loss, mask, mode, num_tokens, num_seqs, L)
    for chunks in ([3, 3, 4], [1] * 10, [7, 3]):
        parts, start = [], 0
        for size in chunks:
            sl = slice(start, start + size)
            parts.append(aggregate(loss[sl], mask[sl], mode, num_tokens, num_seqs, L))
            start += size
        assert torch.allclose(sum(parts), full, atol=1e-6), (mode, chunks)
    # without the global normalisers, micro-batching would NOT reproduce the full loss (sanity of the test)
    if mode in ("token-mean", "seq-mean-token-sum", "seq-mean-token-mean"):
        local = aggregate(loss[:3], mask[:3], mode) + aggregate(loss[3:], mask[3:], mode)
        assert not torch.allclose(local, full, atol=1e-4)


# ---------------------------------------------------------------------------------------------------------
# KL estimators
# ---------------------------------------------------------------------------------------------------------
def test_kl_hand_values():
    # r = ref - logp. Column 0: logp 0, ref -1 -> r = -1: k1 = 1, k2 = 0.5, k3 = e^-1 - 1 + 1 = 0.3678794
    # column 1: logp -1, ref 0 -> r = 1: k1 = -1, k2 = 0.5, k3 = e - 1 - 1 = 0.7182818
    # column 2: equal -> all 0
    lp = torch.tensor([[0.0, -1.0, -0.3]])
    ref = torch.tensor([[-1.0, 0.0, -0.3]])
    assert torch.allclose(kl_penalty(lp, ref, "k1"), torch.tensor([[1.0, -1.0, 0.0]]))
    assert torch.allclose(kl_penalty(lp, ref, "k2"), torch.tensor([[0.5, 0.5, 0.0]]))
    assert torch.allclose(kl_penalty(lp, ref, "k3"), torch.tensor([[0.3678794, 0.7182818, 0.0]]), atol=1e-6)


def test_kl_unknown_estimator():
    with pytest.raises(ValueError, match="k4.*k1, k2, k3"):
        kl_penalty(torch.zeros(1), torch.zeros(1), "k4")


def test_k3_is_nonnegative_and_finite():
    g = torch.Generator().manual_seed(1)
    lp = torch.randn(200, 50, generator=g) * 10
    ref = torch.randn(200, 50, generator=g) * 10
    k3 = kl_penalty(lp, ref, "k3")
    assert (k3 >= 0).all() and torch.isfinite(k3).all()
    assert (kl_penalty(lp, ref, "k2") >= 0).all()
    assert (kl_penalty(lp, ref, "k1") < 0).any()  # k1 alone can be negative


def test_kl_estimators_monte_carlo():
    # tokens x ~ p; true KL(p || q) = sum p log(p / q)
    p = torch.tensor([0.5, 0.2, 0.15, 0.1, 0.05], dtype=torch.float64)
    q = torch.tensor([0.2, 0.2, 0.2, 0.2, 0.2], dtype=torch.float64)
    true_kl = float((p * (p / q).log()).sum())  # 0.2899 nats
    g = torch.Generator().manual_seed(0)
    x = torch.multinomial(p, 200_000, replacement=True, generator=g)
    lp, ref = p.log()[x], q.log()[x]
    k1 = float(kl_penalty(lp, ref, "k1").mean())
    k3 = float(kl_penalty(lp, ref, "k3").mean())
    # standard error of k1's mean here is ~0.0015; 0.01 is > 6 sigma
    assert k1 == pytest.approx(true_kl, abs=0.01)
    assert k3 == pytest.approx(true_kl, abs=0.01)


# ---------------------------------------------------------------------------------------------------------
# ppo_clip: hand values
# ---------------------------------------------------------------------------------------------------------
def loss_input(logprobs, old, adv, mask=None, ref=None, **kw) -> LossInput:
    lp = torch.as_tensor(logprobs, dtype=torch.float32)
    m = torch.ones_like(lp) if mask is None else torch.as_tensor(mask, dtype=torch.float32)
    return LossInput(
        logprobs=lp,
        old_logprobs=torch.as_tensor(old, dtype=torch.float32),
        advantages=torch.as_tensor(adv, dtype=torch.float32),
        mask=m,
        num_tokens=kw.get("num_tokens", float(m.sum())),
        num_seqs=kw.get("num_seqs", float(m.shape[0])),
        norm_length=kw.get("norm_length", float(m.shape[1])),
        ref_logprobs=None if ref is None else torch.as_tensor(ref, dtype=torch.float32),
    )


def leaf(values) -> torch.Tensor:
    return torch.tensor(values, dtype=torch.float32, requires_grad=True)


def test_ppo_clip_hand_values_clipped_case():
    # log-ratios [0.5, 0, -0.5] -> ratios [1.6487213, 1, 0.6065307]; advantages [+1, -1, -1]; clip 0.2
    #   token 0 (A=+1): max(-1.6487, -1.2) = -1.2      (clipped, ratio above 1.2)
    #   token 1 (A=-1): max(1, 1) = 1                 (inside)
    #   token 2 (A=-1): max(0.6065, 0.8) = 0.8        (clipped, ratio below 0.8)
    #   token-mean: (-1.2 + 1 + 0.8) / 3 = 0.2; clip_frac 2/3
    #   ratio_mean (1.6487213 + 1 + 0.6065307) / 3 = 1.0850840; approx_kl_old = mean(0.125, 0, 0.125) = 0.0833333
    lp = leaf([[0.5, 0.0, -0.5]])
    inp = loss_input(lp, [[0.0, 0.0, 0.0]], [[1.0, -1.0, -1.0]])
    loss, metrics = LOSSES.get("ppo_clip")(inp, AlgorithmConfig())
    assert loss.item() == pytest.approx(0.2, abs=1e-6)
    assert metrics["loss/policy"] == pytest.approx(0.2, abs=1e-6)
    assert metrics["loss/clip_frac"] == pytest.approx(2 / 3, abs=1e-6)
    assert metrics["loss/ratio_mean"] == pytest.approx(1.0850840, abs=1e-6)
    assert metrics["loss/approx_kl_old"] == pytest.approx(0.0833333, abs=1e-6)
    assert "loss/kl" not in metrics
    loss.backward()
    # clipped tokens get no gradient; token 1: d(-A rho)/dlogp / 3 = -(-1) * 1 / 3
    assert torch.allclose(lp.grad, torch.tensor([[0.0, 1 / 3, 0.0]]), atol=1e-6)


def test_ppo_clip_hand_values_unclipped_case():
    # same ratios, advantages [-1, +1, +1]: the pessimistic max picks the UNclipped term everywhere
    #   token 0 (A=-1): max(1.6487213, 1.2) = 1.6487213
    #   token 1 (A=+1): -1
    #   token 2 (A=+1): max(-0.6065307, -0.8) = -0.6065307
    #   token-mean (1.6487213 - 1 - 0.6065307) / 3 = 0.0140635; clip_frac 0
    #   gradient d(-A rho)/dlogp = -A rho: [1.6487213, -1, -0.6065307] / 3
    lp = leaf([[0.5, 0.0, -0.5]])
    inp = loss_input(lp, [[0.0, 0.0, 0.0]], [[-1.0, 1.0, 1.0]])
    loss, metrics = LOSSES.get("ppo_clip")(inp, AlgorithmConfig())
    assert loss.item() == pytest.approx(0.0140635, abs=1e-6)
    assert metrics["loss/clip_frac"] == 0.0
    loss.backward()
    assert torch.allclose(lp.grad, torch.tensor([[E05, -1.0, -EM05]]) / 3, atol=1e-6)


def test_ppo_clip_higher():
    # ratios [1.25, 0.75], advantages [+1, -1]
    lr = [[math.log(1.25), math.log(0.75)]]
    adv = [[1.0, -1.0]]
    sym = AlgorithmConfig(clip_low=0.2, clip_high=0.2)
    dapo = AlgorithmConfig(clip_low=0.2, clip_high=0.28)
    # symmetric: token 0 clipped at 1.2 -> -1.2 (no grad); token 1 clipped at 0.8 -> 0.8 (no grad)
    lp = leaf(lr)
    loss, m = LOSSES.get("ppo_clip")(loss_input(lp, [[0.0, 0.0]], adv), sym)
    loss.backward()
    assert loss.item() == pytest.approx((-1.2 + 0.8) / 2, abs=1e-6)
    assert m["loss/clip_frac"] == pytest.approx(1.0)
    assert torch.equal(lp.grad, torch.zeros(1, 2))
    # clip-higher: 1.25 < 1.28 is inside -> -1.25 with gradient -A rho / 2 = -0.625; the low side is unchanged
    lp = leaf(lr)
    loss, m = LOSSES.get("ppo_clip")(loss_input(lp, [[0.0, 0.0]], adv), dapo)
    loss.backward()
    assert loss.item() == pytest.approx((-1.25 + 0.8) / 2, abs=1e-6)
    assert m["loss/clip_frac"] == pytest.approx(0.5)
    assert torch.allclose(lp.grad, torch.tensor([[-0.625, 0.0]]), atol=1e-6)
    # and a ratio beyond 1.28 is clipped at 1.28
    loss, _ = LOSSES.get("ppo_clip")(loss_input([[math.log(1.5)]], [[0.0]], [[1.0]]), dapo)
    assert loss.item() == pytest.approx(-1.28, abs=1e-6)


def test_ppo_dual_clip():
    # ratio e^2 = 7.389 with A=-1: plain PPO loss 7.389 (unbounded); dual clip c=3 bounds it at -A*c = 3
    # ratio e^2 with A=+2: -2 * 1.2 = -2.4 either way; ratio 1 with A=-1: 1 < 3, unaffected
    lr = [[2.0, 2.0, 0.0]]
    adv = [[-1.0, 2.0, -1.0]]
    plain, _ = LOSSES.get("ppo_clip")(loss_input(lr, [[0.0] * 3], adv), AlgorithmConfig())
    assert plain.item() == pytest.approx((math.exp(2.0) - 2.4 + 1.0) / 3, abs=1e-5)
    lp = leaf(lr)
    dual, _ = LOSSES.get("ppo_clip")(loss_input(lp, [[0.0] * 3], adv), AlgorithmConfig(dual_clip=3.0))
    assert dual.item() == pytest.approx((3.0 - 2.4 + 1.0) / 3, abs=1e-6)
    dual.backward()
    # the dual-clipped and the clipped tokens have zero gradient; token 2: -A rho / 3 = 1/3
    assert torch.allclose(lp.grad, torch.tensor([[0.0, 0.0, 1 / 3]]), atol=1e-6)
    # a large-ratio negative-advantage token never costs more than -A * c, whatever the ratio
    for big in (3.0, 5.0, 10.0):
        lval, _ = LOSSES.get("ppo_clip")(loss_input([[big]], [[0.0]], [[-0.7]]), AlgorithmConfig(dual_clip=3.0))
        assert lval.item() == pytest.approx(0.7 * 3.0, abs=1e-5)


def test_ppo_clip_zero_gradient_exactly_on_clipped_tokens():
    g = torch.Generator().manual_seed(3)
    lr = torch.randn(6, 9, generator=g) * 0.4
    adv = torch.randn(6, 9, generator=g)
    lp = lr.clone().requires_grad_(True)
    cfg = AlgorithmConfig(clip_low=0.2, clip_high=0.25)
    loss, m = LOSSES.get("ppo_clip")(loss_input(lp, torch.zeros(6, 9), adv), cfg)
    loss.backward()
    ratio = lr.exp()
    clipped = ((adv > 0) & (ratio > 1.25)) | ((adv < 0) & (ratio < 0.8))
    assert clipped.any() and (~clipped).any()
    assert (lp.grad[clipped] == 0).all()
    assert torch.allclose(lp.grad[~clipped], (-adv * ratio / 54)[~clipped], atol=1e-6)
    assert m["loss/clip_frac"] == pytest.approx(float(clipped.float().mean()), abs=1e-6)


def test_clip_frac_ignores_masked_tokens():
    # token 0 clipped (ratio 1.65, A>0), token 1 clipped but masked out, token 2 inside
    inp = loss_input([[0.5, 0.5, 0.0]], [[0.0] * 3], [[1.0, 1.0, 1.0]], mask=[[1.0, 0.0, 1.0]])
    _, m = LOSSES.get("ppo_clip")(inp, AlgorithmConfig())
    assert m["loss/clip_frac"] == pytest.approx(0.5)


# ---------------------------------------------------------------------------------------------------------
# pg
# ---------------------------------------------------------------------------------------------------------
def test_pg_gradient_is_minus_advantage_times_grad_logp():
    # a tiny categorical policy over 4 tokens; logits from a parameter matrix W (T positions x 4)
    torch.manual_seed(0)
    W = torch.randn(5, 4, requires_grad=True)
    tokens = torch.tensor([[0, 3, 1, 2, 2], [1, 1, 0, 3, 2]])
    adv = torch.tensor([[0.5, 0.5, 0.5, 0.0, 0.0], [-2.0, -2.0, -2.0, -2.0, 0.0]])
    mask = torch.tensor([[1.0, 1, 1, 0, 0], [1.0, 1, 1, 1, 0]])

    def logp():
        return torch.log_softmax(W, -1).expand(2, 5, 4).gather(-1, tokens[..., None])[..., 0]  # (2, 5)

    loss, metrics = LOSSES.get("pg")(loss_input(logp(), logp().detach(), adv, mask=mask), AlgorithmConfig())
    (grad,) = torch.autograd.grad(loss, W)
    # reference: -sum_{i,t} A_it m_it grad logp_it / num_tokens (token-mean, 7 tokens)
    want = torch.zeros_like(W)
    lp = logp()
    for i in range(2):
        for t in range(5):
            if mask[i, t]:
                (gi,) = torch.autograd.grad(lp[i, t], W, retain_graph=True)
                want += -adv[i, t] * gi / 7.0
    assert torch.allclose(grad, want, atol=1e-6)
    assert metrics["loss/policy"] == pytest.approx(float((-adv * lp.detach() * mask).sum() / 7), abs=1e-6)


def test_pg_gradient_wrt_logprobs():
    lp = leaf([[-0.3, -1.2, -2.0]])
    loss, _ = LOSSES.get("pg")(
        loss_input(lp, [[0.0] * 3], [[2.0, -1.0, 5.0]], mask=[[1.0, 1.0, 0.0]]), AlgorithmConfig()
    )
    loss.backward()
    assert loss.item() == pytest.approx((2.0 * 0.3 - 1.2) / 2, abs=1e-6)
    assert torch.allclose(lp.grad, torch.tensor([[-1.0, 0.5, 0.0]]))


# ---------------------------------------------------------------------------------------------------------
# KL term
# ---------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["ppo_clip", "pg"])
def test_kl_term_only_with_coef_and_reference(name):
    lp = [[-0.5, -1.0, -0.2]]
    old = [[-0.5, -1.0, -0.2]]
    ref = [[-1.5, -1.0, 0.0]]  # r = ref - lp = [-1, 0, 0.2]
    adv = [[1.0, -1.0, 0.5]]
    fn = LOSSES.get(name)
    base, m0 = fn(loss_input(lp, old, adv), AlgorithmConfig())
    no_coef, m1 = fn(loss_input(lp, old, adv, ref=ref), AlgorithmConfig(kl_coef=0.0))
    no_ref, m2 = fn(loss_input(lp, old, adv), AlgorithmConfig(kl_coef=0.5))
    for m in (m0, m1, m2):
        assert "loss/kl" not in m
    assert no_coef.item() == pytest.approx(base.item()) and no_ref.item() == pytest.approx(base.item())
    # k3 per token: e^-1 - 1 + 1 = 0.3678794, 0, e^0.2 - 1 - 0.2 = 0.0214028; mean 0.1297607
    with_kl, m3 = fn(loss_input(lp, old, adv, ref=ref), AlgorithmConfig(kl_coef=0.5))
    assert m3["loss/kl"] == pytest.approx(0.1297607, abs=1e-6)
    assert with_kl.item() == pytest.approx(base.item() + 0.5 * 0.1297607, abs=1e-6)
    # k1 per token: 1, 0, -0.2 -> mean 0.2666667
    k1, m4 = fn(loss_input(lp, old, adv, ref=ref), AlgorithmConfig(kl_coef=2.0, kl_estimator="k1"))
    assert m4["loss/kl"] == pytest.approx(0.2666667, abs=1e-6)
    assert k1.item() == pytest.approx(base.item() + 2.0 * 0.2666667, abs=1e-6)


def test_kl_term_gradient_reaches_logprobs():
    # pg with zero advantages: only the k1 KL term is left; d/dlogp of coef * mean(logp - ref) = coef / tokens
    lp = leaf([[-0.5, -1.0]])
    loss, _ = LOSSES.get("pg")(
        loss_input(lp, [[0.0, 0.0]], [[0.0, 0.0]], ref=[[-1.0, -1.0]]), AlgorithmConfig(kl_coef=0.3, kl_estimator="k1")
    )
    loss.backward()
    assert torch.allclose(lp.grad, torch.tensor([[0.15, 0.15]]))


def test_unknown_loss_lists_names():
    with pytest.raises(UnknownNameError, match="pg, ppo_clip"):
        LOSSES.get("trpo")


# ---------------------------------------------------------------------------------------------------------
# ppo_clip: loop reference on random input
# ---------------------------------------------------------------------------------------------------------
def loop_ppo(lp, old, adv, mask, ref, cfg, num_tokens, num_seqs, norm_length):
    N, T = len(lp), len(lp[0])
    mats = {"pol": [[0.0] * T for _ in range(N)], "kl": [[0.0] * T for _ in range(N)]}
    for i in range(N):
        for t in range(T):
            log_ratio = min(max(lp[i][t] - old[i][t], -20.0), 20.0)
            rho = math.exp(log_ratio)
            a = adv[i][t]
            clipped_rho = min(max(rho, 1 - cfg.clip_low), 1 + cfg.clip_high)
            val = max(-a * rho, -a * clipped_rho)
            if cfg.dual_clip is not None and a < 0:
                val = min(val, -a * cfg.dual_clip)
            mats["pol"][i][t] = val
            if ref is not None:
                r = ref[i][t] - lp[i][t]
                mats["kl"][i][t] = {"k1": -r, "k2": 0.5 * r * r, "k3": math.exp(r) - 1 - r}[cfg.kl_estimator]

    def agg(mat):
        if cfg.loss_agg == "token-mean":
            return sum(mat[i][t] * mask[i][t] for i in range(N) for t in range(T)) / max(num_tokens, 1)
        if cfg.loss_agg == "seq-mean-token-mean":
            tot = 0.0
            for i in range(N):
                n_i = sum(mask[i])
                tot += sum(mat[i][t] * mask[i][t] for t in range(T)) / max(n_i, 1)
            return tot / max(num_seqs, 1)
        s = sum(mat[i][t] * mask[i][t] for i in range(N) for t in range(T))
        if cfg.loss_agg == "seq-mean-token-sum":
            return s / max(num_seqs, 1)
        return s / max(num_seqs * norm_length, 1)

    out = agg(mats["pol"])
    if ref is not None and cfg.kl_coef > 0:
        out += cfg.kl_coef * agg(mats["kl"])
    return out


@pytest.mark.parametrize("mode", AGG_MODES)
def test_ppo_clip_matches_loop_reference(mode):
    g = torch.Generator().manual_seed(7)
    for trial in range(8):
        N, T = 3 + trial % 3, 4 + trial % 4
        lp = -torch.rand(N, T, generator=g) * 3
        old = lp + torch.randn(N, T, generator=g) * 0.4
        adv = torch.randn(N, T, generator=g)
        mask = (torch.rand(N, T, generator=g) < 0.7).float()
        ref = lp + torch.randn(N, T, generator=g) * 0.3 if trial % 2 else None
        cfg = AlgorithmConfig(
            loss_agg=mode,
            clip_low=0.2,
            clip_high=0.2 if trial % 3 else 0.28,
            dual_clip=3.0 if trial % 4 == 1 else None,
            kl_coef=0.1 if trial % 2 else 0.0,
            kl_estimator=("k1", "k2", "k3")[trial % 3],
        )
        # global normalisers differing from this batch's counts (as for one micro-batch of a larger batch)
        num_tokens, num_seqs, norm_length = float(mask.sum()) + 3, float(N) + 1, 6.0
        inp = LossInput(lp, old, adv, mask, num_tokens, num_seqs, norm_length, ref_logprobs=ref)
        loss, _ = LOSSES.get("ppo_clip")(inp, cfg)
        want = loop_ppo(
            lp.tolist(),
            old.tolist(),
            adv.tolist(),
            mask.tolist(),
            None if ref is None else ref.tolist(),
            cfg,
            num_tokens,
            num_seqs,
            norm_length,
        )
        assert loss.item() == pytest.approx(want, rel=1e-5, abs=1e-6), (mode, trial)
