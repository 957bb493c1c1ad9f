"""Advantage estimators. ONE signature: `fn(inp: AdvantageInput, cfg: AlgorithmConfig) -> (N, T) tensor`.

Outcome estimators compute one scalar per sequence and broadcast it over the sequence's completion
tokens. Samples whose reward failed (`inp.valid` false) are left out of every group statistic and get
zero advantage.
"""

from __future__ import annotations

import torch

from ascent.algorithms.types import AdvantageInput
from ascent.registry import Registry

ADVANTAGES: Registry = Registry("advantage estimator")


def group_moments(values: torch.Tensor, group_index: torch.Tensor, valid: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Per-sample (count, mean, unbiased std) of its group's valid values; each (N,).

    Groups with one valid sample get std 0, and so do groups whose valid values are all equal: their
    mean is set to that value exactly, so r - mean is exactly 0 (float32 rounding of e.g. 0.7 would
    otherwise leave a 1e-8 std that the GRPO division blows up).
    """
    groups = int(group_index.max()) + 1 if group_index.numel() else 0
    w = valid.to(values.dtype)  # (N,)
    v = torch.where(valid, values, torch.zeros_like(values))  # (N,) NaN-free
    count = torch.zeros(groups, dtype=values.dtype).index_add_(0, group_index, w)  # (G,)
    total = torch.zeros(groups, dtype=values.dtype).index_add_(0, group_index, v)
    mean = total / count.clamp(min=1.0)
    dev = (v - mean[group_index]) * w
    sq = torch.zeros(groups, dtype=values.dtype).index_add_(0, group_index, dev * dev)
    std = torch.sqrt(sq / (count - 1.0).clamp(min=1.0))
    big = torch.finfo(values.dtype).max
    lo = torch.full((groups,), big, dtype=values.dtype).scatter_reduce(0, group_index, torch.where(valid, values, torch.full_like(values, big)), "amin")
    hi = torch.full((groups,), -big, dtype=values.dtype).scatter_reduce(0, group_index, torch.where(valid, values, torch.full_like(values, -big)), "amax")
    flat = (lo == hi) & (count > 0)
    mean = torch.where(flat, lo, mean)
    std = torch.where((count > 1) & ~flat, std, torch.zeros_like(std))
    return count[group_index], mean[group_index], std[group_index]


def broadcast(seq_adv: torch.Tensor, inp: AdvantageInput) -> torch.Tensor:
    """(N,) sequence advantages -> (N, T) on completion tokens; zero for invalid samples."""
    seq_adv = torch.where(inp.valid, seq_adv, torch.zeros_like(seq_adv))
    return seq_adv[:, None] * inp.mask


@ADVANTAGES.register("grpo")
def grpo(inp: AdvantageInput, cfg) -> torch.Tensor:
    """GRPO: A_i = (r_i - mean_g r) / (std_g r + eps), std unbiased (Shao et al. 2024, DeepSeekMath)."""
    _, mean, std = group_moments(inp.rewards, inp.group_index, inp.valid)
    return broadcast((inp.rewards - mean) / (std + cfg.std_eps), inp)


@ADVANTAGES.register("dr_grpo")
def dr_grpo(inp: AdvantageInput, cfg) -> torch.Tensor:
    """Dr. GRPO: A_i = r_i - mean_g r, no std division (Liu et al. 2025, "Understanding R1-Zero-like training")."""
    _, mean, _ = group_moments(inp.rewards, inp.group_index, inp.valid)
    return broadcast(inp.rewards - mean, inp)


@ADVANTAGES.register("rloo")
def rloo(inp: AdvantageInput, cfg) -> torch.Tensor:
    """RLOO: A_i = r_i - mean_{j != i} r_j = n/(n-1) (r_i - mean_g r) (Ahmadian et al. 2024)."""
    count, mean, _ = group_moments(inp.rewards, inp.group_index, inp.valid)
    scale = count / (count - 1.0).clamp(min=1.0)
    adv = torch.where(count > 1, scale * (inp.rewards - mean), torch.zeros_like(mean))
    return broadcast(adv, inp)


def batch_moments(values: torch.Tensor, valid: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(mean, unbiased std) of the valid values of the whole batch (std 0 when fewer than two or all equal)."""
    v = values[valid]
    if v.numel() < 2 or bool((v == v[0]).all()):
        return (v.mean() if v.numel() else torch.tensor(0.0)), torch.tensor(0.0)
    return v.mean(), v.std()


@ADVANTAGES.register("lite_ppo")
def lite_ppo(inp: AdvantageInput, cfg) -> torch.Tensor:
    """Lite PPO: A_i = (r_i - mean_g r) / (std_batch r + eps): group mean, batch std (Liu et al. 2025, "Tricks or Traps?", #21)."""
    _, mean, _ = group_moments(inp.rewards, inp.group_index, inp.valid)
    _, std = batch_moments(inp.rewards, inp.valid)
    return broadcast((inp.rewards - mean) / (std + cfg.std_eps), inp)


@ADVANTAGES.register("reinforce_pp")
def reinforce_pp(inp: AdvantageInput, cfg) -> torch.Tensor:
    """REINFORCE++: A_i = (r_i - mean_batch r) / (std_batch r + eps), global normalisation, no critic (Hu 2025)."""
    mean, std = batch_moments(inp.rewards, inp.valid)
    return broadcast((inp.rewards - mean) / (std + cfg.std_eps), inp)
