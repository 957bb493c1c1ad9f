"""The networks of the classic algorithms: MLPs, policy heads (categorical, diagonal Gaussian, tanh-squashed
Gaussian) and Q-networks. Small and plain; shapes in the comments (B: batch, D: observation size, A: actions)."""

from __future__ import annotations

import math
from typing import Literal

import torch
from torch import nn

Activation = Literal["tanh", "relu"]


def adam(parameters: list[nn.Parameter], lr: float, eps: float = 1e-8) -> torch.optim.Adam:
    """Adam with the fused kernel (the fastest for many small tensors on CPU and GPU)."""
    return torch.optim.Adam(parameters, lr=lr, eps=eps, fused=True)


def mlp(sizes: list[int], activation: Activation, ortho_gain: float | None = None) -> nn.Sequential:
    """Linear layers of `sizes` with `activation` between them (none after the last). With `ortho_gain`, hidden
    layers get orthogonal weights with gain sqrt(2), the last one `ortho_gain`, and zero biases (the PPO
    implementation detail of Engstrom et al. 2020, arXiv:2005.12729); without it, torch's default init."""
    act = nn.Tanh if activation == "tanh" else nn.ReLU
    layers: list[nn.Module] = []
    for i, (n_in, n_out) in enumerate(zip(sizes[:-1], sizes[1:])):
        linear = nn.Linear(n_in, n_out)
        last = i == len(sizes) - 2
        if ortho_gain is not None:
            nn.init.orthogonal_(linear.weight, ortho_gain if last else math.sqrt(2))
            nn.init.zeros_(linear.bias)
        layers += [linear] if last else [linear, act()]
    return nn.Sequential(*layers)


class CategoricalPolicy(nn.Module):
    """pi(a|s) = softmax(f(s))_a over A discrete actions."""

    def __init__(self, obs_dim: int, n_actions: int, hidden: list[int], activation: Activation, ortho: bool) -> None:
        super().__init__()
        self.net = mlp([obs_dim, *hidden, n_actions], activation, 0.01 if ortho else None)

    def sample(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(actions (B,), log-probs (B,)): Gumbel-max sampling, no Distribution object (it costs per step)."""
        logp = torch.log_softmax(self.net(obs), dim=-1)  # (B, A)
        gumbel = -torch.log(-torch.log(torch.rand_like(logp).clamp_min(1e-20)))
        action = torch.argmax(logp + gumbel, dim=-1)  # (B,)
        return action, logp.gather(-1, action[:, None]).squeeze(-1)

    def log_prob_entropy(self, obs: torch.Tensor, action: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(log pi(a|s) (B,), entropy (B,)) for integer actions (B,)."""
        logp = torch.log_softmax(self.net(obs), dim=-1)  # (B, A)
        entropy = -(logp.exp() * logp).sum(-1)
        return logp.gather(-1, action.long()[:, None]).squeeze(-1), entropy

    def mode(self, obs: torch.Tensor) -> torch.Tensor:
        return torch.argmax(self.net(obs), dim=-1)


class GaussianPolicy(nn.Module):
    """pi(a|s) = N(mu(s), diag(exp(log_std))^2), log_std a learned vector independent of s."""

    def __init__(
        self, obs_dim: int, action_dim: int, hidden: list[int], activation: Activation, ortho: bool, log_std_init: float
    ) -> None:
        super().__init__()
        self.net = mlp([obs_dim, *hidden, action_dim], activation, 0.01 if ortho else None)
        self.log_std = nn.Parameter(torch.full((action_dim,), log_std_init))

    def _log_prob(self, mean: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        z = (action - mean) / self.log_std.exp()  # (B, A)
        return (-0.5 * z.pow(2) - self.log_std - 0.5 * math.log(2 * math.pi)).sum(-1)

    def sample(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        mean = self.net(obs)  # (B, A)
        action = mean + self.log_std.exp() * torch.randn_like(mean)
        return action, self._log_prob(mean, action)

    def log_prob_entropy(self, obs: torch.Tensor, action: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        entropy = (self.log_std + 0.5 * (1.0 + math.log(2 * math.pi))).sum().expand(obs.shape[0])
        return self._log_prob(self.net(obs), action), entropy

    def mode(self, obs: torch.Tensor) -> torch.Tensor:
        return self.net(obs)


class SquashedGaussianPolicy(nn.Module):
    """SAC's actor: u ~ N(mu(s), sigma(s)^2), a = scale * tanh(u) + bias, with
    log pi(a|s) = log N(u) - sum_i log(scale_i (1 - tanh(u_i)^2) + eps) (Haarnoja et al. 2018, arXiv:1812.05905)."""

    LOG_STD_MIN, LOG_STD_MAX = -20.0, 2.0

    def __init__(self, obs_dim: int, action_dim: int, hidden: list[int], low, high) -> None:
        super().__init__()
        self.trunk = mlp([obs_dim, *hidden], "relu")
        self.trunk.append(nn.ReLU())
        self.mean, self.log_std = nn.Linear(hidden[-1], action_dim), nn.Linear(hidden[-1], action_dim)
        self.register_buffer("scale", torch.as_tensor((high - low) / 2.0, dtype=torch.float32))
        self.register_buffer("bias", torch.as_tensor((high + low) / 2.0, dtype=torch.float32))

    def sample(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(actions (B, A) inside the bounds, log-probs (B,)), reparameterised (gradients flow through)."""
        h = self.trunk(obs)
        mean, log_std = self.mean(h), self.log_std(h).clamp(self.LOG_STD_MIN, self.LOG_STD_MAX)  # (B, A)
        std = log_std.exp()
        noise = torch.randn_like(mean)
        u = mean + std * noise
        squashed = torch.tanh(u)
        log_prob = -0.5 * noise.pow(2) - log_std - 0.5 * math.log(2 * math.pi)
        log_prob = log_prob - torch.log(self.scale * (1 - squashed.pow(2)) + 1e-6)
        return squashed * self.scale + self.bias, log_prob.sum(-1)

    def mode(self, obs: torch.Tensor) -> torch.Tensor:
        return torch.tanh(self.mean(self.trunk(obs))) * self.scale + self.bias


class QNetwork(nn.Module):
    """Q(s, .) for A discrete actions: (B, D) -> (B, A)."""

    def __init__(self, obs_dim: int, n_actions: int, hidden: list[int]) -> None:
        super().__init__()
        self.net = mlp([obs_dim, *hidden, n_actions], "relu")

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return self.net(obs)


class TwinQ(nn.Module):
    """Two independent critics Q_1(s, a), Q_2(s, a) for continuous actions: -> (2, B)."""

    def __init__(self, obs_dim: int, action_dim: int, hidden: list[int]) -> None:
        super().__init__()
        self.q1 = mlp([obs_dim + action_dim, *hidden, 1], "relu")
        self.q2 = mlp([obs_dim + action_dim, *hidden, 1], "relu")

    def forward(self, obs: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        x = torch.cat([obs, action], dim=-1)  # (B, D + A)
        return torch.stack([self.q1(x).squeeze(-1), self.q2(x).squeeze(-1)])  # (2, B)
