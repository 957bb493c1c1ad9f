"""Behaviour cloning: supervised regression of the dataset's actions on its observations (Pomerleau 1991, "Efficient
training of artificial neural networks for autonomous navigation", Neural Computation 3(1); the BC baseline of
D4RL, Fu et al. 2020, arXiv:2004.07219, and of TD3+BC, Fujimoto & Gu 2021, arXiv:2106.06860).

Continuous actions: a deterministic actor a = scale tanh(f(s)) + bias, loss mean (pi(s) - a)^2 (d3rlpy's
deterministic BC, CORL's any-percent BC). Discrete actions: a categorical policy, loss -mean log softmax(f(s))_a.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from ascent.classic.base import CLASSIC, ClassicContext
from ascent.classic.networks import adam, mlp
from ascent.offline.base import Batch, OfflineAlgorithm, check_common
from ascent.offline.networks import DeterministicActor
from ascent.registry import Paper

BC_PAPER = Paper(
    "BC",
    "Pomerleau",
    1991,
    "Efficient Training of Artificial Neural Networks for Autonomous Navigation (Neural Computation 3(1))",
    "Neural Computation 3(1):88-97 (no arXiv id)",
    section="baselines",
)


@dataclass(frozen=True)
class BCParams:
    """Behaviour cloning; defaults are d3rlpy's BC (lr 1e-3) with 256-wide layers and batch 256."""

    lr: float = 1e-3
    """Adam learning rate, > 0."""
    batch_size: int = 256
    """Transitions per gradient step."""
    hidden: list[int] = field(default_factory=lambda: [256, 256])
    """Hidden widths of the policy (ReLU)."""
    normalize_obs: bool = True
    """Standardise observations by the dataset's mean and std (+1e-3), in training and when acting."""

    def __post_init__(self) -> None:
        check_common(self)


def bc_loss_continuous(pred: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
    """mean squared error over batch and action dimensions (d3rlpy's and CORL's); pred, actions (B, A).

    >>> float(bc_loss_continuous(torch.tensor([[0.0, 1.0], [1.0, 1.0]]), torch.tensor([[1.0, 1.0], [1.0, -1.0]])))
    1.25
    """
    return (pred - actions).pow(2).mean()


def bc_loss_discrete(logits: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
    """-mean log softmax(logits)_a; logits (B, n), actions (B,) long.

    >>> round(float(bc_loss_discrete(torch.tensor([[0.0, 0.0]]), torch.tensor([1]))), 4)  # log 2
    0.6931
    """
    return -torch.log_softmax(logits, -1).gather(-1, actions[:, None]).mean()


class BC(OfflineAlgorithm):
    """Behaviour cloning (see the module docstring)."""

    name = "bc"

    def __init__(self, ctx: ClassicContext, params: BCParams) -> None:
        super().__init__(ctx, params)
        if self.discrete:
            self.actor: nn.Module = mlp([self.obs_dim, *params.hidden, self.data.n_actions], "relu")
        else:
            self.actor = DeterministicActor(self.obs_dim, self.action_dim, params.hidden, self.low, self.high)
        self.actor.to(ctx.device)
        self.opt = adam(list(self.actor.parameters()), params.lr)

    def update(self, b: Batch, want_metrics: bool) -> dict[str, Any]:
        if self.discrete:
            loss = bc_loss_discrete(self.actor(b.obs), b.actions)
        else:
            loss = bc_loss_continuous(self.actor(b.obs), b.actions)
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        self.opt.step()
        return {"loss/policy": loss.detach()}

    def policy(self, obs: torch.Tensor, deterministic: bool) -> torch.Tensor:
        out = self.actor(obs)
        return out.argmax(-1) if self.discrete else out

    def modules(self) -> dict[str, nn.Module]:
        return {"actor": self.actor}

    def optimizers(self) -> list[torch.optim.Optimizer]:
        return [self.opt]


@CLASSIC.register(
    "bc",
    params=BCParams,
    paper=BC_PAPER,
    fidelity="faithful",
    departures=(
        "an MLP with a tanh-bounded deterministic head trained by MSE (d3rlpy's and CORL's BC), not the 1991 "
        "network; it is the BC baseline offline-RL papers report",
    ),
)
def bc(ctx: ClassicContext, params: BCParams = BCParams()) -> BC:
    """Behaviour cloning from classic.dataset (Pomerleau 1991): MSE to the data's actions, or cross-entropy.

    Continuous: mean (scale tanh(f(s)) + bias - a)^2; discrete: -mean log softmax(f(s))_a.
    """
    return BC(ctx, params)


bc.action_spaces = frozenset({"discrete", "continuous"})
