"""Orchestrated value mapping on DQN (Fatemi & Tavakoli 2022, "Orchestrated Value Mapping for Reinforcement
Learning", ICLR 2022, arXiv:2203.07171), with the logarithmic mapping of Log Q-learning (van Seijen, Fatemi &
Tavakoli 2019, "Using a Logarithmic Mapping to Enable Lower Discount Factors in Reinforcement Learning", NeurIPS
2019, arXiv:1906.00572), for discrete actions.

The reward is decomposed into J non-negative channels r_j: the positive and negative parts of the reward, or of
each component of `Step.reward_vector` (`reward_channels` = C > 1), so J = 2C and r = sum_j sign_j r_j. One
network gives J mapped heads Q~_j(s, .) and
    Q(s, a) = sum_j sign_j f^{-1}(Q~_j(s, a)),
    log mapping f(x) = c ln(x + d), f^{-1}(y) = exp(y / c) - d   (identity: f(x) = x).
The TD update happens in the mapped space, the target mapped back and forth:
    a* = argmax_a' Q_target(s', a'),   U_j = r_j + gamma (1 - terminated) f^{-1}(Q~_j^target(s', a*)),
    L = sum_j Huber(Q~_j(s, a) - f(U_j)).
(U_j >= -gamma d > -d, so f(U_j) is defined.) The paper's separate regular-space step size beta_reg is 1 here.
Replay, epsilon schedule, target network and acting are DQN's (`ascent.classic.dqn.DQN`), reused by subclassing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from ascent import papers
from ascent.classic.base import CLASSIC, ClassicContext
from ascent.classic.dqn import DQN, DQNParams
from ascent.classic.networks import adam, mlp
from ascent.classic.replay import ReplayBuffer
from ascent.typed import ConfigError


@dataclass(frozen=True)
class ValueMappingParams(DQNParams):
    """DQN's parameters (Stable-Baselines3's defaults) plus the value mapping (Fatemi & Tavakoli 2022)."""

    mapping: str = "log"
    """f_j for every channel: "log" (f(x) = c ln(x + d)) or "identity"."""
    c: float = 0.5
    """Log mapping's scale c, > 0 (van Seijen et al. 2019 use 0.5)."""
    d: float = 0.02
    """Log mapping's offset d, > 0 (keeps ln defined at x = 0; van Seijen et al. 2019 use gamma^k ~ 0.02)."""
    reward_channels: int = 1
    """1: split the scalar reward into its positive and negative parts; C > 1: split each of the C components of
    `Step.reward_vector` (the environment must report info["reward_vector"] with C entries)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.mapping not in ("log", "identity"):
            raise ConfigError(f"ovm_dqn: mapping must be 'log' or 'identity', got {self.mapping!r}")
        if not self.c > 0 or not self.d > 0:
            raise ConfigError(f"ovm_dqn: c and d must be > 0, got {self.c}, {self.d}")
        if self.reward_channels <= 0:
            raise ConfigError(f"ovm_dqn: reward_channels must be > 0, got {self.reward_channels}")


def to_mapped(x: torch.Tensor, mapping: str, c: float, d: float) -> torch.Tensor:
    """f(x): c ln(x + d) (log) or x (identity)."""
    return c * torch.log(x + d) if mapping == "log" else x


def from_mapped(y: torch.Tensor, mapping: str, c: float, d: float) -> torch.Tensor:
    """f^{-1}(y): exp(y / c) - d (log) or y (identity)."""
    return torch.exp(y / c) - d if mapping == "log" else y


def split_channels(rewards: np.ndarray) -> np.ndarray:
    """(E, C) signed rewards -> (E, 2C) non-negative channels [max(r, 0), max(-r, 0)] per component.

    >>> split_channels(np.array([[1.5, -2.0]])).tolist()
    [[1.5, 0.0, 0.0, 2.0]]
    """
    return np.stack([np.maximum(rewards, 0.0), np.maximum(-rewards, 0.0)], axis=-1).reshape(len(rewards), -1)


def mapped_target(
    rewards: torch.Tensor, terminated: torch.Tensor, next_mapped: torch.Tensor, signs: torch.Tensor, p: Any
) -> torch.Tensor:
    """f(U_j), U_j = r_j + gamma (1 - terminated) f^{-1}(Q~_j(s', a*)), a* = argmax_a sum_j sign_j f^{-1}(Q~_j(s', a));
    rewards (B, J), terminated (B,), next_mapped (B, J, A), signs (J,) -> (B, J)."""
    regular = from_mapped(next_mapped, p.mapping, p.c, p.d)  # (B, J, A)
    best = (signs[None, :, None] * regular).sum(dim=1).argmax(dim=1)  # (B,)
    chosen = regular.gather(2, best[:, None, None].expand(-1, regular.shape[1], 1)).squeeze(2)  # (B, J)
    u = rewards + p.gamma * (1.0 - terminated[:, None]) * chosen
    return to_mapped(u, p.mapping, p.c, p.d)


class MappedQ(nn.Module):
    """J mapped heads Q~_j(s, .): `mapped(obs)` (B, J, A); `forward(obs)` the combined Q (B, A)."""

    def __init__(self, obs_dim: int, n_actions: int, signs: torch.Tensor, p: ValueMappingParams) -> None:
        super().__init__()
        self.p, self.n_actions = p, n_actions
        self.register_buffer("signs", signs.clone())  # (J,)
        self.net = mlp([obs_dim, *p.hidden, len(signs) * n_actions], "relu")

    def mapped(self, obs: torch.Tensor) -> torch.Tensor:
        return self.net(obs).view(len(obs), len(self.signs), self.n_actions)

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        regular = from_mapped(self.mapped(obs), self.p.mapping, self.p.c, self.p.d)  # (B, J, A)
        return (self.signs[None, :, None] * regular).sum(dim=1)


class ChannelReplay(ReplayBuffer):
    """DQN's replay buffer with a (capacity, J) reward array (one column per channel)."""

    def __init__(self, capacity: int, obs_dim: int, channels: int) -> None:
        super().__init__(capacity, obs_dim, (), discrete=True)
        self.rewards = np.zeros((capacity, channels), np.float32)


class ValueMappingDQN(DQN):
    """DQN whose Q is the signed sum of J mapped channel heads (see the module docstring)."""

    def __init__(self, ctx: ClassicContext, params: ValueMappingParams) -> None:
        super().__init__(ctx, params)
        envs, C = ctx.envs, params.reward_channels
        self.signs = torch.tensor([1.0, -1.0] * C)  # (J,), J = 2C
        self.q = MappedQ(envs.obs_dim, envs.n_actions, self.signs, params).to(ctx.device)
        self.q_target = MappedQ(envs.obs_dim, envs.n_actions, self.signs, params).to(ctx.device)
        self.q_target.load_state_dict(self.q.state_dict())
        self.parameters = list(self.q.parameters())
        self.optimizer = adam(self.parameters, params.lr)
        self.buffer = ChannelReplay(params.buffer_size, envs.obs_dim, 2 * C)

    def store(self, obs: np.ndarray, actions: np.ndarray, step: Any) -> None:
        C = self.p.reward_channels
        if C == 1:
            rewards = step.reward[:, None]
        elif step.reward_vector is None or step.reward_vector.shape[1] != C:
            got = None if step.reward_vector is None else step.reward_vector.shape[1]
            raise ConfigError(f"ovm_dqn: reward_channels={C} needs info['reward_vector'] with {C} entries, got {got}")
        else:
            rewards = step.reward_vector
        self.buffer.add(obs, actions, split_channels(rewards), step.final_obs, step.terminated)

    def gradient_step(self) -> torch.Tensor:
        """One Huber step in the mapped space on a uniform mini-batch; the loss (detached)."""
        b = self.buffer.sample(self.p.batch_size, self.rng)
        with torch.no_grad():
            y = mapped_target(b.rewards, b.terminated, self.q_target.mapped(b.next_obs), self.signs, self.p)  # (B, J)
        J = len(self.signs)
        q = self.q.mapped(b.obs).gather(2, b.actions[:, None, None].expand(-1, J, 1)).squeeze(2)  # (B, J)
        loss = F.smooth_l1_loss(q, y, reduction="none").sum(dim=1).mean()
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.parameters, self.p.max_grad_norm)
        self.optimizer.step()
        return loss.detach()


@CLASSIC.register(
    "ovm_dqn",
    params=ValueMappingParams,
    paper=(papers.ORCHESTRATED_VALUE_MAPPING, papers.LOG_Q_LEARNING),
    fidelity="faithful",
    departures=("one instance of the class (log or identity mapping on the sign channels, on DQN); beta_reg = 1",),
)
def ovm_dqn(ctx: ClassicContext, params: ValueMappingParams = ValueMappingParams()) -> ValueMappingDQN:
    """DQN with orchestrated value mapping (Fatemi & Tavakoli 2022, ICLR, arXiv:2203.07171); discrete actions.

    Q(s, a) = sum_j sign_j f^{-1}(Q~_j(s, a)) over the positive/negative reward channels, f(x) = c ln(x + d) (Log
    Q-learning, van Seijen et al. 2019, arXiv:1906.00572) or identity; L = sum_j Huber(Q~_j(s, a) - f(r_j + gamma
    (1 - terminated) f^{-1}(Q~_j^target(s', a*)))), a* the greedy action of the combined target Q.
    """
    return ValueMappingDQN(ctx, params)


ovm_dqn.action_spaces = frozenset({"discrete"})
