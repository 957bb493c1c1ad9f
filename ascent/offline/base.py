"""What every offline algorithm shares: the dataset of the run (`classic.dataset`), its sampling, observation
normalisation and reward scaling, and the classic `Algorithm` interface around one gradient step.

An offline algorithm is registered in the `classic` registry like an online one and runs in the same loop, run
directory and checkpoints (`ascent train RECIPE classic.dataset=DIR classic.algorithm=iql`); it never steps the
training environments (they only give the spaces), and its `steps` count gradient steps, so `classic.total_steps`,
`log_every`, `eval_every` and `checkpoint_every` are in gradient steps for it. Evaluation is the loop's: the
deterministic policy in fresh environments.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from ascent.classic.base import ClassicContext
from ascent.offline.dataset import DatasetError, Transitions, load_transitions
from ascent.typed import ConfigError

OBS_STD_EPS = 1e-3
"""Added to the dataset's observation std before dividing (TD3+BC's choice, Fujimoto & Gu 2021)."""


@dataclass
class Batch:
    """B transitions sampled from the dataset (observations normalised, rewards scaled)."""

    obs: torch.Tensor
    """(B, D)"""
    actions: torch.Tensor
    """(B, A) float, or (B,) long for discrete actions"""
    rewards: torch.Tensor
    """(B,)"""
    next_obs: torch.Tensor
    """(B, D)"""
    terminated: torch.Tensor
    """(B,) 1.0 where the next state is terminal"""


def return_scale(episode_returns: np.ndarray, multiplier: float = 1000.0) -> float:
    """multiplier / (max return - min return) over the dataset's episodes (IQL's reward scaling for locomotion,
    Kostrikov et al. 2021; 1 when every episode has the same return).

    >>> return_scale(np.array([-100.0, 400.0]))
    2.0
    """
    span = float(episode_returns.max() - episode_returns.min())
    return multiplier / span if span > 0 else 1.0


def check_hidden(hidden: list[int]) -> None:
    if not hidden or min(hidden) <= 0:
        raise ValueError(f"hidden must list positive layer widths, got {hidden}")


def check_common(p: Any) -> None:
    """The range checks every offline params class shares (lr, batch_size, gamma where it has one, hidden)."""
    if not p.lr > 0 or p.batch_size <= 0:
        raise ValueError(f"lr and batch_size must be > 0, got {p.lr}, {p.batch_size}")
    if not 0.0 < getattr(p, "gamma", 1.0) <= 1.0:
        raise ValueError(f"gamma must be in (0, 1], got {p.gamma}")
    check_hidden(p.hidden)


def cosine_lr(step: int, total: int) -> float:
    """The factor of a cosine decay from 1 to 0 over `total` steps (the IQL actor's schedule).

    >>> cosine_lr(0, 10), cosine_lr(5, 10), cosine_lr(10, 10)
    (1.0, 0.5, 0.0)
    """
    return 0.5 * (1.0 + math.cos(math.pi * min(step, total) / max(total, 1)))


class OfflineAlgorithm:
    """The dataset, sampling and normalisation; subclasses define `update(batch, want_metrics)`, `policy(obs,
    deterministic)` on normalised observations, `modules()` and `optimizers()`.

    `name` is the registered name (error messages); `discrete` which action spaces the subclass handles.
    """

    name = "offline"
    step_unit = "gradient steps"  # what `steps` counts (run summaries, curves and messages say so)

    def __init__(self, ctx: ClassicContext, params: Any, reward_scale: float | str = 1.0) -> None:
        self.ctx, self.p, self.steps, self.steps_per_iteration = ctx, params, 0, 1
        envs = ctx.envs
        if envs.obs_norm is not None:
            raise ConfigError(
                f"classic.normalize_obs: {self.name} normalises observations by the dataset's statistics itself "
                "(its normalize_obs parameter); set classic.normalize_obs=false"
            )
        self.data = dataset_of(ctx, self.name)
        d = self.data
        self.discrete = d.discrete
        self.obs_dim, self.action_dim = envs.obs_dim, (1 if d.discrete else d.actions.shape[1])
        if not d.discrete:
            self.low, self.high = envs.low, envs.high
        mean, std = d.obs.mean(0), d.obs.std(0) + OBS_STD_EPS
        if not getattr(params, "normalize_obs", True):
            mean, std = np.zeros_like(mean), np.ones_like(std)
        self.obs_mean, self.obs_std = mean.astype(np.float32), std.astype(np.float32)
        scale = return_scale(d.episode_returns) if reward_scale == "return" else float(reward_scale)
        self.reward_scale = scale
        self.t_obs = torch.from_numpy((d.obs - self.obs_mean) / self.obs_std).to(ctx.device)
        self.t_next_obs = torch.from_numpy((d.next_obs - self.obs_mean) / self.obs_std).to(ctx.device)
        self.t_actions = torch.from_numpy(d.actions).to(ctx.device)
        self.t_rewards = torch.from_numpy(d.rewards * np.float32(scale)).to(ctx.device)
        self.t_terminated = torch.from_numpy(d.terminated).to(ctx.device)
        self.rng = np.random.default_rng(ctx.seed)

    def sample(self, batch_size: int) -> Batch:
        """`batch_size` transitions drawn uniformly with replacement (the algorithm's numpy generator)."""
        idx = torch.from_numpy(self.rng.integers(0, len(self.data), size=batch_size))
        return Batch(
            self.t_obs[idx], self.t_actions[idx], self.t_rewards[idx], self.t_next_obs[idx], self.t_terminated[idx]
        )

    def iteration(self, want_metrics: bool) -> dict[str, float]:
        """One gradient step on one mini-batch."""
        metrics = self.update(self.sample(self.p.batch_size), want_metrics)
        self.steps += 1
        return {k: float(v) for k, v in metrics.items()} if want_metrics else {}

    @torch.no_grad()
    def act(self, obs: np.ndarray, deterministic: bool) -> np.ndarray:
        x = torch.from_numpy(((obs - self.obs_mean) / self.obs_std).astype(np.float32)).to(self.ctx.device)
        return self.policy(x, deterministic).cpu().numpy()

    def update(self, batch: Batch, want_metrics: bool) -> dict[str, Any]:
        raise NotImplementedError

    def policy(self, obs: torch.Tensor, deterministic: bool) -> torch.Tensor:
        raise NotImplementedError

    def modules(self) -> dict[str, torch.nn.Module]:
        raise NotImplementedError

    def optimizers(self) -> list[torch.optim.Optimizer]:
        raise NotImplementedError

    def state_dict(self) -> dict[str, Any]:
        return {
            "optimizers": [o.state_dict() for o in self.optimizers()],
            "rng": self.rng.bit_generator.state,
            "steps": self.steps,
            **self.extra_state(),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        for opt, s in zip(self.optimizers(), state["optimizers"]):
            opt.load_state_dict(s)
        self.rng.bit_generator.state = state["rng"]
        self.steps = state["steps"]
        self.load_extra_state(state)

    def extra_state(self) -> dict[str, Any]:
        """Algorithm state beyond networks and optimizers (a learned temperature); {} by default."""
        return {}

    def load_extra_state(self, state: dict[str, Any]) -> None:
        pass


def dataset_of(ctx: ClassicContext, name: str) -> Transitions:
    """The run's dataset (`classic.dataset`), checked against the run's environment."""
    if not ctx.dataset:
        raise ConfigError(
            f"classic.dataset: {name} learns from a fixed dataset; set classic.dataset=DIR (a Minari dataset, "
            "e.g. one written by `ascent collect`)"
        )
    env = ctx.envs.envs[0]
    env_id = env.spec.id if env.spec is not None else None
    data = load_transitions(ctx.dataset, env_id, ctx.envs.obs_dim)
    if data.discrete != ctx.envs.discrete:
        kind = "discrete" if data.discrete else "continuous"
        raise DatasetError(f"{data.path}: field 'action_space': the dataset's actions are {kind}, the run's env's not")
    if not data.discrete and data.actions.shape[1] != ctx.envs.action_dim:
        raise DatasetError(
            f"{data.path}: field 'action_space': actions of size {data.actions.shape[1]}, "
            f"the run's env has {ctx.envs.action_dim}"
        )
    return data
