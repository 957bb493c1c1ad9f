"""CM-GRPO: GRPO on a consistency model's sampling steps (RAVEN, Lu, Zuo & Deng 2026, "RAVEN: Real-time
Autoregressive Video Extrapolation with Consistency-model GRPO", arXiv:2605.15190).

A multistep consistency sampler alternates a denoising jump and a re-noising: from the state s_{k−1} at noise
level σ_{k−1} it draws s_k = f_θ(s_{k−1}, σ_{k−1}) + std_k z, std_k = √(τ_k² − σ_min²). CM-GRPO reads each such
step as a conditional Gaussian transition, the policy's action,

    π_θ(s_k | s_{k−1}) = N(s_k; f_θ(s_{k−1}, σ_{k−1}), std_k² I)

and applies GRPO to that kernel's likelihood directly — no Euler–Maruyama auxiliary SDE, as flow-model RL
(Flow-GRPO) needs for a deterministic ODE sampler. The output x̂ = f_θ(s_K, τ_K) gets a reward r(x̂); G samples form
a group, A_i = (r_i − mean_g r) / (std_g r + eps), and the loss per step k is PPO's clipped surrogate

    L = − mean_{i,k} min(ρ_{ik} A_i, clip(ρ_{ik}, 1 − ε, 1 + ε) A_i),
    ρ_{ik} = π_θ(s_k | s_{k−1}) / π_old(s_k | s_{k−1})

plus an optional KL to the untuned model, closed form for two Gaussians of one variance:
KL_k = ‖f_θ(s_{k−1}) − f_ref(s_{k−1})‖² / (2 std_k²).
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass
from typing import Callable, Optional

import torch

from ascent import papers
from ascent.generative.consistency import SIGMA_MIN, ConsistencyModel
from ascent.registry import Registry

GENERATIVE: Registry = Registry("generative")
Reward = Callable[[torch.Tensor], torch.Tensor]  # (n, 2) points -> (n,) rewards


@dataclass(frozen=True)
class CMGRPOParams:
    """CM-GRPO fine-tuning of a consistency model."""

    steps: int = 60
    """Policy updates (each on a fresh batch of groups)."""
    groups: int = 16
    """Groups per batch (the toy model is unconditional: a group is G samples from one start distribution)."""
    group_size: int = 16
    """Samples per group (G)."""
    epochs: int = 2
    """Optimisation passes over each batch (the clipped ratio bounds how far they move)."""
    lr: float = 3e-4
    """Adam learning rate."""
    clip: float = 0.2
    """PPO clip range ε."""
    kl_coef: float = 0.0
    """Weight of the closed-form KL to the untuned model per step."""
    sigma_max: float = 4.0
    """Noise level of the first state."""
    taus: tuple[float, ...] = (1.0, 0.3)
    """Re-noising levels of the stochastic steps (each one a Gaussian transition, the policy's action)."""

    def __post_init__(self) -> None:
        if min(self.steps, self.groups, self.epochs) < 1 or self.group_size < 2:
            raise ValueError("steps, groups and epochs must be >= 1 and group_size >= 2")
        if not self.taus or any(not SIGMA_MIN < t < self.sigma_max for t in self.taus):
            raise ValueError(f"taus must be non-empty and each in ({SIGMA_MIN}, sigma_max={self.sigma_max})")
        if list(self.taus) != sorted(self.taus, reverse=True):
            raise ValueError(f"taus must decrease, got {self.taus}")


@dataclass
class Rollout:
    """A batch of sampler trajectories."""

    states: torch.Tensor
    """(K + 1, B, 2) s_0 = σ_max z, then the re-noised states s_1..s_K."""
    levels: torch.Tensor
    """(K + 1,) the noise level of each state: σ_max, τ_1, ..., τ_K."""
    stds: torch.Tensor
    """(K,) the standard deviation of each transition."""
    outputs: torch.Tensor
    """(B, 2) f(s_K, τ_K), the samples the reward scores."""


@torch.no_grad()
def rollout(model: ConsistencyModel, n: int, p: CMGRPOParams, generator: torch.Generator) -> Rollout:
    """n trajectories of the multistep sampler, keeping every stochastic state."""
    levels = torch.tensor((p.sigma_max, *p.taus))
    stds = (levels[1:] ** 2 - SIGMA_MIN**2).sqrt()
    states = [p.sigma_max * torch.randn(n, 2, generator=generator)]
    for k in range(len(p.taus)):
        mean = model(states[-1], levels[k])
        states.append(mean + stds[k] * torch.randn(n, 2, generator=generator))
    return Rollout(torch.stack(states), levels, stds, model(states[-1], levels[-1]))


def transition_logprob(model: ConsistencyModel, r: Rollout) -> tuple[torch.Tensor, torch.Tensor]:
    """((K, B) log π_θ(s_k | s_{k−1}), (K, B, 2) the means f_θ(s_{k−1}, σ_{k−1})) of a rollout's transitions."""
    k, b = r.states.shape[0] - 1, r.states.shape[1]
    prev = r.states[:-1].reshape(k * b, 2)
    means = model(prev, r.levels[:-1].repeat_interleave(b)).reshape(k, b, 2)  # (K, B, 2)
    var = (r.stds**2)[:, None]  # (K, 1)
    sq = ((r.states[1:] - means) ** 2).sum(-1)  # (K, B)
    return -sq / (2 * var) - torch.log(2 * math.pi * var), means


def group_advantages(rewards: torch.Tensor, group_size: int, eps: float = 1e-6) -> torch.Tensor:
    """(B,) (r − group mean) / (group std + eps) over consecutive groups of `group_size` (population std).

    >>> [round(a, 4) for a in group_advantages(torch.tensor([1.0, 3.0, 5.0, 5.0]), 2).tolist()]
    [-1.0, 1.0, 0.0, 0.0]
    """
    g = rewards.reshape(-1, group_size)
    mean, std = g.mean(1, keepdim=True), g.std(1, unbiased=False, keepdim=True)
    return ((g - mean) / (std + eps)).reshape(-1)


def cm_grpo_loss(
    model: ConsistencyModel,
    r: Rollout,
    old_logp: torch.Tensor,
    adv: torch.Tensor,
    p: CMGRPOParams,
    reference: Optional[ConsistencyModel] = None,
) -> tuple[torch.Tensor, dict[str, float]]:
    """(loss, metrics): PPO's clipped surrogate on every Gaussian transition, plus the KL to `reference`."""
    logp, means = transition_logprob(model, r)  # (K, B)
    ratio = (logp - old_logp).exp()
    surrogate = torch.minimum(ratio * adv, ratio.clamp(1 - p.clip, 1 + p.clip) * adv)  # (K, B)
    loss = -surrogate.mean()
    kl = torch.zeros(())
    if reference is not None and p.kl_coef > 0:
        with torch.no_grad():
            _, ref_means = transition_logprob(reference, r)
        kl = (((means - ref_means) ** 2).sum(-1) / (2 * r.stds[:, None] ** 2)).mean()
        loss = loss + p.kl_coef * kl
    clipped = ((ratio - 1).abs() > p.clip).float().mean()
    return loss, {
        "cm_grpo/loss": float(loss.detach()),
        "cm_grpo/kl": float(kl.detach()),
        "cm_grpo/clip_frac": float(clipped),
    }


@GENERATIVE.register(
    "cm_grpo",
    params=CMGRPOParams,
    paper=papers.RAVEN,
    fidelity="reduced",
    departures=(
        "a toy: an unconditional 2-D consistency model distilled from an exact mixture denoiser, not RAVEN's causal "
        "video generator; RAVEN's interleaved history repacking is not built",
        "a group is G samples of the unconditional model (no prompt); the KL to the untuned model is optional "
        "(kl_coef, default 0)",
    ),
)
def cm_grpo(
    model: ConsistencyModel, reward: Reward, p: CMGRPOParams, seed: int, kl_reference: bool = True
) -> list[dict[str, float]]:
    """CM-GRPO: GRPO on a consistency model's Gaussian sampling transitions (fine-tunes `model` in place).

    Returns one metrics dict per update."""
    g = torch.Generator().manual_seed(seed)
    reference = copy.deepcopy(model).requires_grad_(False) if kl_reference and p.kl_coef > 0 else None
    opt = torch.optim.Adam(model.parameters(), lr=p.lr)
    history = []
    for _ in range(p.steps):
        r = rollout(model, p.groups * p.group_size, p, g)
        rewards = reward(r.outputs)  # (B,)
        adv = group_advantages(rewards, p.group_size)
        with torch.no_grad():
            old_logp, _ = transition_logprob(model, r)
        for _ in range(p.epochs):
            loss, metrics = cm_grpo_loss(model, r, old_logp, adv, p, reference)
            opt.zero_grad()
            loss.backward()
            opt.step()
        history.append({**metrics, "cm_grpo/reward_mean": float(rewards.mean())})
    return history


def target_reward(target: tuple[float, float], width: float) -> Reward:
    """r(x) = exp(−‖x − target‖² / (2 width²)): a reward over 2-D points that prefers one region.

    >>> round(float(target_reward((1.0, 0.0), 1.0)(torch.tensor([[1.0, 1.0]]))[0]), 4)
    0.6065
    """
    t = torch.tensor(target)

    def reward(points: torch.Tensor) -> torch.Tensor:
        return torch.exp(-((points - t) ** 2).sum(-1) / (2 * width**2))

    return reward
