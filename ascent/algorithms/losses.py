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
    loss = _reduce(loss_mat, inp, cfg)
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
