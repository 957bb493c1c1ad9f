"""SAC with automatic entropy tuning (Haarnoja et al. 2018, "Soft actor-critic algorithms and applications",
arXiv:1812.05905), with the details of Stable-Baselines3's implementation, for continuous actions.

One iteration: train_freq vector steps (uniformly random actions for the first learning_starts steps, then
a ~ pi(.|s)) into a replay buffer, then gradient steps, each on one uniform mini-batch:
    alpha:  J(log alpha) = -log alpha * (log pi(a~|s) + target_entropy)          (a~ ~ pi(.|s), detached)
    critic: J(Q_i) = 1/2 (Q_i(s, a) - y)^2,  y = r + gamma (1 - terminated) (min_j Q'_j(s', a') - alpha log pi(a'|s'))
    actor:  J(pi) = alpha log pi(a~|s) - min_j Q_j(s, a~)                          (reparameterised a~)
in that order, alpha the value before its step; then the target critics move by Polyak averaging,
Q' <- tau Q + (1 - tau) Q'.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

import numpy as np
import torch

from ascent import papers
from ascent.classic.base import CLASSIC, ClassicContext
from ascent.classic.networks import SquashedGaussianPolicy, TwinQ, adam
from ascent.classic.replay import ReplayBuffer


@dataclass(frozen=True)
class SACParams:
    """SAC (Haarnoja et al. 2018, arXiv:1812.05905); defaults are Stable-Baselines3's."""

    lr: float = 3e-4
    """Adam learning rate of actor, critics and the temperature, > 0."""
    buffer_size: int = 1_000_000
    """Replay buffer capacity in transitions."""
    learning_starts: int = 100
    """Environment steps of uniformly random actions before learning starts, >= 0."""
    batch_size: int = 256
    """Transitions per gradient step."""
    tau: float = 0.005
    """Polyak step of the target critics, in (0, 1]."""
    gamma: float = 0.99
    """Discount, in (0, 1]."""
    train_freq: int = 1
    """Vector steps collected between two rounds of gradient steps."""
    gradient_steps: int = 1
    """Gradient steps per round; -1: as many as environment steps collected in the round."""
    alpha_init: float = 1.0
    """Initial temperature alpha (learned: log alpha is a parameter), > 0."""
    target_entropy: Optional[float] = None
    """Entropy the temperature aims at (None: -dim(A))."""
    hidden: list[int] = field(default_factory=lambda: [256, 256])
    """Hidden widths of the actor and of each critic (ReLU)."""

    def __post_init__(self) -> None:
        for key in ("buffer_size", "batch_size", "train_freq"):
            if getattr(self, key) <= 0:
                raise ValueError(f"{key} must be > 0, got {getattr(self, key)}")
        if self.gradient_steps == 0 or self.gradient_steps < -1:
            raise ValueError(f"gradient_steps must be > 0 or -1, got {self.gradient_steps}")
        if self.learning_starts < 0 or not self.lr > 0 or not self.alpha_init > 0:
            raise ValueError("learning_starts must be >= 0, lr and alpha_init > 0")
        if not 0.0 < self.tau <= 1.0 or not 0.0 < self.gamma <= 1.0:
            raise ValueError(f"tau and gamma must be in (0, 1], got {self.tau}, {self.gamma}")
        if not self.hidden or min(self.hidden) <= 0:
            raise ValueError(f"hidden must list positive layer widths, got {self.hidden}")


def alpha_loss(log_alpha: torch.Tensor, log_prob: torch.Tensor, target_entropy: float) -> torch.Tensor:
    """-mean(log alpha * (log pi + target_entropy)), log_prob (B,) detached.

    >>> float(alpha_loss(torch.tensor(0.5), torch.tensor([-1.0, -3.0]), 1.0))
    0.5
    """
    return -(log_alpha * (log_prob + target_entropy).detach()).mean()


def critic_loss(
    q: torch.Tensor,
    next_q: torch.Tensor,
    next_log_prob: torch.Tensor,
    rewards: torch.Tensor,
    terminated: torch.Tensor,
    gamma: float,
    alpha: float,
) -> torch.Tensor:
    """sum_i 1/2 mean (Q_i - y)^2 with y = r + gamma (1 - term) (min_j Q'_j(s', a') - alpha log pi(a'|s'));
    q, next_q (2, B), the rest (B,)."""
    with torch.no_grad():
        y = rewards + gamma * (1.0 - terminated) * (next_q.min(dim=0).values - alpha * next_log_prob)  # (B,)
    return 0.5 * (q - y).pow(2).mean(dim=1).sum()


def actor_loss(q_pi: torch.Tensor, log_prob: torch.Tensor, alpha: float) -> torch.Tensor:
    """mean(alpha log pi(a~|s) - min_j Q_j(s, a~)); q_pi (2, B), log_prob (B,)."""
    return (alpha * log_prob - q_pi.min(dim=0).values).mean()


class SAC:
    """SAC on a VecEnv with continuous actions (see the module docstring)."""

    def __init__(self, ctx: ClassicContext, params: SACParams) -> None:
        self.ctx, self.p, self.envs, self.steps = ctx, params, ctx.envs, 0
        envs, p = ctx.envs, params
        self.actor = SquashedGaussianPolicy(envs.obs_dim, envs.action_dim, p.hidden, envs.low, envs.high)
        self.critic = TwinQ(envs.obs_dim, envs.action_dim, p.hidden)
        self.critic_target = TwinQ(envs.obs_dim, envs.action_dim, p.hidden)
        self.critic_target.load_state_dict(self.critic.state_dict())
        for m in (self.actor, self.critic, self.critic_target):
            m.to(ctx.device)
        self.log_alpha = torch.nn.Parameter(torch.tensor(float(np.log(p.alpha_init)), device=ctx.device))
        self.target_entropy = -float(envs.action_dim) if p.target_entropy is None else p.target_entropy
        self.actor_params = list(self.actor.parameters())
        self.actor_opt = adam(self.actor_params, p.lr)
        self.critic_opt = adam(list(self.critic.parameters()), p.lr)
        self.alpha_opt = adam([self.log_alpha], p.lr)
        self.buffer = ReplayBuffer(p.buffer_size, envs.obs_dim, (envs.action_dim,), discrete=False)
        self.rng = np.random.default_rng(ctx.seed)
        self.steps_per_iteration = p.train_freq * envs.num_envs

    @torch.no_grad()
    def collect(self) -> None:
        envs, E = self.envs, self.envs.num_envs
        for _ in range(self.p.train_freq):
            obs = envs.obs
            if self.steps < self.p.learning_starts:
                actions = self.rng.uniform(envs.low, envs.high, size=(E, envs.action_dim)).astype(np.float32)
            else:
                actions = self.actor.sample(torch.from_numpy(obs))[0].numpy()
            step = envs.step(actions)
            self.buffer.add(obs, actions, step.reward, step.final_obs, step.terminated)
            self.steps += E

    def iteration(self, want_metrics: bool) -> dict[str, float]:
        self.collect()
        if self.steps <= self.p.learning_starts:
            return {}
        n = self.p.gradient_steps if self.p.gradient_steps > 0 else self.steps_per_iteration
        metrics = [self.gradient_step() for _ in range(n)][-1]
        return {k: float(v) for k, v in metrics.items()} if want_metrics else {}

    def gradient_step(self) -> dict[str, torch.Tensor]:
        """Temperature, critics, actor, then the Polyak target update, on one mini-batch."""
        b = self.buffer.sample(self.p.batch_size, self.rng)
        actions_pi, log_prob = self.actor.sample(b.obs)
        alpha = self.log_alpha.detach().exp()
        a_loss = alpha_loss(self.log_alpha, log_prob, self.target_entropy)
        self.alpha_opt.zero_grad(set_to_none=True)
        a_loss.backward()
        self.alpha_opt.step()
        with torch.no_grad():
            next_actions, next_log_prob = self.actor.sample(b.next_obs)
            next_q = self.critic_target(b.next_obs, next_actions)  # (2, B)
        c_loss = critic_loss(
            self.critic(b.obs, b.actions), next_q, next_log_prob, b.rewards, b.terminated, self.p.gamma, alpha
        )
        self.critic_opt.zero_grad(set_to_none=True)
        c_loss.backward()
        self.critic_opt.step()
        pi_loss = actor_loss(self.critic(b.obs, actions_pi), log_prob, alpha)
        grads = torch.autograd.grad(pi_loss, self.actor_params)  # through the critics, not into their weights
        for param, grad in zip(self.actor_params, grads):
            param.grad = grad
        self.actor_opt.step()
        with torch.no_grad():
            torch._foreach_lerp_(list(self.critic_target.parameters()), list(self.critic.parameters()), self.p.tau)
        return {
            "loss/value": c_loss.detach(),
            "loss/policy": pi_loss.detach(),
            "loss/entropy": alpha,
            "loss/alpha": a_loss.detach(),
        }

    @torch.no_grad()
    def act(self, obs: np.ndarray, deterministic: bool) -> np.ndarray:
        x = torch.from_numpy(obs)
        return (self.actor.mode(x) if deterministic else self.actor.sample(x)[0]).numpy()

    def modules(self) -> dict[str, torch.nn.Module]:
        return {"actor": self.actor, "critic": self.critic, "critic_target": self.critic_target}

    def state_dict(self) -> dict[str, Any]:
        return {
            "log_alpha": self.log_alpha.detach().clone(),
            "optimizers": [o.state_dict() for o in (self.actor_opt, self.critic_opt, self.alpha_opt)],
            "buffer": self.buffer.state_dict(),
            "rng": self.rng.bit_generator.state,
            "steps": self.steps,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        with torch.no_grad():
            self.log_alpha.copy_(state["log_alpha"])
        for opt, s in zip((self.actor_opt, self.critic_opt, self.alpha_opt), state["optimizers"]):
            opt.load_state_dict(s)
        self.buffer.load_state_dict(state["buffer"])
        self.rng.bit_generator.state = state["rng"]
        self.steps = state["steps"]


@CLASSIC.register("sac", params=SACParams, paper=papers.SAC, fidelity="faithful")
def sac(ctx: ClassicContext, params: SACParams = SACParams()) -> SAC:
    """SAC, twin soft Q + tanh-Gaussian actor + learned temperature (Haarnoja et al. 2018, arXiv:1812.05905).

    Critics: 1/2 (Q_i(s, a) - y)^2, y = r + gamma (1 - term) (min_j Q'_j(s', a') - alpha log pi(a'|s'));
    actor: alpha log pi(a~|s) - min_j Q_j(s, a~); temperature: -log alpha (log pi(a~|s) + target_entropy).
    """
    return SAC(ctx, params)


sac.action_spaces = frozenset({"continuous"})
