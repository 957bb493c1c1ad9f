"""SQIRL, shallow Q-iteration via reinforcement imitation learning's deep variant (Laidlaw, Russell & Dragan 2023,
"Bridging RL Theory and Practice with the Effective Horizon", NeurIPS 2023, arXiv:2304.09853), discrete actions.

The paper's observation: many MDPs are solved by a few steps of value iteration on the Q function of the random
policy followed by acting greedily. SQIRL learns in rounds; round i:
  1. collect `round_steps` environment steps with the exploration policy (uniformly random in round 0, then
     epsilon-greedy around the current greedy policy) into a fresh, fixed dataset D_i (no replay across rounds);
  2. regress Q_1 on the discounted Monte-Carlo returns of D_i, G_t = r_t + gamma (1 - done_t) G_{t+1}
     (the exploration policy's Q; a tail cut by a time limit or by the round's end bootstraps with 0);
  3. k - 1 steps of fitted-Q iteration on the same D_i: Q_{j+1} regressed on the fixed targets
     y = r + gamma (1 - terminated) max_a' Q_j(s', a'), computed once per step from a frozen copy of Q_j;
  4. act greedily with respect to Q_k (the next round explores around it).
Each regression is `fit_epochs` shuffled passes of Huber loss over D_i, warm-started from the previous network.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from ascent import papers
from ascent.classic.base import CLASSIC, ClassicContext
from ascent.classic.dqn import dqn_target
from ascent.classic.networks import QNetwork, adam
from ascent.typed import ConfigError


@dataclass(frozen=True)
class SQIRLParams:
    """SQIRL (Laidlaw, Russell & Dragan 2023, arXiv:2304.09853), deep variant with fitted-Q iteration."""

    round_steps: int = 5000
    """Environment steps collected per round into that round's dataset, > 0 (a multiple of num_envs is used)."""
    k: int = 3
    """Q-iteration steps per round (1: the exploration policy's Monte-Carlo Q only), >= 1."""
    epsilon: float = 0.1
    """Random-action probability around the greedy policy from round 1 on (round 0 is uniformly random), [0, 1]."""
    gamma: float = 0.99
    """Discount, in (0, 1]."""
    lr: float = 1e-3
    """Adam learning rate of the regressions, > 0."""
    batch_size: int = 128
    """Transitions per regression step, > 0."""
    fit_epochs: int = 10
    """Shuffled passes over the round's dataset per regression, > 0."""
    chunk: int = 50
    """Vector steps one `iteration` collects (the loop's granularity for logs and checkpoints), > 0."""
    max_grad_norm: float = 10.0
    """Clip the gradient norm to this, > 0."""
    hidden: list[int] = field(default_factory=lambda: [64, 64])
    """Hidden widths of the Q-network (ReLU)."""

    def __post_init__(self) -> None:
        for key in ("round_steps", "k", "batch_size", "fit_epochs", "chunk"):
            if getattr(self, key) <= 0:
                raise ConfigError(f"sqirl: {key} must be > 0, got {getattr(self, key)}")
        if not 0.0 <= self.epsilon <= 1.0:
            raise ConfigError(f"sqirl: epsilon must be in [0, 1], got {self.epsilon}")
        if not 0.0 < self.gamma <= 1.0:
            raise ConfigError(f"sqirl: gamma must be in (0, 1], got {self.gamma}")
        if not self.lr > 0 or not self.max_grad_norm > 0:
            raise ConfigError(f"sqirl: lr and max_grad_norm must be > 0, got {self.lr}, {self.max_grad_norm}")
        if not self.hidden or min(self.hidden) <= 0:
            raise ConfigError(f"sqirl: hidden must list positive layer widths, got {self.hidden}")


def returns_to_go(rewards: np.ndarray, done: np.ndarray, gamma: float) -> np.ndarray:
    """G_t = r_t + gamma (1 - done_t) G_{t+1}, G after the last row = 0; rewards, done (T, E) -> (T, E).

    >>> returns_to_go(np.array([[1.0], [1.0], [1.0]]), np.array([[0.0], [1.0], [0.0]]), 0.5).ravel().tolist()
    [1.5, 1.0, 1.0]
    """
    out = np.zeros_like(rewards, dtype=np.float32)
    after = np.zeros(rewards.shape[1], np.float32)  # (E,)
    for t in range(len(rewards) - 1, -1, -1):
        after = rewards[t] + gamma * (1.0 - done[t]) * after
        out[t] = after
    return out


KEYS = ("obs", "actions", "rewards", "next_obs", "terminated", "done")


class SQIRL:
    """SQIRL on a VecEnv with discrete actions (see the module docstring)."""

    def __init__(self, ctx: ClassicContext, params: SQIRLParams) -> None:
        self.ctx, self.p, self.envs, self.steps = ctx, params, ctx.envs, 0
        envs, E = ctx.envs, ctx.envs.num_envs
        self.q = QNetwork(envs.obs_dim, envs.n_actions, params.hidden).to(ctx.device)
        self.parameters = list(self.q.parameters())
        self.optimizer = adam(self.parameters, params.lr)
        self.rng = np.random.default_rng(ctx.seed)
        self.T = max(1, params.round_steps // E)  # vector steps per round
        self.steps_per_iteration = params.chunk * E
        self.data = {
            "obs": np.zeros((self.T, E, envs.obs_dim), np.float32),
            "actions": np.zeros((self.T, E), np.int64),
            "rewards": np.zeros((self.T, E), np.float32),
            "next_obs": np.zeros((self.T, E, envs.obs_dim), np.float32),
            "terminated": np.zeros((self.T, E), np.float32),
            "done": np.zeros((self.T, E), np.float32),
        }
        self.t, self.round, self.last_loss = 0, 0, 0.0

    @torch.no_grad()
    def collect(self) -> None:
        """Up to `chunk` vector steps of the exploration policy into this round's dataset."""
        envs, E, d = self.envs, self.envs.num_envs, self.data
        eps = 1.0 if self.round == 0 else self.p.epsilon
        for _ in range(min(self.p.chunk, self.T - self.t)):
            obs = envs.obs
            greedy = self.q(torch.from_numpy(obs)).argmax(dim=1).numpy()
            explore = self.rng.random(E) < eps
            actions = np.where(explore, self.rng.integers(0, envs.n_actions, size=E), greedy)
            step = envs.step(actions)
            t = self.t
            d["obs"][t], d["actions"][t], d["rewards"][t], d["next_obs"][t] = obs, actions, step.reward, step.final_obs
            d["terminated"][t], d["done"][t] = step.terminated, step.terminated | step.truncated
            self.t, self.steps = t + 1, self.steps + E

    def iteration(self, want_metrics: bool) -> dict[str, float]:
        self.collect()
        if self.t == self.T:
            self.last_loss = self.fit_round()
            self.t, self.round = 0, self.round + 1
        if not want_metrics:
            return {}
        return {"loss/value": self.last_loss, "train/round": float(self.round), "train/lr": self.p.lr}

    def fit_round(self) -> float:
        """k regressions on the full dataset: Monte-Carlo returns, then k - 1 fitted-Q targets; the last loss."""
        d = self.data
        flat = {key: torch.from_numpy(v.reshape(self.T * self.envs.num_envs, *v.shape[2:])) for key, v in d.items()}
        y = torch.from_numpy(returns_to_go(d["rewards"], d["done"], self.p.gamma).reshape(-1))  # (N,)
        loss = self.regress(flat["obs"], flat["actions"], y)
        for _ in range(self.p.k - 1):
            frozen = copy.deepcopy(self.q)
            with torch.no_grad():
                y = dqn_target(flat["rewards"], flat["terminated"], frozen(flat["next_obs"]), self.p.gamma)  # (N,)
            loss = self.regress(flat["obs"], flat["actions"], y)
        return loss

    def regress(self, obs: torch.Tensor, actions: torch.Tensor, y: torch.Tensor) -> float:
        """fit_epochs shuffled Huber-loss passes of Q(s, a) onto the fixed targets y (N,); the last epoch's mean."""
        n, losses = len(y), []
        for _ in range(self.p.fit_epochs):
            losses = []
            for idx in np.array_split(self.rng.permutation(n), max(1, n // self.p.batch_size)):
                i = torch.from_numpy(idx)
                q = self.q(obs[i]).gather(1, actions[i, None]).squeeze(1)  # (b,)
                loss = F.smooth_l1_loss(q, y[i])
                self.optimizer.zero_grad(set_to_none=True)
                loss.backward()
                torch.nn.utils.clip_grad_norm_(self.parameters, self.p.max_grad_norm)
                self.optimizer.step()
                losses.append(loss.item())
        return float(np.mean(losses))

    @torch.no_grad()
    def act(self, obs: np.ndarray, deterministic: bool) -> np.ndarray:
        return self.q(torch.from_numpy(obs)).argmax(dim=1).numpy()

    def modules(self) -> dict[str, torch.nn.Module]:
        return {"q": self.q}

    def state_dict(self) -> dict[str, Any]:
        return {
            "optimizer": self.optimizer.state_dict(),
            "data": {key: self.data[key][: self.t].copy() for key in KEYS},
            "rng": self.rng.bit_generator.state,
            "steps": self.steps,
            "t": self.t,
            "round": self.round,
            "last_loss": self.last_loss,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.optimizer.load_state_dict(state["optimizer"])
        if state["t"] > self.T:
            raise ConfigError(f"sqirl: the checkpoint's round holds {state['t']} vector steps, more than {self.T}")
        for key in KEYS:
            self.data[key][: state["t"]] = state["data"][key]
        self.rng.bit_generator.state = state["rng"]
        self.steps, self.t, self.round, self.last_loss = state["steps"], state["t"], state["round"], state["last_loss"]


@CLASSIC.register(
    "sqirl",
    params=SQIRLParams,
    paper=papers.SQIRL,
    fidelity="reduced",
    departures=(
        (
            "a stationary policy with epsilon-greedy rounds after round 0: Q_1 regresses the near-greedy policy's "
            "returns, not the random policy's, so it is epsilon-greedy approximate policy iteration with k-step "
            "fitted-Q, not the paper's per-timestep scheme"
        ),
    ),
)
def sqirl(ctx: ClassicContext, params: SQIRLParams = SQIRLParams()) -> SQIRL:
    """SQIRL (Laidlaw, Russell & Dragan 2023, NeurIPS, arXiv:2304.09853), deep variant; discrete actions.

    Per round: a fixed dataset from random (round 0) or epsilon-greedy exploration; Q_1 <- regression on the
    Monte-Carlo returns G_t = r_t + gamma G_{t+1}; Q_{j+1} <- regression on r + gamma (1 - terminated)
    max_a' Q_j(s', a'), j < k; act greedily on Q_k.
    """
    return SQIRL(ctx, params)


sqirl.action_spaces = frozenset({"discrete"})
