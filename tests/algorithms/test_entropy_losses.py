"""Entropy-management losses (ascent/algorithms/entropy.py): clip_cov, kl_cov, entropy_bonus.

Hand-built batch B (N=2, T=4; column 3 is padding, mask 0, with junk values that must be ignored):
    log pi = [[-0.5, -1.0, -3.5 | -7], [-0.5, -2.0, -1.5 | -7]]      mean over the 6 valid tokens = -9/6 = -1.5
    A      = [[ 3,    3,    3   |  5], [-1,   -1,   -1   |  5]]      mean = (9 - 3)/6 = 1
    centred log pi = [[1, 0.5, -2], [1, -0.5, 0]];  centred A = [[2, 2, 2], [-2, -2, -2]]
    Cov    = [[2, 1, -4], [-2, 1, 0]]          (every value exact in float32)
Clip-Cov band [1, 5] (inclusive): candidates (0,0)=2, (0,1)=1, (1,1)=1.
"""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import pytest
import torch

from ascent.algorithms import AGG_MODES, LOSSES, LossInput
from ascent.algorithms.entropy import (
    ClipCovParams,
    EntropyBonusParams,
    KlCovParams,
    clip_cov_candidates,
    clip_cov_selection,
    kl_cov_selection,
    token_covariance,
    token_entropy,
)
from ascent.config.schema import AlgorithmConfig
from ascent.registry import Registry
from ascent.typed import ConfigError
from tests.conftest import TINY

LOGP = [[-0.5, -1.0, -3.5, -7.0], [-0.5, -2.0, -1.5, -7.0]]
ADV = [[3.0, 3.0, 3.0, 5.0], [-1.0, -1.0, -1.0, 5.0]]
MASK = [[1.0, 1.0, 1.0, 0.0], [1.0, 1.0, 1.0, 0.0]]
COV = [[2.0, 1.0, -4.0, 0.0], [-2.0, 1.0, 0.0, 0.0]]
CANDIDATES = [[True, True, False, False], [False, True, False, False]]


def batch(logp=LOGP, adv=ADV, mask=MASK, old_shift=None, logits=None) -> LossInput:
    """LossInput with log pi requiring grad; old = log pi - old_shift (default: on-policy, rho = 1)."""
    lp = torch.tensor(logp, requires_grad=True)
    shift = torch.zeros_like(lp) if old_shift is None else torch.tensor(old_shift)
    m = torch.tensor(mask)
    return LossInput(
        logprobs=lp,
        old_logprobs=(lp - shift).detach(),
        advantages=torch.tensor(adv),
        mask=m,
        num_tokens=float(m.sum()),
        num_seqs=float(m.shape[0]),
        norm_length=float(m.shape[1]),
        logits=logits,
    )


def grad_of(loss_name: str, inp: LossInput, cfg: AlgorithmConfig, params=None) -> tuple[float, torch.Tensor]:
    fn = LOSSES.get(loss_name)
    loss, _ = fn(inp, cfg) if params is None else fn(inp, cfg, params=params)
    (g,) = torch.autograd.grad(loss, inp.logprobs)
    return float(loss.detach()), g


def slow_covariance(logp, adv, mask) -> list[list[float]]:
    """Cov by plain loops: the reference for token_covariance."""
    cells = [(i, t) for i in range(len(mask)) for t in range(len(mask[0])) if mask[i][t] > 0]
    mean_lp = sum(logp[i][t] for i, t in cells) / len(cells)
    mean_a = sum(adv[i][t] for i, t in cells) / len(cells)
    out = [[0.0] * len(mask[0]) for _ in mask]
    for i, t in cells:
        out[i][t] = (logp[i][t] - mean_lp) * (adv[i][t] - mean_a)
    return out


# ---------------------------------------------------------------------------------------------------------
# Cov
# ---------------------------------------------------------------------------------------------------------


def test_covariance_hand_values():
    assert torch.equal(token_covariance(batch()), torch.tensor(COV))


def test_covariance_matches_slow_loop_on_random_batches():
    g = torch.Generator().manual_seed(0)
    for _ in range(5):
        logp = -torch.rand(5, 7, generator=g) * 4
        adv = torch.randn(5, 1, generator=g).expand(5, 7).clone()
        mask = (torch.rand(5, 7, generator=g) < 0.7).float()
        want = torch.tensor(slow_covariance(logp.tolist(), adv.tolist(), mask.tolist()))
        assert torch.allclose(token_covariance(batch(logp.tolist(), adv.tolist(), mask.tolist())), want, atol=1e-5)


# ---------------------------------------------------------------------------------------------------------
# clip_cov
# ---------------------------------------------------------------------------------------------------------


def test_clip_cov_candidates_and_selection_hand_values():
    cfg = AlgorithmConfig()
    inp = batch()
    assert clip_cov_candidates(inp, cfg, ClipCovParams()).tolist() == CANDIDATES
    # clip_ratio 0.5: k = max(1, floor(0.5 * 6)) = 3 >= 3 candidates -> all of them, whatever the draw
    assert clip_cov_selection(inp, cfg, ClipCovParams(clip_ratio=0.5)).tolist() == CANDIDATES
    # a narrower band [1.5, 5] leaves only (0,0)
    only = clip_cov_selection(inp, cfg, ClipCovParams(clip_ratio=0.5, cov_low=1.5))
    assert only.nonzero().tolist() == [[0, 0]]
    # no token in the band: nothing is detached
    assert not clip_cov_selection(inp, cfg, ClipCovParams(cov_low=10.0, cov_high=20.0)).any()


def test_clip_cov_skips_tokens_ppo_already_clipped():
    # (0,0): log pi - log pi_old = 0.5 -> rho = 1.6487 > 1.2 with A = 3 > 0: ppo_clip's clipped branch, no gradient
    shift = [[0.5, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0]]
    sel = clip_cov_selection(batch(old_shift=shift), AlgorithmConfig(), ClipCovParams(clip_ratio=0.5))
    assert sel.nonzero().tolist() == [[0, 1], [1, 1]]


def test_clip_cov_gradient_zero_exactly_on_detached_tokens_and_ppo_elsewhere():
    cfg = AlgorithmConfig()
    shift = [[0.0, 0.05, -0.1, 0.0], [0.1, -0.05, 0.02, 0.0]]  # rho != 1 but inside [0.8, 1.2]: nothing ppo-clipped
    params = ClipCovParams(clip_ratio=0.5)
    sel = clip_cov_selection(batch(old_shift=shift), cfg, params)
    assert sel.tolist() == CANDIDATES
    loss, g = grad_of("clip_cov", batch(old_shift=shift), cfg, params)
    ref_loss, g_ppo = grad_of("ppo_clip", batch(old_shift=shift), cfg)
    assert loss == pytest.approx(ref_loss, abs=1e-7)  # detaching keeps the value
    assert torch.equal(g[sel], torch.zeros(3))
    assert torch.equal(g[~sel], g_ppo[~sel])
    assert (g_ppo[sel] != 0).all()  # the test would be empty otherwise


def test_clip_cov_loss_and_gradient_hand_values():
    # on-policy (rho = 1): l = -A per token; token-mean = (-3*3 + 1*3) / 6 = -1; d l / d log pi_t = -A_t / 6
    loss, g = grad_of("clip_cov", batch(), AlgorithmConfig(), ClipCovParams(clip_ratio=0.5))
    assert loss == pytest.approx(-1.0)
    want = torch.tensor([[0.0, 0.0, -0.5, 0.0], [1 / 6, 0.0, 1 / 6, 0.0]])  # detached: (0,0), (0,1), (1,1)
    assert torch.allclose(g, want, atol=1e-7)


def random_batch(seed: int, n=8, t=16) -> dict:
    g = torch.Generator().manual_seed(seed)
    return {
        "logp": (-torch.rand(n, t, generator=g) * 3).tolist(),
        "adv": (3 * torch.randn(n, 1, generator=g)).expand(n, t).tolist(),
        "mask": (torch.rand(n, t, generator=g) < 0.8).float().tolist(),
    }


def test_clip_cov_draw_is_deterministic_sized_and_inside_the_band():
    b = random_batch(1)
    cfg, params = AlgorithmConfig(), ClipCovParams(clip_ratio=0.05)
    inp = batch(b["logp"], b["adv"], b["mask"])
    cand = clip_cov_candidates(inp, cfg, params)
    k = max(1, int(0.05 * sum(map(sum, b["mask"]))))
    assert int(cand.sum()) > k  # a real draw: more candidates than tokens to detach
    first = clip_cov_selection(inp, cfg, params)
    assert int(first.sum()) == k and not (first & ~cand).any()
    again = clip_cov_selection(batch(b["logp"], b["adv"], b["mask"]), cfg, params)
    assert torch.equal(first, again)
    l1, g1 = grad_of("clip_cov", batch(b["logp"], b["adv"], b["mask"]), cfg, params)
    l2, g2 = grad_of("clip_cov", batch(b["logp"], b["adv"], b["mask"]), cfg, params)
    assert l1 == l2 and torch.equal(g1, g2)
    # another seed, or another batch, draws differently (not a fixed choice)
    seeds = {
        tuple(clip_cov_selection(inp, cfg, ClipCovParams(clip_ratio=0.05, seed=s)).flatten().tolist()) for s in range(6)
    }
    assert len(seeds) > 1


def test_clip_cov_metrics():
    _, m = LOSSES.get("clip_cov")(batch(), AlgorithmConfig(), params=ClipCovParams(clip_ratio=0.5))
    assert m["loss/clip_cov_frac"] == pytest.approx(3 / 6)
    assert m["loss/clip_cov_candidate_frac"] == pytest.approx(3 / 6)
    assert m["loss/cov_mean"] == pytest.approx((2 + 1 - 4 - 2 + 1 + 0) / 6)
    assert m["loss/policy"] == pytest.approx(-1.0)


# ---------------------------------------------------------------------------------------------------------
# kl_cov
# ---------------------------------------------------------------------------------------------------------

DELTA = [[0.1, -0.1, 0.1, 0.0], [0.1, -0.1, 0.1, 0.0]]  # log pi - log pi_old; rho = e^{+-0.1}, inside the clip


def test_kl_cov_selection_is_the_top_k_by_cov():
    inp = batch()
    assert kl_cov_selection(inp, KlCovParams(kl_ratio=0.2)).nonzero().tolist() == [[0, 0]]  # k = 1: Cov 2
    assert kl_cov_selection(inp, KlCovParams(kl_ratio=0.5)).tolist() == CANDIDATES  # k = 3: Cov 2, 1, 1
    assert int(kl_cov_selection(inp, KlCovParams(kl_ratio=1.0)).sum()) == 6  # never a padded token


def test_kl_cov_loss_and_gradient_hand_values():
    cfg, params = AlgorithmConfig(), KlCovParams(kl_ratio=0.5, coef=2.0)
    loss, g = grad_of("kl_cov", batch(old_shift=DELTA), cfg, params)
    ref_loss, g_ppo = grad_of("ppo_clip", batch(old_shift=DELTA), cfg)
    # penalty = coef * sum over I = {(0,0), (0,1), (1,1)} of |delta| / 6 tokens = 2 * 0.3 / 6 = 0.1
    assert loss == pytest.approx(ref_loss + 0.1, abs=1e-6)
    sel = torch.tensor(CANDIDATES)
    sign = torch.tensor(DELTA).sign()
    assert torch.allclose(g[sel], g_ppo[sel] + 2.0 * sign[sel] / 6, atol=1e-7)
    assert torch.equal(g[~sel], g_ppo[~sel])
    # the ppo part by hand: l_t = -A_t exp(delta_t); token-mean over the 6 valid tokens
    e, f = math.exp(0.1), math.exp(-0.1)
    assert ref_loss == pytest.approx((-3 * (e + f + e) + (e + f + e)) / 6, abs=1e-6)


def test_kl_cov_on_policy_is_ppo_clip():
    """pi = pi_old: |log ratio| = 0 with gradient 0 (the documented first-update behaviour)."""
    cfg = AlgorithmConfig()
    loss, g = grad_of("kl_cov", batch(), cfg, KlCovParams(kl_ratio=0.5))
    ref_loss, g_ppo = grad_of("ppo_clip", batch(), cfg)
    assert loss == ref_loss and torch.equal(g, g_ppo)


def test_kl_cov_metrics():
    _, m = LOSSES.get("kl_cov")(batch(old_shift=DELTA), AlgorithmConfig(), params=KlCovParams(kl_ratio=0.5))
    assert m["loss/kl_cov_frac"] == pytest.approx(0.5)
    assert m["loss/kl_cov_abs_log_ratio"] == pytest.approx(0.1)
    assert m["loss/cov_mean"] == pytest.approx(-2 / 6)


# ---------------------------------------------------------------------------------------------------------
# entropy_bonus
# ---------------------------------------------------------------------------------------------------------

# Two completion positions, V = 3: a uniform distribution (H = ln 3) and (1/2, 1/4, 1/4) (H = 1.5 ln 2).
PROBS = [[[1 / 3, 1 / 3, 1 / 3], [0.5, 0.25, 0.25]]]


def entropy_batch(z: torch.Tensor, adv: float) -> LossInput:
    full = torch.log_softmax(z, -1)  # (1, 2, 3)
    token = torch.tensor([[0, 1]])
    logp = full.gather(-1, token.unsqueeze(-1)).squeeze(-1)  # (1, 2)
    m = torch.ones(1, 2)
    return LossInput(logp, logp.detach(), torch.full((1, 2), adv), m, 2.0, 1.0, 2.0, logits=full)


def test_token_entropy_hand_values():
    logits = torch.tensor(PROBS).log()
    assert torch.allclose(token_entropy(logits), torch.tensor([[math.log(3), 1.5 * math.log(2)]]), atol=1e-6)
    with_zero = torch.tensor([[[0.0, -math.inf]]])  # a token of probability 0 adds 0, not nan
    assert float(token_entropy(with_zero)) == 0.0


def test_entropy_bonus_value_and_metric():
    z = torch.tensor(PROBS).log()
    inp = entropy_batch(z, adv=0.0)
    loss, m = LOSSES.get("entropy_bonus")(inp, AlgorithmConfig(), params=EntropyBonusParams(coef=0.1))
    mean_h = (math.log(3) + 1.5 * math.log(2)) / 2
    assert m["loss/entropy"] == pytest.approx(mean_h, abs=1e-6)
    assert float(loss) == pytest.approx(-0.1 * mean_h, abs=1e-6)  # A = 0: the ppo part is 0


def test_entropy_bonus_gradient_is_ppo_minus_coef_grad_entropy():
    """d/dz of the loss = ppo_clip's - coef * dH/dz, with the analytic dH/dz_v = -p_v (log p_v + H) / 2 tokens."""
    z0 = torch.tensor([[[2.0, 0.0, -1.0], [0.5, 0.5, -2.0]]])
    grads = {}
    for name, params in (("entropy_bonus", EntropyBonusParams(coef=0.3)), ("ppo_clip", None)):
        z = z0.clone().requires_grad_(True)
        inp = entropy_batch(z, adv=1.5)
        loss, _ = LOSSES.get(name)(inp, AlgorithmConfig(), **({} if params is None else {"params": params}))
        (grads[name],) = torch.autograd.grad(loss, z)
    p = torch.softmax(z0, -1)
    h = -(p * p.log()).sum(-1, keepdim=True)
    dh = -p * (p.log() + h) / 2  # token-mean over the 2 positions
    assert torch.allclose(grads["entropy_bonus"], grads["ppo_clip"] - 0.3 * dh, atol=1e-6)


def test_entropy_bonus_gradient_steps_raise_entropy():
    """A = 0, so only the bonus acts: every SGD step on the logits raises the mean entropy of a peaked toy policy."""
    z = torch.tensor([[[3.0, 0.0, -1.0], [2.0, 1.0, -3.0]]], requires_grad=True)
    opt = torch.optim.SGD([z], lr=0.5)
    params = EntropyBonusParams(coef=1.0)
    history = [float(token_entropy(torch.log_softmax(z.detach(), -1)).mean())]
    for _ in range(5):
        opt.zero_grad()
        loss, _ = LOSSES.get("entropy_bonus")(entropy_batch(z, adv=0.0), AlgorithmConfig(), params=params)
        loss.backward()
        opt.step()
        history.append(float(token_entropy(torch.log_softmax(z.detach(), -1)).mean()))
    assert all(b > a for a, b in zip(history, history[1:])), history
    assert history[-1] > history[0] + 0.05, history


def test_entropy_bonus_needs_full_logits():
    assert LOSSES.resolve("entropy_bonus").requires == {"full_logits"}
    with pytest.raises(ValueError, match="logits"):
        LOSSES.get("entropy_bonus")(batch(), AlgorithmConfig())


# ---------------------------------------------------------------------------------------------------------
# parameters, registration, a tiny run
# ---------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "cls,kwargs",
    [
        (ClipCovParams, {"clip_ratio": 0.0}),
        (ClipCovParams, {"clip_ratio": 1.5}),
        (ClipCovParams, {"cov_low": 5.0, "cov_high": 1.0}),
        (ClipCovParams, {"seed": -1}),
        (KlCovParams, {"kl_ratio": 0.0}),
        (KlCovParams, {"coef": -1.0}),
        (EntropyBonusParams, {"coef": -0.01}),
    ],
)
def test_params_range_checks(cls, kwargs):
    with pytest.raises(ValueError):
        cls(**kwargs)


def test_specs_resolve_with_their_parameters():
    assert LOSSES.resolve("clip_cov(clip_ratio=0.5, seed=3)").params == ClipCovParams(clip_ratio=0.5, seed=3)
    assert LOSSES.resolve("kl_cov(coef=0.5)").params == KlCovParams(coef=0.5)
    with pytest.raises(ConfigError, match="clip_cov"):
        LOSSES.resolve("clip_cov(clip_ratio=2)")
    assert isinstance(LOSSES, Registry) and {"clip_cov", "kl_cov", "entropy_bonus"} <= set(LOSSES.names())


@pytest.mark.parametrize("agg", AGG_MODES)
@pytest.mark.parametrize(
    "name,params", [("clip_cov", ClipCovParams(clip_ratio=0.5)), ("kl_cov", KlCovParams(kl_ratio=0.5))]
)
def test_reference_kl_keeps_its_gradient_on_every_token(name, params, agg):
    """With kl_coef > 0 the reference-KL term is added once, with its gradient everywhere (detached tokens too):
    (loss with KL) - (loss without) has the same gradient as for ppo_clip, in every aggregation."""

    def grads(loss_name, kl_coef, p=None):
        inp = batch(old_shift=DELTA)
        inp.ref_logprobs = inp.logprobs.detach() - 0.2
        return grad_of(loss_name, inp, AlgorithmConfig(kl_coef=kl_coef, loss_agg=agg), p)[1]

    kl_part = grads(name, 0.1, params) - grads(name, 0.0, params)
    assert torch.allclose(kl_part, grads("ppo_clip", 0.1) - grads("ppo_clip", 0.0), atol=1e-7)
    assert (kl_part[torch.tensor(MASK) > 0] != 0).all()


def test_loss_input_is_not_mutated():
    inp = batch(old_shift=DELTA)
    before = dataclasses.replace(inp)
    LOSSES.get("clip_cov")(inp, AlgorithmConfig(), params=ClipCovParams(clip_ratio=0.5))
    LOSSES.get("kl_cov")(inp, AlgorithmConfig(), params=KlCovParams(kl_ratio=0.5))
    assert inp.logprobs is before.logprobs and inp.logprobs.requires_grad


@pytest.mark.parametrize(
    "spec,extra,keys",
    [
        ("clip_cov", [], ["loss/clip_cov_frac", "loss/cov_mean"]),
        ("kl_cov", ["algorithm.ppo_epochs=2"], ["loss/kl_cov_frac", "loss/cov_mean"]),
        ("entropy_bonus", [], ["loss/entropy"]),
    ],
)
def test_tiny_training_run_logs_the_new_metrics(tmp_path, spec, extra, keys):
    from ascent.app.pipeline import prepare
    from ascent.config import load_config
    from ascent.rollout import make_engine
    from ascent.trainer.rl import RLParts, RLTrainer

    overrides = [f"algorithm.loss={spec}", "train.steps=2", "train.prompts_per_step=4", "rollout.samples_per_prompt=4"]
    cfg = load_config("default", TINY + overrides + extra + [f"output_dir={tmp_path}"])
    run, policy = prepare(cfg, Path(cfg.output_dir) / cfg.name, {})
    engine = make_engine(cfg.rollout.backend, precision=cfg.rollout.precision)
    trainer = RLTrainer(cfg, RLParts(policy, run.task.train, run.encoder, engine, run.rewards, run.settings))
    for _ in range(2):
        m = trainer.step()
        assert all(k in m and math.isfinite(m[k]) for k in keys), json.dumps({k: m.get(k) for k in keys})
        assert m["loss/skipped_steps"] == 0
