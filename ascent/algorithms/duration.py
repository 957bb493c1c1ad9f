"""Duration-aware advantages for actions of variable execution time (MLE-agent RL, Yang, He-Yueya & Liang 2025,
arXiv:2509.01684).

In asynchronous RL the learner trains on episodes in the order they finish. An action that takes Δt seconds
finishes, per unit of wall-clock time, 1/Δt times as often, so an action a enters the batches with frequency
proportional to π(a) / Δt(a) instead of π(a): the policy gradient is tilted toward fast actions, and slow,
high-reward ones (training a large model) are drowned out. The paper's duration-aware update scales each
sample's gradient by its duration, which undoes the tilt: E_batch[Δt · A · ∇log π] ∝ E_π[A · ∇log π].

`duration_aware` does that on the advantage: with d_i = Δt_i ** power (`extras["durations"]`, (N,) simulated or
measured seconds of each episode's actions; the agent collector sums the environment's `info["duration"]`),

    w_i = d_i / mean_{j in g} d_j,   b_g = sum_{j in g} d_j r_j / sum_{j in g} d_j,   A_i = w_i (r_i - b_g)

over the valid samples j of each sample's group g. b_g is the duration-weighted mean, the same correction
applied to the baseline, so sum_g w_i (r_i - b_g) = 0 exactly; power = 0 is `dr_grpo` (A = r - mean_g r).
Use it where batches are formed by completion (`ascent.runtime` asynchronous collection, benchmarks/
agent_duration.py); in a synchronous batch every episode is waited for and the weighting would over-weigh
slow actions instead.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ascent import papers
from ascent.algorithms.advantages import ADVANTAGES, broadcast
from ascent.algorithms.types import AdvantageInput

DURATIONS_KEY = "durations"
"""AdvantageInput.extras key: (N,) float, the seconds each sample's episode spent executing actions."""


@dataclass(frozen=True)
class DurationParams:
    """Duration-aware advantage (MLE-agent RL, Yang, He-Yueya & Liang 2025, arXiv:2509.01684)."""

    power: float = 1.0
    """Weight each sample by duration ** power (1: the paper's Δt weighting; 0: plain dr_grpo); >= 0."""
    min_seconds: float = 1e-3
    """Durations are clamped below at this (an action reported as taking 0 s still gets a small weight); > 0."""

    def __post_init__(self) -> None:
        if not self.power >= 0:
            raise ValueError(f"power must be >= 0, got {self.power}")
        if not self.min_seconds > 0:
            raise ValueError(f"min_seconds must be > 0, got {self.min_seconds}")


@ADVANTAGES.register(
    "duration_aware",
    params=DurationParams,
    paper=papers.MLE_AGENT_RL,
    fidelity="reduced",
    departures=(
        (
            "the weight enters the advantage (A_i = w_i (r_i - b_g)) rather than a separately scaled gradient; with "
            "the linear pg / clipped surrogate at ratio 1 the two are the same update"
        ),
        (
            "w_i is normalised by the group's mean duration and the baseline is the duration-weighted group mean: "
            "ascent's reading (the normalisation and the baseline are not fixed by the paper), so the step size "
            "does not grow with the seconds' unit and the weighted advantages sum to zero"
        ),
        (
            "measured on the simulated `experiment_world` with a softmax policy over plans and an event-driven "
            "asynchronous learner (benchmarks/agent_duration.py), not on MLE-bench with Qwen2.5-3B"
        ),
    ),
)
def duration_aware(inp: AdvantageInput, cfg, params: DurationParams = DurationParams()) -> torch.Tensor:
    """Duration-aware advantage (Yang, He-Yueya & Liang 2025, arXiv:2509.01684): A_i = w_i (r_i - b_g),
    w_i = d_i / mean_g d, b_g = sum_g d r / sum_g d, d_i = max(Δt_i, min_seconds) ** power from
    extras['durations'] (N,); invalid samples get 0 and are left out of every group statistic."""
    dur = inp.extras.get(DURATIONS_KEY)
    n = inp.rewards.shape[0]
    if dur is None:
        raise ValueError(
            "advantage estimator 'duration_aware' needs inp.extras['durations'] (N,) seconds per episode "
            f"(an environment that reports info['duration']); got extras {sorted(inp.extras)}"
        )
    if tuple(dur.shape) != (n,):
        raise ValueError(f"advantage estimator 'duration_aware': extras['durations'] must be ({n},), got {dur.shape}")
    valid = inp.valid & torch.isfinite(dur)
    d = dur.to(inp.rewards.dtype).clamp(min=params.min_seconds).pow(params.power)  # (N,)
    d = torch.where(valid, d, torch.zeros_like(d))
    r = torch.where(valid, inp.rewards, torch.zeros_like(inp.rewards))  # (N,) NaN-free
    groups = int(inp.group_index.max()) + 1 if n else 0
    zeros = torch.zeros(groups, dtype=r.dtype)
    count = zeros.index_add(0, inp.group_index, valid.to(r.dtype))[inp.group_index]  # (N,)
    d_sum = zeros.index_add(0, inp.group_index, d)[inp.group_index]  # (N,)
    dr_sum = zeros.index_add(0, inp.group_index, d * r)[inp.group_index]  # (N,)
    safe = d_sum.clamp(min=torch.finfo(r.dtype).tiny)
    baseline = dr_sum / safe  # (N,) duration-weighted group mean
    weight = d * count / safe  # (N,) d_i / mean_g d
    adv = torch.where(valid & (count > 1), weight * (r - baseline), torch.zeros_like(r))
    return broadcast(adv, AdvantageInput(inp.rewards, valid, inp.group_index, inp.mask, inp.extras))


duration_aware.requires = frozenset({DURATIONS_KEY})
