"""Networks of the offline algorithms beside the classic ones (`ascent.classic.networks`: `mlp`, `TwinQ`,
`SquashedGaussianPolicy`, `QNetwork`); shapes in the comments (B: batch, D: observation size, A: action size)."""

from __future__ import annotations

import torch
from torch import nn

from ascent.classic.networks import mlp


class DeterministicActor(nn.Module):
    """a = scale * tanh(f(s)) + bias, inside the action bounds (TD3+BC's and BC's actor)."""

    def __init__(self, obs_dim: int, action_dim: int, hidden: list[int], low, high) -> None:
        super().__init__()
        self.net = mlp([obs_dim, *hidden, action_dim], "relu")
        self.register_buffer("scale", torch.as_tensor((high - low) / 2.0, dtype=torch.float32))
        self.register_buffer("bias", torch.as_tensor((high + low) / 2.0, dtype=torch.float32))

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return torch.tanh(self.net(obs)) * self.scale + self.bias  # (B, A)


class GaussianActor(nn.Module):
    """pi(a|s) = N(scale * tanh(f(s)) + bias, diag(exp(log_std))^2), log_std a state-independent learned vector
    p kept in [LOG_STD_MIN, LOG_STD_MAX] (IQL's actor). `log_std_form`: "clamp", log_std = clamp(p), p starting
    at 0 (std 1; the authors' code and CORL); "sigmoid", log_std = MIN + sigmoid(p) (MAX - MIN), p starting at 0,
    so log_std starts at the middle of the range, -1.5 (std 0.22), and its gradient never stops at a bound
    (d3rlpy 2.8's `NormalPolicy` with `use_std_parameter=True`)."""

    LOG_STD_MIN, LOG_STD_MAX = -5.0, 2.0
    FORMS = ("clamp", "sigmoid")

    def __init__(
        self, obs_dim: int, action_dim: int, hidden: list[int], low, high, log_std_form: str = "clamp"
    ) -> None:
        super().__init__()
        if log_std_form not in self.FORMS:
            raise ValueError(f"log_std_form must be one of {self.FORMS}, got {log_std_form!r}")
        self.mean = DeterministicActor(obs_dim, action_dim, hidden, low, high)
        self.log_std = nn.Parameter(torch.zeros(action_dim))
        self.log_std_form = log_std_form

    def current_log_std(self) -> torch.Tensor:
        """(A,) the log std in use.

        >>> a = GaussianActor(2, 3, [4], -1.0, 1.0, log_std_form="sigmoid")
        >>> a.current_log_std().tolist(), GaussianActor(2, 3, [4], -1.0, 1.0).current_log_std().tolist()
        ([-1.5, -1.5, -1.5], [0.0, 0.0, 0.0])
        """
        lo, hi = self.LOG_STD_MIN, self.LOG_STD_MAX
        if self.log_std_form == "sigmoid":
            return lo + torch.sigmoid(self.log_std) * (hi - lo)
        return self.log_std.clamp(lo, hi)

    def log_prob(self, obs: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        """log pi(a|s), (B,) for actions (B, A)."""
        log_std = self.current_log_std()
        z = (action - self.mean(obs)) / log_std.exp()  # (B, A)
        return (-0.5 * z.pow(2) - log_std - 0.5 * torch.log(torch.tensor(2 * torch.pi))).sum(-1)

    def sample(self, obs: torch.Tensor) -> torch.Tensor:
        mean = self.mean(obs)
        return mean + self.current_log_std().exp() * torch.randn_like(mean)


class ValueNet(nn.Module):
    """V(s): (B, D) -> (B,)."""

    def __init__(self, obs_dim: int, hidden: list[int]) -> None:
        super().__init__()
        self.net = mlp([obs_dim, *hidden, 1], "relu")

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return self.net(obs).squeeze(-1)
