"""The `co_loss` registry: how a batch of sampled solutions becomes a policy-gradient loss.

One signature for every entry: `fn(sol: Solutions, params) -> (loss, metrics)`, with `sol` holding S sampled
solutions of each of B instances (`ascent.co.decoding.Solutions`: rewards (B, S), log-likelihoods (B, S) with their
graph). `ascent list co_losses --params` prints them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import torch

from ascent.co.decoding import Solutions
from ascent.papers import POMO, POPPY
from ascent.registry import Registry

CO_LOSSES: Registry = Registry("co loss")
"""Policy-gradient losses over (B, S) sampled routing solutions: name -> fn(sol, params) -> (loss, metrics)."""


@dataclass(frozen=True)
class POMOParams:
    """POMO's REINFORCE with the shared multi-start baseline."""

    normalize: bool = False
    """Divide each instance's advantages by their standard deviation over the S solutions (not in POMO; off)."""


@CO_LOSSES.register(
    "pomo",
    params=POMOParams,
    paper=POMO,
    fidelity="faithful",
    departures=("optional per-instance advantage normalisation (`normalize`, off by default; not in POMO)",),
)
def pomo(sol: Solutions, params: POMOParams = POMOParams()) -> tuple[torch.Tensor, dict[str, float]]:
    """REINFORCE with POMO's shared baseline (Kwon et al. 2020, arXiv:2010.16011, equation 3): for S solutions of an
    instance, `A_s = R_s - mean_s' R_s'` and `loss = -mean_{b,s} A_s * log p(tau_s)`; the baseline is the mean
    return of the instance's own S solutions (with forced distinct first nodes), so no critic and no baseline policy."""
    B, S = sol.reward.shape
    reward = sol.reward.detach().view(B, sol.agents, S // sol.agents)  # (B, K, M): each agent its own baseline
    adv = reward - reward.mean(dim=-1, keepdim=True)
    if params.normalize:
        adv = adv / (reward.std(dim=-1, keepdim=True) + 1e-8)
    loss = -(adv.view(B, S) * sol.log_likelihood).mean()
    reward = reward.view(B, S)
    return loss, {
        "loss/policy": float(loss.detach()),
        "train/reward": float(reward.mean()),
        "train/best_reward": float(reward.max(dim=1).values.mean()),
        "train/entropy": float(sol.entropy.mean()),
    }


@dataclass(frozen=True)
class PoppyParams:
    """Poppy's population objective."""

    baseline: Literal["second", "pomo"] = "second"
    """The winner's baseline: 'second', the second-best agent's return from the same start (the paper's); 'pomo',
    the mean return of the winner's own starts (the paper's code, `poppy_with_pomo_baseline`)."""


@CO_LOSSES.register(
    "poppy",
    params=PoppyParams,
    paper=POPPY,
    fidelity="faithful",
    departures=("a population of one agent is refused (nothing to compare); use pomo",),
)
def poppy(sol: Solutions, params: PoppyParams = PoppyParams()) -> tuple[torch.Tensor, dict[str, float]]:
    """Poppy's population objective (Grinsztajn et al. 2022, arXiv:2210.03475, section 3.2): for each instance and
    start m, only the agent with the highest return k* = argmax_k R_{k,m} gets a gradient, with the second-best
    agent's return as baseline: `loss = -mean_{b,m} (R_{k*,m} - R_{k**,m}) log p_{k*}(tau_{k*,m})`; the population
    is trained to maximise its best member, so agents specialise."""
    B, S = sol.reward.shape
    K = sol.agents
    if K < 2:
        raise ValueError("poppy needs a population of at least 2 agents (co.policy=population(agents=K))")
    reward = sol.reward.detach().view(B, K, S // K)  # (B, K, M)
    ll = sol.log_likelihood.view(B, K, S // K)
    top = reward.topk(2, dim=1)  # values, indices: (B, 2, M)
    best = top.indices[:, :1]  # (B, 1, M)
    if params.baseline == "second":
        adv = top.values[:, 0] - top.values[:, 1]  # (B, M)
    else:
        adv = (reward - reward.mean(dim=-1, keepdim=True)).gather(1, best).squeeze(1)  # winner's POMO advantage
    loss = -(adv * ll.gather(1, best).squeeze(1)).mean()
    wins = torch.bincount(best.flatten(), minlength=K).float() / best.numel()
    return loss, {
        "loss/policy": float(loss.detach()),
        "train/reward": float(reward.mean()),
        "train/best_reward": float(reward.flatten(1).max(dim=1).values.mean()),
        "train/entropy": float(sol.entropy.mean()),
        "train/win_share_max": float(wins.max()),
    }
