"""The `co_loss` registry: how a batch of sampled solutions becomes a policy-gradient loss.

One signature for every entry: `fn(sol: Solutions, params) -> (loss, metrics)`, with `sol` holding S sampled
solutions of each of B instances (`ascent.co.decoding.Solutions`: rewards (B, S), log-likelihoods (B, S) with their
graph). `ascent list co_losses --params` prints them.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ascent.co.decoding import Solutions
from ascent.registry import Registry

CO_LOSSES: Registry = Registry("co loss")
"""Policy-gradient losses over (B, S) sampled routing solutions: name -> fn(sol, params) -> (loss, metrics)."""


@dataclass(frozen=True)
class POMOParams:
    """POMO's REINFORCE with the shared multi-start baseline."""

    normalize: bool = False
    """Divide each instance's advantages by their standard deviation over the S solutions (not in POMO; off)."""


@CO_LOSSES.register("pomo", params=POMOParams)
def pomo(sol: Solutions, params: POMOParams = POMOParams()) -> tuple[torch.Tensor, dict[str, float]]:
    """REINFORCE with POMO's shared baseline (Kwon et al. 2020, arXiv:2010.16011, equation 3): for S solutions of an
    instance, `A_s = R_s - mean_s' R_s'` and `loss = -mean_{b,s} A_s * log p(tau_s)`; the baseline is the mean
    return of the instance's own S solutions (with forced distinct first nodes), so no critic and no baseline policy."""
    reward = sol.reward.detach()  # (B, S)
    adv = reward - reward.mean(dim=1, keepdim=True)
    if params.normalize:
        adv = adv / (reward.std(dim=1, keepdim=True) + 1e-8)
    loss = -(adv * sol.log_likelihood).mean()
    return loss, {
        "loss/policy": float(loss.detach()),
        "train/reward": float(reward.mean()),
        "train/best_reward": float(reward.max(dim=1).values.mean()),
        "train/entropy": float(sol.entropy.mean()),
    }
