"""TD3+BC (Fujimoto & Gu 2021, "A Minimalist Approach to Offline Reinforcement Learning", arXiv:2106.06860).

TD3 (Fujimoto et al. 2018, arXiv:1802.09477) on a fixed dataset with a behaviour-cloning term in the actor's loss:
    critic: J(Q_i) = mean (Q_i(s, a) - y)^2,  y = r + gamma (1 - terminated) min_j Q'_j(s', a'),
            a' = clip(pi'(s') + clip(eps, -c, c), low, high),  eps ~ N(0, sigma^2)   (target policy smoothing)
    actor (every policy_freq critic steps):
            J(pi) = -lambda mean Q_1(s, pi(s)) + mean (pi(s) - a)^2,  lambda = alpha / mean |Q_1(s, pi(s))| (detached)
then the target actor and critics move by Polyak averaging. Observations are standardised by the dataset's
statistics. As in the authors' code (github.com/sfujim/TD3_BC), noise and its clip are in units of the action
scale, and the critic loss sums the two critics' MSEs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from ascent.classic.base import CLASSIC, ClassicContext
from ascent.classic.networks import TwinQ, adam
from ascent.offline.base import Batch, OfflineAlgorithm, check_common
from ascent.offline.networks import DeterministicActor
from ascent.registry import Paper

TD3_BC = Paper(
    "TD3+BC",
    "Fujimoto & Gu",
    2021,
    "A Minimalist Approach to Offline Reinforcement Learning",
    "arXiv:2106.06860",
    section="baselines",
)


@dataclass(frozen=True)
class TD3BCParams:
    """TD3+BC (Fujimoto & Gu 2021, arXiv:2106.06860); defaults are the paper's."""

    lr: float = 3e-4
    """Adam learning rate of actor and critics, > 0."""
    batch_size: int = 256
    """Transitions per gradient step."""
    gamma: float = 0.99
    """Discount, in (0, 1]."""
    tau: float = 0.005
    """Polyak step of the target actor and critics, in (0, 1]."""
    hidden: list[int] = field(default_factory=lambda: [256, 256])
    """Hidden widths of the actor and of each critic (ReLU)."""
    alpha: float = 2.5
    """Weight of the Q term against behaviour cloning: lambda = alpha / mean |Q|, >= 0 (0: pure BC)."""
    policy_noise: float = 0.2
    """Std of the target policy smoothing noise, in units of the action scale (half the bounds' width), >= 0."""
    noise_clip: float = 0.5
    """The smoothing noise is clipped to [-noise_clip, noise_clip] action scales, >= 0."""
    policy_freq: int = 2
    """Critic steps per actor (and target) step, >= 1."""
    normalize_obs: bool = True
    """Standardise observations by the dataset's mean and std (+1e-3), in training and when acting."""

    def __post_init__(self) -> None:
        check_common(self)
        if not 0.0 < self.tau <= 1.0:
            raise ValueError(f"tau must be in (0, 1], got {self.tau}")
        if self.alpha < 0 or self.policy_noise < 0 or self.noise_clip < 0 or self.policy_freq < 1:
            raise ValueError("alpha, policy_noise and noise_clip must be >= 0 and policy_freq >= 1")


def td3_bc_actor_loss(q: torch.Tensor, pi: torch.Tensor, actions: torch.Tensor, alpha: float) -> torch.Tensor:
    """-lambda mean Q + mean (pi - a)^2 (over batch and action dims, the authors' F.mse_loss) with
    lambda = alpha / mean|Q| (detached); q (B,), pi and actions (B, A).

    >>> q = torch.tensor([2.0, -4.0]); pi = torch.tensor([[0.5], [0.0]]); a = torch.tensor([[0.0], [0.0]])
    >>> float(td3_bc_actor_loss(q, pi, a, alpha=3.0))  # lambda = 3 / 3 = 1: -(-1) + 0.125
    1.125
    """
    lam = alpha / q.abs().mean().detach()
    return -lam * q.mean() + (pi - actions).pow(2).mean()


def td3_target(next_q: torch.Tensor, rewards: torch.Tensor, terminated: torch.Tensor, gamma: float) -> torch.Tensor:
    """r + gamma (1 - terminated) min_j Q'_j; next_q (2, B).

    >>> float(td3_target(torch.tensor([[1.0], [3.0]]), torch.tensor([0.5]), torch.tensor([0.0]), 0.5)[0])
    1.0
    """
    return rewards + gamma * (1.0 - terminated) * next_q.min(dim=0).values


class TD3BC(OfflineAlgorithm):
    """TD3+BC (see the module docstring)."""

    name = "td3_bc"

    def __init__(self, ctx: ClassicContext, params: TD3BCParams) -> None:
        super().__init__(ctx, params)
        p, D, A = params, self.obs_dim, self.action_dim
        self.actor = DeterministicActor(D, A, p.hidden, self.low, self.high)
        self.actor_target = DeterministicActor(D, A, p.hidden, self.low, self.high)
        self.critic, self.critic_target = TwinQ(D, A, p.hidden), TwinQ(D, A, p.hidden)
        self.actor_target.load_state_dict(self.actor.state_dict())
        self.critic_target.load_state_dict(self.critic.state_dict())
        for m in self.modules().values():
            m.to(ctx.device)
        self.actor_params = list(self.actor.parameters())
        self.actor_opt, self.critic_opt = adam(self.actor_params, p.lr), adam(list(self.critic.parameters()), p.lr)
        self.scale = self.actor.scale
        self.last_actor_loss = torch.zeros(())

    def update(self, b: Batch, want_metrics: bool) -> dict[str, Any]:
        p = self.p
        with torch.no_grad():
            noise = (torch.randn_like(b.actions) * p.policy_noise).clamp(-p.noise_clip, p.noise_clip) * self.scale
            lo, hi = self.actor.bias - self.scale, self.actor.bias + self.scale
            next_a = torch.maximum(torch.minimum(self.actor_target(b.next_obs) + noise, hi), lo)
            y = td3_target(self.critic_target(b.next_obs, next_a), b.rewards, b.terminated, p.gamma)
        q = self.critic(b.obs, b.actions)  # (2, B)
        c_loss = (q - y).pow(2).mean(dim=1).sum()
        self.critic_opt.zero_grad(set_to_none=True)
        c_loss.backward()
        self.critic_opt.step()
        if (self.steps + 1) % p.policy_freq == 0:
            pi = self.actor(b.obs)
            a_loss = td3_bc_actor_loss(self.critic(b.obs, pi)[0], pi, b.actions, p.alpha)
            grads = torch.autograd.grad(a_loss, self.actor_params)  # through the critic, not into its weights
            for param, grad in zip(self.actor_params, grads):
                param.grad = grad
            self.actor_opt.step()
            with torch.no_grad():
                for target, online in ((self.actor_target, self.actor), (self.critic_target, self.critic)):
                    torch._foreach_lerp_(list(target.parameters()), list(online.parameters()), p.tau)
            self.last_actor_loss = a_loss.detach()
        return {"loss/value": c_loss.detach(), "loss/policy": self.last_actor_loss, "train/q": q.detach().mean()}

    def policy(self, obs: torch.Tensor, deterministic: bool) -> torch.Tensor:
        return self.actor(obs)

    def modules(self) -> dict[str, nn.Module]:
        return {
            "actor": self.actor,
            "actor_target": self.actor_target,
            "critic": self.critic,
            "critic_target": self.critic_target,
        }

    def optimizers(self) -> list[torch.optim.Optimizer]:
        return [self.actor_opt, self.critic_opt]


@CLASSIC.register(
    "td3_bc",
    params=TD3BCParams,
    paper=TD3_BC,
    fidelity="faithful",
    departures=("the BC term is the mean squared error over batch and action dimensions, as in the authors' code",),
)
def td3_bc(ctx: ClassicContext, params: TD3BCParams = TD3BCParams()) -> TD3BC:
    """TD3+BC from classic.dataset (Fujimoto & Gu 2021, arXiv:2106.06860): TD3 + a BC term in the actor loss.

    Critics: (Q_i(s, a) - r - gamma (1 - term) min_j Q'_j(s', smoothed pi'(s')))^2; actor, every policy_freq steps:
    -alpha / mean|Q_1| * Q_1(s, pi(s)) + mean (pi(s) - a)^2.
    """
    return TD3BC(ctx, params)


td3_bc.action_spaces = frozenset({"continuous"})
