"""Running observation and reward normalisation (the `VecNormalize` scheme of Stable-Baselines3), with its
statistics in the checkpoint so a resumed run normalises exactly as the interrupted one did.

Observations: o' = clip((o - mean) / sqrt(var + eps), -clip, clip), mean and var running over every observation
seen in training. Rewards: r' = clip(r / sqrt(var_R + eps), -clip, clip), var_R the running variance of the
discounted return R_t = gamma R_{t-1} + r_t of each environment (reset to 0 at an episode's end).
"""

from __future__ import annotations

from typing import Any

import numpy as np


class RunningMeanStd:
    """Mean and variance of a stream of batches, merged with the parallel formula (Chan et al. 1979).

    >>> rms = RunningMeanStd(shape=(), count=0.0)
    >>> rms.update(np.array([1.0, 2.0])); rms.update(np.array([3.0, 4.0, 5.0]))
    >>> float(rms.mean), float(rms.var), float(rms.count)
    (3.0, 2.0, 5.0)
    """

    def __init__(self, shape: tuple[int, ...], count: float = 1e-4) -> None:
        self.mean = np.zeros(shape, np.float64)
        self.var = np.ones(shape, np.float64)
        self.count = count

    def update(self, batch: np.ndarray) -> None:
        """Merge a batch (B, *shape)."""
        b_mean, b_var, b_count = batch.mean(axis=0), batch.var(axis=0), batch.shape[0]
        delta, total = b_mean - self.mean, self.count + b_count
        m2 = self.var * self.count + b_var * b_count + delta**2 * self.count * b_count / total
        self.mean, self.var, self.count = self.mean + delta * b_count / total, m2 / total, total

    def state_dict(self) -> dict[str, Any]:
        return {"mean": self.mean.copy(), "var": self.var.copy(), "count": self.count}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.mean, self.var, self.count = state["mean"].copy(), state["var"].copy(), state["count"]


class ObsNormalizer:
    """o' = clip((o - mean) / sqrt(var + eps), -clip, clip) with running statistics."""

    def __init__(self, shape: tuple[int, ...], clip: float = 10.0, eps: float = 1e-8) -> None:
        self.rms, self.clip, self.eps = RunningMeanStd(shape), clip, eps

    def __call__(self, obs: np.ndarray, update: bool) -> np.ndarray:
        """Normalise (B, obs_dim) observations, first merging them into the statistics when `update`."""
        if update:
            self.rms.update(obs)
        out = (obs - self.rms.mean) / np.sqrt(self.rms.var + self.eps)
        return np.clip(out, -self.clip, self.clip).astype(np.float32)

    def state_dict(self) -> dict[str, Any]:
        return self.rms.state_dict()

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.rms.load_state_dict(state)


class RewardNormalizer:
    """r' = clip(r / sqrt(var_R + eps), -clip, clip), var_R the running variance of discounted returns."""

    def __init__(self, num_envs: int, gamma: float, clip: float = 10.0, eps: float = 1e-8) -> None:
        self.rms, self.gamma, self.clip, self.eps = RunningMeanStd(()), gamma, clip, eps
        self.returns = np.zeros(num_envs, np.float64)

    def __call__(self, rewards: np.ndarray, done: np.ndarray) -> np.ndarray:
        """Scale one vector step's rewards (E,); `done` (E,) ends those environments' returns."""
        self.returns = self.returns * self.gamma + rewards
        self.rms.update(self.returns)
        out = np.clip(rewards / np.sqrt(self.rms.var + self.eps), -self.clip, self.clip)
        self.returns[done] = 0.0
        return out.astype(np.float32)

    def state_dict(self) -> dict[str, Any]:
        return {"rms": self.rms.state_dict(), "returns": self.returns.copy()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.rms.load_state_dict(state["rms"])
        self.returns = state["returns"].copy()
