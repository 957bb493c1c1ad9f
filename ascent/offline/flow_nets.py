"""Networks of the flow-policy offline algorithms (`meanflow_ql`, `fan`): a time-conditioned vector field, a
noise-to-action map, critics with layer normalisation, and the action normalisation they share (flow policies
work in [-1, 1]^A, as in the authors' code). Shapes in the comments (B: batch, D: observation size, A: actions)."""

from __future__ import annotations

import torch
from torch import nn


def ln_mlp(sizes: list[int], layer_norm: bool) -> nn.Sequential:
    """Linear layers of `sizes` with ReLU between them and, with `layer_norm`, a LayerNorm after every hidden
    linear layer (the critics of FQL, MeanFlowQL and FAN: Linear -> LayerNorm -> activation)."""
    layers: list[nn.Module] = []
    for i, (n_in, n_out) in enumerate(zip(sizes[:-1], sizes[1:])):
        layers.append(nn.Linear(n_in, n_out))
        if i < len(sizes) - 2:
            layers += [nn.LayerNorm(n_out), nn.ReLU()] if layer_norm else [nn.ReLU()]
    return nn.Sequential(*layers)


class TwinCritic(nn.Module):
    """Two critics on [s, x] -> (2, B), x any conditioning vector (an action, or an action and a noise)."""

    def __init__(self, obs_dim: int, in_dim: int, hidden: list[int], layer_norm: bool) -> None:
        super().__init__()
        self.q1 = ln_mlp([obs_dim + in_dim, *hidden, 1], layer_norm)
        self.q2 = ln_mlp([obs_dim + in_dim, *hidden, 1], layer_norm)

    def forward(self, obs: torch.Tensor, *x: torch.Tensor) -> torch.Tensor:
        h = torch.cat([obs, *x], dim=-1)  # (B, D + in)
        return torch.stack([self.q1(h).squeeze(-1), self.q2(h).squeeze(-1)])  # (2, B)


class FlowField(nn.Module):
    """f(s, x, t) -> (B, A): a vector field (FAN's behaviour flow), or MeanFlowQL's residual map g(s, z_t, t)."""

    def __init__(self, obs_dim: int, action_dim: int, hidden: list[int]) -> None:
        super().__init__()
        self.net = ln_mlp([obs_dim + action_dim + 1, *hidden, action_dim], False)

    def forward(self, obs: torch.Tensor, x: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        return self.net(torch.cat([obs, x, t], dim=-1))


class NoiseActor(nn.Module):
    """mu(s, eps) -> (B, A): a one-step noise-to-action policy (FAN's)."""

    def __init__(self, obs_dim: int, action_dim: int, hidden: list[int]) -> None:
        super().__init__()
        self.net = ln_mlp([obs_dim + action_dim, *hidden, action_dim], False)

    def forward(self, obs: torch.Tensor, eps: torch.Tensor) -> torch.Tensor:
        return self.net(torch.cat([obs, eps], dim=-1))


class ActionScale(nn.Module):
    """Maps the environment's box [low, high] to [-1, 1] and back (buffers, so they move with the module)."""

    def __init__(self, low, high) -> None:
        super().__init__()
        self.register_buffer("scale", torch.as_tensor((high - low) / 2.0, dtype=torch.float32))
        self.register_buffer("bias", torch.as_tensor((high + low) / 2.0, dtype=torch.float32))

    def to_unit(self, a: torch.Tensor) -> torch.Tensor:
        return (a - self.bias) / self.scale

    def to_env(self, a: torch.Tensor) -> torch.Tensor:
        return a * self.scale + self.bias


def clip_grads_(grads: list[torch.Tensor], max_norm: float) -> None:
    """Scale `grads` in place so that their global L2 norm is at most `max_norm` (optax.clip_by_global_norm)."""
    norm = torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g) for g in grads]))
    factor = (max_norm / (norm + 1e-6)).clamp(max=1.0)
    torch._foreach_mul_(grads, factor)


def step_with(opt: torch.optim.Optimizer, params: list[nn.Parameter], grads: tuple[torch.Tensor, ...]) -> None:
    """Set `params`' gradients to `grads` and take one optimizer step (the grads were taken w.r.t. these only)."""
    for p, g in zip(params, grads):
        p.grad = g
    opt.step()
