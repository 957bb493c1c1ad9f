"""A replay buffer for off-policy algorithms (DQN, SAC): a ring of numpy arrays, uniform sampling with
replacement from a numpy generator the algorithm owns (so a resumed run samples the same batches)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch


@dataclass
class Batch:
    """A sampled mini-batch (B transitions) as float tensors (actions long for discrete ones)."""

    obs: torch.Tensor
    """(B, D)"""
    actions: torch.Tensor
    """(B,) long or (B, A) float"""
    rewards: torch.Tensor
    """(B,)"""
    next_obs: torch.Tensor
    """(B, D): the observation after the action (the episode's last one where it ended)."""
    terminated: torch.Tensor
    """(B,) 1.0 where the next state is terminal (no bootstrap); a time-limit cut is not terminal."""


class ReplayBuffer:
    """The last `capacity` transitions; once full, the oldest is overwritten first.

    >>> buf = ReplayBuffer(3, obs_dim=1, action_shape=(), discrete=True)
    >>> for i in range(5):
    ...     buf.add(np.array([[i]], np.float32), np.array([i]), np.array([float(i)]), np.array([[i + 1]], np.float32),
    ...             np.array([False]))
    >>> len(buf), sorted(buf.rewards[: len(buf)].tolist())
    (3, [2.0, 3.0, 4.0])
    """

    def __init__(self, capacity: int, obs_dim: int, action_shape: tuple[int, ...], discrete: bool) -> None:
        self.capacity, self.pos, self.full = capacity, 0, False
        self.obs = np.zeros((capacity, obs_dim), np.float32)
        self.next_obs = np.zeros((capacity, obs_dim), np.float32)
        self.actions = np.zeros((capacity, *action_shape), np.int64 if discrete else np.float32)
        self.rewards = np.zeros(capacity, np.float32)
        self.terminated = np.zeros(capacity, np.float32)

    def __len__(self) -> int:
        return self.capacity if self.full else self.pos

    def add(self, obs, actions, rewards, next_obs, terminated) -> None:
        """Append one vector step: arrays with a leading dimension E (one transition per environment)."""
        for i in range(len(rewards)):
            p = self.pos
            self.obs[p], self.next_obs[p], self.actions[p] = obs[i], next_obs[i], actions[i]
            self.rewards[p], self.terminated[p] = rewards[i], terminated[i]
            self.pos = (p + 1) % self.capacity
            self.full = self.full or self.pos == 0

    def sample(self, batch_size: int, rng: np.random.Generator) -> Batch:
        """`batch_size` transitions drawn uniformly with replacement."""
        idx = rng.integers(0, len(self), size=batch_size)
        return Batch(
            torch.from_numpy(self.obs[idx]),
            torch.from_numpy(self.actions[idx]),
            torch.from_numpy(self.rewards[idx]),
            torch.from_numpy(self.next_obs[idx]),
            torch.from_numpy(self.terminated[idx]),
        )

    def state_dict(self) -> dict[str, Any]:
        n = len(self)
        return {
            "pos": self.pos,
            "full": self.full,
            **{k: getattr(self, k)[:n].copy() for k in ("obs", "next_obs", "actions", "rewards", "terminated")},
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        n = len(state["rewards"])
        if n > self.capacity:
            raise ValueError(
                f"the checkpoint's replay buffer holds {n} transitions, more than capacity {self.capacity}"
            )
        self.pos, self.full = state["pos"], state["full"]
        for key in ("obs", "next_obs", "actions", "rewards", "terminated"):
            getattr(self, key)[:n] = state[key]
