"""MD3QN, Multi-Dimensional Distributional DQN (Zhang, Chen, Zhao, Xiong, Qin & Liu 2021, "Distributional
Reinforcement Learning for Multi-Dimensional Reward Functions", NeurIPS 2021, arXiv:2110.13578).

The network gives N particles Z_θ(s, a) = {z_1..z_N} ⊂ R^C of the joint return of C reward channels per action
(the channels come from the environment's `info["reward_vector"]`, e.g. `pendulum_channels`, `mujoco_channels` of
`ascent.classic.reward_channels`). Acting and the target's action are greedy on Q(s, a) = Σ_c (1/N) Σ_i z_i,c.
The Bellman target is the particle set
    y_j = r_vec + γ (1 - terminated) z⁻_j(s', a*),   a* = argmax_a Σ_c mean_j z⁻_j,c(s', a)   (target network z⁻),
and the loss is the (biased, V-statistic) squared maximum mean discrepancy with a mixture of Gaussian kernels
    MMD² = mean_ij k(z_i, z_j) + mean_ij k(y_i, y_j) - 2 mean_ij k(z_i, y_j),   k(x, y) = Σ_h exp(-‖x - y‖² / h),
with the target particles held fixed. Everything else (replay, ε-greedy, hard target copies, gradient clipping,
exact resume) is DQN's (`ascent.classic.dqn`); the reward vectors are kept in a ring parallel to the buffer.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from torch import nn

from ascent import papers
from ascent.classic.base import CLASSIC, ClassicContext
from ascent.classic.dqn import DQN, DQNParams
from ascent.classic.networks import adam, mlp
from ascent.typed import ConfigError


@dataclass(frozen=True)
class MD3QNParams(DQNParams):
    """DQN's parameters (`ascent.classic.dqn.DQNParams`) plus the particles of MD3QN (Zhang et al. 2021)."""

    particles: int = 32
    """N, particles of the joint return per action, >= 2."""
    channels: int = 3
    """C, reward channels the environment reports in `info["reward_vector"]` (checked at the first step); 1 with
    no reward vector: the scalar reward (MMDQN, Nguyen et al. 2021)."""
    bandwidths: list[float] = field(default_factory=lambda: [1.0, 10.0, 100.0, 1000.0])
    """Bandwidths h of the Gaussian kernel mixture k(x, y) = Σ_h exp(-‖x - y‖² / h), each > 0; they should span
    the squared distances between returns (scale rewards with the channel wrappers' `scale`)."""

    def __post_init__(self) -> None:
        try:
            super().__post_init__()
        except ValueError as err:
            raise ConfigError(f"md3qn: {err}") from None
        if self.particles < 2:
            raise ConfigError(f"md3qn: particles must be >= 2, got {self.particles}")
        if self.channels < 1:
            raise ConfigError(f"md3qn: channels must be >= 1 (the width of info['reward_vector']), got {self.channels}")
        if not self.bandwidths or min(self.bandwidths) <= 0:
            raise ConfigError(f"md3qn: bandwidths must list positive kernel bandwidths, got {self.bandwidths}")


def kernel(x: torch.Tensor, y: torch.Tensor, bandwidths: list[float]) -> torch.Tensor:
    """Σ_h exp(-‖x_i - y_j‖² / h) for x (B, N, C), y (B, M, C): (B, N, M)."""
    d2 = (x[:, :, None, :] - y[:, None, :, :]).pow(2).sum(-1)  # (B, N, M)
    return sum(torch.exp(-d2 / h) for h in bandwidths)


def mmd2(x: torch.Tensor, y: torch.Tensor, bandwidths: list[float]) -> torch.Tensor:
    """Squared MMD (V-statistic) between particle sets x (B, N, C) and y (B, M, C): (B,).

    >>> mmd2(torch.zeros(1, 2, 1), torch.ones(1, 2, 1), [1.0])  # 1 + 1 - 2 e^-1
    tensor([1.2642])
    """
    kxx = kernel(x, x, bandwidths).mean((1, 2))
    kyy = kernel(y, y, bandwidths).mean((1, 2))
    kxy = kernel(x, y, bandwidths).mean((1, 2))
    return kxx + kyy - 2.0 * kxy


def md3qn_target(
    reward_vectors: torch.Tensor, terminated: torch.Tensor, next_particles: torch.Tensor, gamma: float
) -> torch.Tensor:
    """y_j = r_vec + γ (1 - terminated) z_j(s', a*), a* greedy on Σ_c mean_j z_j,c; reward_vectors (B, C),
    terminated (B,), next_particles (B, A, N, C) -> (B, N, C)."""
    q = next_particles.mean(2).sum(-1)  # (B, A)
    best = q.argmax(dim=1)  # (B,)
    z = next_particles[torch.arange(len(best)), best]  # (B, N, C)
    return reward_vectors[:, None, :] + gamma * (1.0 - terminated)[:, None, None] * z


class ParticleQNetwork(nn.Module):
    """Particles of the joint return, (B, D) -> (B, A, N, C); `forward` gives Q = Σ_c mean_N: (B, A)."""

    def __init__(self, obs_dim: int, n_actions: int, particles: int, channels: int, hidden: list[int]) -> None:
        super().__init__()
        self.shape = (n_actions, particles, channels)
        self.net = mlp([obs_dim, *hidden, n_actions * particles * channels], "relu")

    def particles(self, obs: torch.Tensor) -> torch.Tensor:
        return self.net(obs).view(len(obs), *self.shape)  # (B, A, N, C)

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return self.particles(obs).mean(2).sum(-1)  # (B, A)


class MD3QN(DQN):
    """DQN with a particle network and the MMD loss (see the module docstring)."""

    def __init__(self, ctx: ClassicContext, params: MD3QNParams) -> None:
        super().__init__(ctx, params)
        envs, p = ctx.envs, params
        self.q = ParticleQNetwork(envs.obs_dim, envs.n_actions, p.particles, p.channels, p.hidden).to(ctx.device)
        self.q_target = ParticleQNetwork(envs.obs_dim, envs.n_actions, p.particles, p.channels, p.hidden)
        self.q_target.to(ctx.device).load_state_dict(self.q.state_dict())
        self.parameters = list(self.q.parameters())
        self.optimizer = adam(self.parameters, p.lr)
        self.vectors = np.zeros((p.buffer_size, p.channels), np.float32)  # parallel to the buffer's ring

    def store(self, obs: np.ndarray, actions: np.ndarray, step: Any) -> None:
        vec = step.reward_vector
        if vec is None and self.p.channels == 1:
            vec = step.reward[:, None]
        if vec is None or vec.shape[1] != self.p.channels:
            got = "no info['reward_vector']" if vec is None else f"{vec.shape[1]} channels"
            raise ValueError(
                f"md3qn(channels={self.p.channels}) got {got}; add a channel wrapper (classic.wrappers=[pendulum_"
                "channels, ...] or mujoco_channels) or set md3qn(channels=...) to its width"
            )
        pos = (self.buffer.pos + np.arange(len(vec))) % self.p.buffer_size
        self.vectors[pos] = vec
        super().store(obs, actions, step)

    def gradient_step(self) -> torch.Tensor:
        """One MMD² step on a uniform mini-batch; the loss (detached)."""
        buf = self.buffer
        idx = self.rng.integers(0, len(buf), size=self.p.batch_size)
        obs, next_obs = torch.from_numpy(buf.obs[idx]), torch.from_numpy(buf.next_obs[idx])
        actions, terminated = torch.from_numpy(buf.actions[idx]), torch.from_numpy(buf.terminated[idx])
        with torch.no_grad():
            next_particles = self.q_target.particles(next_obs)  # (B, A, N, C)
            y = md3qn_target(torch.from_numpy(self.vectors[idx]), terminated, next_particles, self.p.gamma)
        z = self.q.particles(obs)[torch.arange(len(idx)), actions]  # (B, N, C)
        loss = mmd2(z, y, self.p.bandwidths).mean()
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.parameters, self.p.max_grad_norm)
        self.optimizer.step()
        return loss.detach()

    def state_dict(self) -> dict[str, Any]:
        return {**super().state_dict(), "vectors": self.vectors[: len(self.buffer)].copy()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        super().load_state_dict(state)
        self.vectors[: len(state["vectors"])] = state["vectors"]


@CLASSIC.register("md3qn", params=MD3QNParams, paper=papers.MD3QN, fidelity="faithful")
def md3qn(ctx: ClassicContext, params: MD3QNParams = MD3QNParams()) -> MD3QN:
    """MD3QN (Zhang, Chen, Zhao, Xiong, Qin & Liu 2021, NeurIPS 2021, arXiv:2110.13578): N particles of the joint
    C-channel return per action, L = MMD²(Z(s, a), r_vec + γ (1 - terminated) Z⁻(s', a*)) with Gaussian kernels
    Σ_h exp(-‖x - y‖² / h), a* = argmax_a Σ_c mean_N Z⁻(s', a); discrete actions, reward channels from the env."""
    return MD3QN(ctx, params)


md3qn.action_spaces = frozenset({"discrete"})
