"""IQL, implicit Q-learning (Kostrikov, Nair & Levine 2021, "Offline Reinforcement Learning with Implicit
Q-Learning", arXiv:2110.06169).

Never queries Q at an action outside the dataset: V is fitted by expectile regression to the target critics on the
data's actions, Q by TD to V(s'), and the policy by advantage-weighted regression. One gradient step:
    V:      J(V) = mean L2_tau(min_j Q'_j(s, a) - V(s)),   L2_tau(u) = |tau - 1(u < 0)| u^2          (expectile)
    Q:      J(Q_i) = mean (Q_i(s, a) - r - gamma (1 - terminated) V(s'))^2
    policy: J(pi) = -mean min(exp(beta (min_j Q'_j(s, a) - V(s))), max_weight) log pi(a|s)   (weights detached)
in that order, Q and the policy using the V just updated (the paper's Algorithm 1 and the authors' code), then the
target critics move by Polyak averaging. As in the authors' code (github.com/ikostrikov/implicit_q_learning)
and CORL: a Gaussian policy with a tanh-bounded mean and a state-independent log std, the policy's learning rate
decayed to 0 by a cosine over the run, locomotion rewards scaled by 1000 / (max - min episode return) of the
dataset (`reward_scale="return"`), and the critic loss summing the two critics' MSEs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

import torch
from torch import nn

from ascent.classic.base import CLASSIC, ClassicContext
from ascent.classic.networks import TwinQ, adam
from ascent.offline.base import Batch, OfflineAlgorithm, check_common, cosine_lr
from ascent.offline.networks import GaussianActor, ValueNet
from ascent.registry import Paper

IQL_PAPER = Paper(
    "IQL",
    "Kostrikov, Nair & Levine",
    2021,
    "Offline Reinforcement Learning with Implicit Q-Learning",
    "arXiv:2110.06169",
    section="baselines",
)


@dataclass(frozen=True)
class IQLParams:
    """IQL (Kostrikov et al. 2021, arXiv:2110.06169); defaults are the paper's MuJoCo settings."""

    lr: float = 3e-4
    """Adam learning rate of the policy, critics and value network, > 0."""
    batch_size: int = 256
    """Transitions per gradient step."""
    gamma: float = 0.99
    """Discount, in (0, 1]."""
    tau: float = 0.005
    """Polyak step of the target critics, in (0, 1]."""
    hidden: list[int] = field(default_factory=lambda: [256, 256])
    """Hidden widths of the policy, the value network and each critic (ReLU)."""
    expectile: float = 0.7
    """The expectile tau of V's regression, in (0, 1) (0.5: V = mean Q of the data's actions; -> 1: max)."""
    beta: float = 3.0
    """Inverse temperature of the advantage weights exp(beta A), >= 0 (0: behaviour cloning)."""
    max_weight: float = 100.0
    """Advantage weights are clipped to at most this, > 0."""
    reward_scale: Literal["return", "none"] = "return"
    """return: rewards times 1000 / (max - min episode return) of the dataset (the paper's locomotion setting);
    none: raw rewards."""
    cosine_policy_lr: bool = True
    """Decay the policy's learning rate to 0 by a cosine over classic.total_steps gradient steps."""
    normalize_obs: bool = True
    """Standardise observations by the dataset's mean and std (+1e-3), in training and when acting."""
    log_std: Literal["clamp", "sigmoid"] = "clamp"
    """The policy's state-independent log std (`GaussianActor`): clamp, a vector clamped to [-5, 2] starting at
    0 (the authors' code); sigmoid, -5 + 7 sigmoid(p) starting at -1.5 (d3rlpy 2.8's form, a diagnostic arm)."""
    update_order: Literal["paper", "d3rlpy"] = "paper"
    """paper: V steps first, Q's target r + gamma V(s') and the policy's weights use the V just updated (Algorithm 1
    and the authors' code); d3rlpy: Q's target uses V(s') from before the step (d3rlpy 2.8 updates Q and V in one
    step), the policy's weights the updated V (a diagnostic arm)."""

    def __post_init__(self) -> None:
        check_common(self)
        if not 0.0 < self.tau <= 1.0 or not 0.0 < self.expectile < 1.0:
            raise ValueError(f"tau must be in (0, 1] and expectile in (0, 1), got {self.tau}, {self.expectile}")
        if self.beta < 0 or not self.max_weight > 0:
            raise ValueError(f"beta must be >= 0 and max_weight > 0, got {self.beta}, {self.max_weight}")


def expectile_loss(diff: torch.Tensor, expectile: float) -> torch.Tensor:
    """mean |tau - 1(u < 0)| u^2 over u = diff (B,).

    >>> float(expectile_loss(torch.tensor([2.0, -2.0]), 0.7))  # (0.7 * 4 + 0.3 * 4) / 2
    2.0
    >>> round(float(expectile_loss(torch.tensor([1.0, -3.0]), 0.9)), 6)  # (0.9 * 1 + 0.1 * 9) / 2
    0.9
    """
    weight = torch.where(diff < 0, 1.0 - expectile, expectile)
    return (weight * diff.pow(2)).mean()


def awr_weights(adv: torch.Tensor, beta: float, max_weight: float) -> torch.Tensor:
    """min(exp(beta A), max_weight), detached.

    >>> awr_weights(torch.tensor([0.0, 1.0, 10.0]), 2.0, 100.0).tolist()[0], round(float(awr_weights(
    ...     torch.tensor([1.0]), 2.0, 100.0)), 4), float(awr_weights(torch.tensor([10.0]), 2.0, 100.0))
    (1.0, 7.3891, 100.0)
    """
    return torch.exp(beta * adv.detach()).clamp(max=max_weight)


class IQL(OfflineAlgorithm):
    """IQL (see the module docstring); continuous actions."""

    name = "iql"

    def __init__(self, ctx: ClassicContext, params: IQLParams) -> None:
        super().__init__(ctx, params, reward_scale=params.reward_scale if params.reward_scale == "return" else 1.0)
        p, D, A = params, self.obs_dim, self.action_dim
        self.actor = GaussianActor(D, A, p.hidden, self.low, self.high, log_std_form=p.log_std)
        self.critic, self.critic_target = TwinQ(D, A, p.hidden), TwinQ(D, A, p.hidden)
        self.critic_target.load_state_dict(self.critic.state_dict())
        self.value = ValueNet(D, p.hidden)
        for m in self.modules().values():
            m.to(ctx.device)
        self.actor_opt = adam(list(self.actor.parameters()), p.lr)
        self.critic_opt = adam(list(self.critic.parameters()), p.lr)
        self.value_opt = adam(list(self.value.parameters()), p.lr)

    def update(self, b: Batch, want_metrics: bool) -> dict[str, Any]:
        p = self.p
        with torch.no_grad():
            target_q = self.critic_target(b.obs, b.actions).min(dim=0).values  # (B,)
            next_v_before = self.value(b.next_obs) if p.update_order == "d3rlpy" else None  # (B,)
        v_loss = expectile_loss(target_q - self.value(b.obs), p.expectile)
        self.value_opt.zero_grad(set_to_none=True)
        v_loss.backward()
        self.value_opt.step()
        # the paper's Algorithm 1 (and the authors' code): Q's target V(s') and the policy's advantage
        # min Q'(s, a) - V(s) use the V this step has just updated
        with torch.no_grad():
            v, next_v = self.value(torch.cat([b.obs, b.next_obs])).chunk(2)  # (B,), (B,)
        if next_v_before is not None:  # update_order=d3rlpy: Q's target from the V the step started from
            next_v = next_v_before
        adv = target_q - v
        y = b.rewards + p.gamma * (1.0 - b.terminated) * next_v
        q = self.critic(b.obs, b.actions)  # (2, B)
        q_loss = (q - y).pow(2).mean(dim=1).sum()
        self.critic_opt.zero_grad(set_to_none=True)
        q_loss.backward()
        self.critic_opt.step()
        weights = awr_weights(adv, p.beta, p.max_weight)
        pi_loss = -(weights * self.actor.log_prob(b.obs, b.actions)).mean()
        if p.cosine_policy_lr:
            for group in self.actor_opt.param_groups:
                group["lr"] = p.lr * cosine_lr(self.steps, self.ctx.total_steps)
        self.actor_opt.zero_grad(set_to_none=True)
        pi_loss.backward()
        self.actor_opt.step()
        with torch.no_grad():
            torch._foreach_lerp_(list(self.critic_target.parameters()), list(self.critic.parameters()), p.tau)
        return {
            "loss/value": q_loss.detach(),
            "loss/v": v_loss.detach(),
            "loss/policy": pi_loss.detach(),
            "train/adv_weight": weights.mean(),
        }

    def policy(self, obs: torch.Tensor, deterministic: bool) -> torch.Tensor:
        return self.actor.mean(obs) if deterministic else self.actor.sample(obs)

    def modules(self) -> dict[str, nn.Module]:
        return {"actor": self.actor, "critic": self.critic, "critic_target": self.critic_target, "value": self.value}

    def optimizers(self) -> list[torch.optim.Optimizer]:
        return [self.actor_opt, self.critic_opt, self.value_opt]


@CLASSIC.register(
    "iql",
    params=IQLParams,
    paper=IQL_PAPER,
    fidelity="faithful",
    departures=(
        "continuous actions only (the paper's experiments are continuous; no discrete variant here)",
        "torch's default initialisation (the authors' code: orthogonal, gain sqrt 2) and no policy dropout (the "
        "authors' MuJoCo settings use none); d3rlpy's IQL initialises the same way",
        "observations standardised by the dataset's mean and std + 1e-3 by default (normalize_obs; neither the "
        "authors' code nor d3rlpy's reproduction script normalises them, the paper is silent; "
        "benchmarks/offline_vs_d3rlpy.py gives d3rlpy the same scaler)",
        "two diagnostic arms take d3rlpy 2.8's departures from the authors: log_std=sigmoid (its log-std form) and "
        "update_order=d3rlpy (Q's target from V before the step); the defaults are the authors'",
    ),
)
def iql(ctx: ClassicContext, params: IQLParams = IQLParams()) -> IQL:
    """IQL from classic.dataset (Kostrikov et al. 2021, arXiv:2110.06169): expectile V, TD Q, AWR policy.

    V: |tau - 1(u<0)| u^2, u = min Q'(s, a) - V(s); Q: (Q(s, a) - r - gamma (1 - term) V(s'))^2;
    policy: -min(exp(beta (min Q'(s, a) - V(s))), max_weight) log pi(a|s).
    """
    return IQL(ctx, params)


iql.action_spaces = frozenset({"continuous"})
