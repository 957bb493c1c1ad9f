"""RPG's replay of step sequences and its object-centric count bonus (ascent/classic/rpg.py uses them)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

import numpy as np
import torch


@dataclass
class Starts:
    """B replayed transitions' observations, latents and episode-start flags."""

    obs: torch.Tensor
    """(B, D)"""
    z: torch.Tensor
    """(B,) long: the latent the episode was run with"""
    first: torch.Tensor
    """(B,) 1.0 where the transition is its episode's first"""


@dataclass
class Sequences:
    """B replayed H-step windows of one episode stream; steps after an episode's end are masked out."""

    obs: torch.Tensor
    """(H, B, D)"""
    actions: torch.Tensor
    """(H, B, A)"""
    rewards: torch.Tensor
    """(H, B)"""
    next_obs: torch.Tensor
    """(H, B, D)"""
    terminated: torch.Tensor
    """(H, B)"""
    mask: torch.Tensor
    """(H, B) 1.0 while step t is still in the window's first episode"""
    z: torch.Tensor
    """(B,) long: the latent of the window's first step"""


class SequenceReplay:
    """A ring of the last `capacity` transitions of one environment, in the order they happened.

    >>> buf = SequenceReplay(4, obs_dim=1, action_dim=1)
    >>> for t in range(6):
    ...     buf.add(np.array([t]), np.array([0.0]), float(t), np.array([t + 1]), False, t == 3, 0, t == 4)
    >>> seq = buf.sample_sequences(8, 2, np.random.default_rng(0))
    >>> sorted({(int(o), float(m)) for o, m in zip(seq.obs[0, :, 0], seq.mask[1])})
    [(2, 1.0), (3, 0.0), (4, 1.0)]
    """

    def __init__(self, capacity: int, obs_dim: int, action_dim: int) -> None:
        self.capacity, self.pos, self.size = capacity, 0, 0
        self.arrays = {
            "obs": np.zeros((capacity, obs_dim), np.float32),
            "actions": np.zeros((capacity, action_dim), np.float32),
            "rewards": np.zeros(capacity, np.float32),
            "next_obs": np.zeros((capacity, obs_dim), np.float32),
            "terminated": np.zeros(capacity, np.float32),
            "done": np.zeros(capacity, np.float32),
            "z": np.zeros(capacity, np.int64),
            "first": np.zeros(capacity, np.float32),
        }

    def add(self, obs, action, reward, next_obs, terminated, done, z, first) -> None:  # noqa: ANN001
        for key, value in zip(self.arrays, (obs, action, reward, next_obs, terminated, done, z, first)):
            self.arrays[key][self.pos] = value
        self.pos = (self.pos + 1) % self.capacity
        self.size = min(self.size + 1, self.capacity)

    def sample(self, batch: int, rng: np.random.Generator, starts: bool = False) -> Optional[Starts]:
        """B transitions uniformly (with `starts`: among episode starts only; None when there is none yet)."""
        if starts:
            pool = np.flatnonzero(self.arrays["first"][: self.size])
            if len(pool) == 0:
                return None
            idx = pool[rng.integers(0, len(pool), batch)]
        else:
            idx = rng.integers(0, self.size, batch)
        a = self.arrays
        return Starts(torch.from_numpy(a["obs"][idx]), torch.from_numpy(a["z"][idx]), torch.from_numpy(a["first"][idx]))

    def sample_sequences(self, batch: int, horizon: int, rng: np.random.Generator) -> Sequences:
        """B windows of `horizon` consecutive transitions (never across the ring's write position)."""
        oldest = self.pos if self.size == self.capacity else 0
        start = rng.integers(0, self.size - horizon + 1, batch)
        idx = (oldest + start[None, :] + np.arange(horizon)[:, None]) % self.capacity  # (H, B)
        a = self.arrays
        alive = np.cumprod(1.0 - a["done"][idx], axis=0)  # (H, B): 0 from the step after an episode's end
        mask = np.concatenate([np.ones((1, batch)), alive[:-1]], axis=0).astype(np.float32)
        t = torch.from_numpy
        return Sequences(
            t(a["obs"][idx]),
            t(a["actions"][idx]),
            t(a["rewards"][idx]),
            t(a["next_obs"][idx]),
            t(a["terminated"][idx]),
            t(mask),
            t(a["z"][idx[0]]),
        )

    def state_dict(self) -> dict[str, Any]:
        return {"arrays": {k: v[: self.size].copy() for k, v in self.arrays.items()}, "pos": self.pos}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        for k, v in state["arrays"].items():
            self.arrays[k][: len(v)] = v
        self.size, self.pos = len(state["arrays"]["obs"]), state["pos"]


class CountBonus:
    """N(cell): visits of each grid cell (edge `cell`) of the object's coordinates `dims`, hashed into 2^20 bins;
    bonus(o) = 1 / sqrt(max(N(cell(o)), 1)).

    >>> cb = CountBonus([0, 1], 0.5)
    >>> for o in ([0.1, 0.1, 9.0], [0.2, 0.3, 0.0], [0.2, 0.3, 5.0], [0.2, 0.3, 1.0]):
    ...     cb.add(np.array(o))
    >>> cb.bonus(torch.tensor([[0.0, 0.0, 0.0], [3.0, 3.0, 0.0]])).tolist()
    [0.5, 1.0]
    """

    BINS = 1 << 20

    def __init__(self, dims: list[int], cell: float) -> None:
        self.dims, self.cell = dims, cell
        self.counts = np.zeros(self.BINS, np.int64)
        self.primes = np.array([73856093, 19349663, 83492791, 2654435761, 805306457, 3674653429])[: len(dims)]

    def keys(self, obs: np.ndarray) -> np.ndarray:
        if len(self.dims) > len(self.primes):
            raise ValueError(f"CountBonus hashes at most {len(self.primes)} coordinates, got {len(self.dims)}")
        cells = np.floor(obs[..., self.dims] / self.cell).astype(np.int64)
        return np.bitwise_xor.reduce(cells * self.primes, axis=-1) % self.BINS

    def add(self, obs: np.ndarray) -> None:
        self.counts[self.keys(obs)] += 1

    def bonus(self, obs: torch.Tensor) -> torch.Tensor:
        """(..., D) observations -> (...) bonuses."""
        n = self.counts[self.keys(obs.numpy())]
        return torch.from_numpy(1.0 / np.sqrt(np.maximum(n, 1))).float()

    def state_dict(self) -> dict[str, Any]:
        nz = np.flatnonzero(self.counts)
        return {"index": nz, "counts": self.counts[nz]}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.counts[:] = 0
        self.counts[state["index"]] = state["counts"]
