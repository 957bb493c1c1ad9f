"""On-policy rollout storage: one rollout of T vector steps over E environments, and its GAE advantages.

Arrays are time-major, (T, E, ...). A truncated episode (time limit) is not a terminal state: its reward gets
gamma * V(final observation) added before GAE (the bootstrap Stable-Baselines3 also does), and its end cuts
the recursion like a terminal one.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ascent.algorithms.gae import gae_recursion


@dataclass
class Rollout:
    """Preallocated tensors of one rollout (T: steps per environment, E: environments)."""

    obs: torch.Tensor
    """(T, E, D) observations the actions were taken in."""
    actions: torch.Tensor
    """(T, E) integer actions or (T, E, A) continuous ones (before clipping to the bounds)."""
    log_probs: torch.Tensor
    """(T, E) log pi_old(a|s) at sampling time."""
    values: torch.Tensor
    """(T, E) V(s) at sampling time."""
    rewards: torch.Tensor
    """(T, E) rewards (plus gamma * V(final obs) where the time limit cut the episode)."""
    dones: torch.Tensor
    """(T, E) 1.0 where the episode ended at this step (terminated or truncated)."""

    @classmethod
    def empty(cls, T: int, E: int, obs_dim: int, action_shape: tuple[int, ...], discrete: bool) -> "Rollout":
        actions = torch.zeros((T, E), dtype=torch.long) if discrete else torch.zeros((T, E, *action_shape))
        zeros = [torch.zeros(T, E) for _ in range(4)]
        return cls(torch.zeros(T, E, obs_dim), actions, *zeros)

    def advantages(self, last_values: torch.Tensor, gamma: float, lam: float) -> tuple[torch.Tensor, torch.Tensor]:
        """(advantages, returns), each (T, E): GAE(gamma, lambda) bootstrapped with V(s_T) = `last_values` (E,)."""
        next_values = torch.cat([self.values[1:], last_values[None]])  # (T, E): V(s_{t+1})
        adv = gae_recursion(self.rewards, self.values, next_values, 1.0 - self.dones, gamma, lam)
        return adv, adv + self.values
