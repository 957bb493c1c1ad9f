"""Policy losses. ONE signature: `fn(inp: LossInput, cfg: AlgorithmConfig) -> (loss, metrics)`.

Each loss builds a (N, T) loss matrix and reduces it with `aggregate` (the only reduction), then adds the
optional KL penalty to the reference policy. Metrics use the `loss/` namespace.
"""

from __future__ import annotations

import torch

from ascent.algorithms.aggregate import aggregate, masked_mean
from ascent.algorithms.kl import kl_penalty
from ascent.algorithms.types import LossInput
from ascent.registry import Registry

LOSSES: Registry = Registry("policy loss")


def _reduce(loss_mat: torch.Tensor, inp: LossInput, cfg) -> torch.Tensor:
    return aggregate(loss_mat, inp.mask, cfg.loss_agg, inp.num_tokens, inp.num_seqs, inp.norm_length)


def tis_weight(inp: LossInput, cfg) -> torch.Tensor:
    """Truncated importance sampling (Yao et al. 2025, "Your efficient RL framework secretly brings you
    off-policy RL training", #63/#73): w_t = min(pi_old(t) / pi_sampler(t), C) with C = algorithm.tis_cap,
    correcting for the gap between the learner's and the rollout engine's log-probs. 1 when off."""
    if cfg.tis_cap is None or inp.sampled_logprobs is None:
        return torch.ones_like(inp.old_logprobs)
    gap = (inp.old_logprobs - inp.sampled_logprobs) * inp.mask  # (N, T)
    return torch.exp(gap.clamp(max=20.0)).clamp(max=cfg.tis_cap).detach()


def with_kl(loss: torch.Tensor, inp: LossInput, cfg, metrics: dict[str, float]) -> tuple[torch.Tensor, dict[str, float]]:
    """Add kl_coef * aggregated KL(pi || pi_ref) when a reference is present."""
    if cfg.kl_coef > 0 and inp.ref_logprobs is not None:
        kl = kl_penalty(inp.logprobs, inp.ref_logprobs, cfg.kl_estimator)  # (N, T)
        kl_term = _reduce(kl, inp, cfg)
        metrics["loss/kl"] = float(masked_mean(kl.detach(), inp.mask))
        loss = loss + cfg.kl_coef * kl_term
    return loss, metrics


@LOSSES.register("ppo_clip")
def ppo_clip(inp: LossInput, cfg) -> tuple[torch.Tensor, dict[str, float]]:
    """PPO clipped surrogate (Schulman et al. 2017) with DAPO's decoupled clip and optional dual clip.

    rho = exp(log pi - log pi_old);  l = max(-A rho, -A clip(rho, 1 - eps_low, 1 + eps_high)).
    Dual clip (Ye et al. 2020), for A < 0: l = min(l, -A c).
    """
    log_ratio = (inp.logprobs - inp.old_logprobs).clamp(-20.0, 20.0)  # (N, T)
    ratio = torch.exp(log_ratio)
    adv = inp.advantages
    unclipped = -adv * ratio
    clipped = -adv * ratio.clamp(1.0 - cfg.clip_low, 1.0 + cfg.clip_high)
    loss_mat = torch.maximum(unclipped, clipped)  # (N, T)
    if cfg.dual_clip is not None:
        loss_mat = torch.where(adv < 0, torch.minimum(loss_mat, -adv * cfg.dual_clip), loss_mat)
    loss = _reduce(loss_mat * tis_weight(inp, cfg), inp, cfg)
    with torch.no_grad():
        metrics = {
            "loss/policy": float(loss),
            "loss/clip_frac": float(masked_mean((clipped > unclipped).float(), inp.mask)),
            "loss/ratio_mean": float(masked_mean(ratio, inp.mask)),
            "loss/approx_kl_old": float(masked_mean(0.5 * log_ratio.pow(2), inp.mask)),
        }
    return with_kl(loss, inp, cfg, metrics)


@LOSSES.register("pg")
def policy_gradient(inp: LossInput, cfg) -> tuple[torch.Tensor, dict[str, float]]:
    """Plain policy gradient (REINFORCE, Williams 1992): l = -A log pi(token); no ratio, no clipping."""
    loss = _reduce(-inp.advantages * inp.logprobs, inp, cfg)
    return with_kl(loss, inp, cfg, {"loss/policy": float(loss.detach())})


def sequence_log_ratio(inp: LossInput) -> torch.Tensor:
    """(N,) mean over each sequence's tokens of log pi - log pi_old (GSPO's length-normalised log ratio)."""
    diff = (inp.logprobs - inp.old_logprobs) * inp.mask  # (N, T)
    return diff.sum(-1) / inp.mask.sum(-1).clamp(min=1.0)


@LOSSES.register("gspo")
def gspo(inp: LossInput, cfg) -> tuple[torch.Tensor, dict[str, float]]:
    """GSPO: sequence-level ratio s_i = exp(mean_t log pi/pi_old) clipped per sequence (Zheng et al. 2025).

    Token form (GSPO-token): s_it = sg(s_i) * pi_t / sg(pi_t), equal to s_i in value, so every token of a
    sequence shares the sequence's clip decision; l_it = max(-A s_it, -A clip(s_it, 1 - eps_low, 1 + eps_high)).
    With loss_agg=seq-mean-token-mean this is exactly the paper's objective (the gradient of s_i is
    s_i / |y_i| sum_t grad log pi_t). The paper uses much smaller clip ranges than PPO (e.g. 3e-4 / 4e-4).
    """
    seq = sequence_log_ratio(inp).clamp(-20.0, 20.0)  # (N,)
    ratio = torch.exp(seq.detach())[:, None] * torch.exp(inp.logprobs - inp.logprobs.detach())  # (N, T)
    adv = inp.advantages
    unclipped = -adv * ratio
    clipped = -adv * ratio.clamp(1.0 - cfg.clip_low, 1.0 + cfg.clip_high)
    loss = _reduce(torch.maximum(unclipped, clipped) * tis_weight(inp, cfg), inp, cfg)
    with torch.no_grad():
        metrics = {"loss/policy": float(loss), "loss/clip_frac": float(masked_mean((clipped > unclipped).float(), inp.mask)), "loss/seq_ratio_mean": float(torch.exp(seq).mean())}
    return with_kl(loss, inp, cfg, metrics)


@LOSSES.register("cispo")
def cispo(inp: LossInput, cfg) -> tuple[torch.Tensor, dict[str, float]]:
    """CISPO: l_it = -sg(clip(rho_it, 1 - eps_low, 1 + eps_high)) * A_it * log pi_it (MiniMax-M1, 2025).

    The importance weight is clipped and DETACHED, then multiplies the log-prob (REINFORCE form), so no
    token's gradient is ever zeroed by clipping - unlike PPO, where a clipped token contributes nothing.
    (The other reading, clipped ratio times advantage without the log-prob, has zero gradient; it is not
    what the paper means.) MiniMax-M1 effectively clips only above: set clip_low large (e.g. 1.0) for that.
    """
    log_ratio = (inp.logprobs - inp.old_logprobs).clamp(-20.0, 20.0).detach()
    weight = torch.exp(log_ratio).clamp(1.0 - cfg.clip_low, 1.0 + cfg.clip_high)  # (N, T), no grad
    loss = _reduce(-weight * inp.advantages * inp.logprobs * tis_weight(inp, cfg), inp, cfg)
    with torch.no_grad():
        raw = torch.exp(log_ratio)
        metrics = {"loss/policy": float(loss), "loss/clip_frac": float(masked_mean((raw != weight).float(), inp.mask))}
    return with_kl(loss, inp, cfg, metrics)
