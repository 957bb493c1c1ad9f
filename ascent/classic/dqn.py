"""DQN (Mnih et al. 2015, "Human-level control through deep reinforcement learning", Nature 518:529), with the
details of Stable-Baselines3's implementation, for discrete actions.

One iteration: train_freq vector steps with epsilon-greedy actions (epsilon decays linearly from eps_start to
eps_end over the first exploration_fraction of the run) into a replay buffer, then gradient steps on
    L = Huber(Q(s, a) - y),   y = r + gamma (1 - terminated) max_a' Q_target(s', a'),
mini-batches drawn uniformly from the buffer; the target network is a hard copy of Q every
target_update_interval environment steps. A time-limit cut is not terminal: it bootstraps.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from ascent import papers
from ascent.classic.base import CLASSIC, ClassicContext
from ascent.classic.networks import QNetwork, adam
from ascent.classic.replay import ReplayBuffer


@dataclass(frozen=True)
class DQNParams:
    """DQN (Mnih et al. 2015, Nature 518:529); defaults are Stable-Baselines3's."""

    lr: float = 1e-4
    """Adam learning rate, > 0."""
    buffer_size: int = 1_000_000
    """Replay buffer capacity in transitions."""
    learning_starts: int = 100
    """Environment steps of uniformly random actions before learning starts, >= 0."""
    batch_size: int = 32
    """Transitions per gradient step."""
    gamma: float = 0.99
    """Discount, in (0, 1]."""
    train_freq: int = 4
    """Vector steps collected between two rounds of gradient steps."""
    gradient_steps: int = 1
    """Gradient steps per round; -1: as many as environment steps collected in the round."""
    target_update_interval: int = 10_000
    """Environment steps between hard copies of Q into the target network."""
    exploration_fraction: float = 0.1
    """Share of the run over which epsilon decays linearly, in (0, 1]."""
    eps_start: float = 1.0
    """Initial epsilon, in [0, 1]."""
    eps_end: float = 0.05
    """Final epsilon, in [0, 1]."""
    max_grad_norm: float = 10.0
    """Clip the gradient norm to this, > 0."""
    hidden: list[int] = field(default_factory=lambda: [64, 64])
    """Hidden widths of the Q-network (ReLU)."""

    def __post_init__(self) -> None:
        for key in ("buffer_size", "batch_size", "train_freq", "target_update_interval"):
            if getattr(self, key) <= 0:
                raise ValueError(f"{key} must be > 0, got {getattr(self, key)}")
        if self.gradient_steps == 0 or self.gradient_steps < -1:
            raise ValueError(f"gradient_steps must be > 0 or -1, got {self.gradient_steps}")
        if self.learning_starts < 0 or not self.lr > 0 or not self.max_grad_norm > 0:
            raise ValueError("learning_starts must be >= 0, lr and max_grad_norm > 0")
        if not 0.0 < self.gamma <= 1.0 or not 0.0 < self.exploration_fraction <= 1.0:
            raise ValueError(
                f"gamma and exploration_fraction must be in (0, 1], got {self.gamma}, {self.exploration_fraction}"
            )
        if not (0.0 <= self.eps_end <= 1.0 and 0.0 <= self.eps_start <= 1.0):
            raise ValueError(f"eps_start and eps_end must be in [0, 1], got {self.eps_start}, {self.eps_end}")
        if not self.hidden or min(self.hidden) <= 0:
            raise ValueError(f"hidden must list positive layer widths, got {self.hidden}")


def dqn_target(rewards: torch.Tensor, terminated: torch.Tensor, next_q: torch.Tensor, gamma: float) -> torch.Tensor:
    """y = r + gamma (1 - terminated) max_a' Q_target(s', a'); rewards, terminated (B,), next_q (B, A).

    >>> dqn_target(torch.tensor([1.0, 1.0]), torch.tensor([0.0, 1.0]), torch.tensor([[2.0, 3.0], [5.0, 4.0]]), 0.5)
    tensor([2.5000, 1.0000])
    """
    return rewards + gamma * (1.0 - terminated) * next_q.max(dim=1).values


def linear_epsilon(steps: int, total: int, params: DQNParams) -> float:
    """eps_start -> eps_end linearly over the first exploration_fraction * total steps, then eps_end.

    >>> p = DQNParams(exploration_fraction=0.5, eps_start=1.0, eps_end=0.0)
    >>> linear_epsilon(0, 100, p), linear_epsilon(25, 100, p), linear_epsilon(80, 100, p)
    (1.0, 0.5, 0.0)
    """
    done = steps / total
    if done >= params.exploration_fraction:
        return params.eps_end
    return params.eps_start + done * (params.eps_end - params.eps_start) / params.exploration_fraction


class DQN:
    """DQN on a VecEnv with discrete actions (see the module docstring)."""

    def __init__(self, ctx: ClassicContext, params: DQNParams) -> None:
        self.ctx, self.p, self.envs, self.steps = ctx, params, ctx.envs, 0
        envs = ctx.envs
        self.q = QNetwork(envs.obs_dim, envs.n_actions, params.hidden).to(ctx.device)
        self.q_target = QNetwork(envs.obs_dim, envs.n_actions, params.hidden).to(ctx.device)
        self.q_target.load_state_dict(self.q.state_dict())
        self.parameters = list(self.q.parameters())
        self.optimizer = adam(self.parameters, params.lr)
        self.buffer = ReplayBuffer(params.buffer_size, envs.obs_dim, (), discrete=True)
        self.rng = np.random.default_rng(ctx.seed)
        self.steps_per_iteration = params.train_freq * envs.num_envs
        self.epsilon, self.target_count = params.eps_start, 0

    @torch.no_grad()
    def collect(self) -> None:
        """train_freq vector steps, epsilon-greedy, into the buffer; the target network copied when due."""
        envs, E = self.envs, self.envs.num_envs
        for _ in range(self.p.train_freq):
            self.epsilon = linear_epsilon(self.steps, self.ctx.total_steps, self.p)
            obs = envs.obs
            greedy = self.q(torch.from_numpy(obs)).argmax(dim=1).numpy()
            explore = self.rng.random(E) < (1.0 if self.steps < self.p.learning_starts else self.epsilon)
            actions = np.where(explore, self.rng.integers(0, envs.n_actions, size=E), greedy)
            step = envs.step(actions)
            self.store(obs, actions, step)
            self.steps += E
            if self.steps // self.p.target_update_interval > self.target_count:
                self.target_count = self.steps // self.p.target_update_interval
                self.q_target.load_state_dict(self.q.state_dict())

    def store(self, obs: np.ndarray, actions: np.ndarray, step: Any) -> None:
        """Put one vector step (`step`: an `ascent.classic.envs.Step`) into the buffer; a hook for variants that
        keep more of the step (MD3QN's reward vectors)."""
        self.buffer.add(obs, actions, step.reward, step.final_obs, step.terminated)

    def iteration(self, want_metrics: bool) -> dict[str, float]:
        self.collect()
        if self.steps <= self.p.learning_starts:
            return {"train/epsilon": self.epsilon} if want_metrics else {}
        n = self.p.gradient_steps if self.p.gradient_steps > 0 else self.steps_per_iteration
        losses = [self.gradient_step() for _ in range(n)]
        if not want_metrics:
            return {}
        return {"loss/value": float(torch.stack(losses).mean()), "train/epsilon": self.epsilon, "train/lr": self.p.lr}

    def gradient_step(self) -> torch.Tensor:
        """One Huber-loss step on a uniform mini-batch; the loss (detached)."""
        b = self.buffer.sample(self.p.batch_size, self.rng)
        with torch.no_grad():
            y = dqn_target(b.rewards, b.terminated, self.q_target(b.next_obs), self.p.gamma)  # (B,)
        q = self.q(b.obs).gather(1, b.actions[:, None]).squeeze(1)  # (B,)
        loss = F.smooth_l1_loss(q, y)
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.parameters, self.p.max_grad_norm)
        self.optimizer.step()
        return loss.detach()

    @torch.no_grad()
    def act(self, obs: np.ndarray, deterministic: bool) -> np.ndarray:
        return self.q(torch.from_numpy(obs)).argmax(dim=1).numpy()

    def modules(self) -> dict[str, torch.nn.Module]:
        return {"q": self.q, "q_target": self.q_target}

    def state_dict(self) -> dict[str, Any]:
        return {
            "optimizer": self.optimizer.state_dict(),
            "buffer": self.buffer.state_dict(),
            "rng": self.rng.bit_generator.state,
            "steps": self.steps,
            "epsilon": self.epsilon,
            "target_count": self.target_count,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.optimizer.load_state_dict(state["optimizer"])
        self.buffer.load_state_dict(state["buffer"])
        self.rng.bit_generator.state = state["rng"]
        self.steps, self.epsilon, self.target_count = state["steps"], state["epsilon"], state["target_count"]


@CLASSIC.register(
    "dqn",
    params=DQNParams,
    paper=papers.DQN,
    fidelity="faithful",
    departures=(
        (
            "Stable-Baselines3's details: Adam, MLP on vector observations (no Atari CNN or frame stack), a "
            "time-limit cut bootstraps"
        ),
    ),
)
def dqn(ctx: ClassicContext, params: DQNParams = DQNParams()) -> DQN:
    """DQN, replay + target network + Huber loss (Mnih et al. 2015, Nature 518:529); discrete actions.

    L = mean Huber(Q(s, a) - y), y = r + gamma (1 - terminated) max_a' Q_target(s', a'); epsilon-greedy acting.
    """
    return DQN(ctx, params)


dqn.action_spaces = frozenset({"discrete"})
