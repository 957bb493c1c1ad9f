"""SQIRL, shallow Q-iteration via reinforcement imitation learning (Laidlaw, Russell & Dragan 2023, "Bridging RL
Theory and Practice with the Effective Horizon", NeurIPS 2023, arXiv:2304.09853), deep variant, discrete actions.

The paper's observation: many MDPs are solved by a few steps of value iteration on the Q function of the random
policy followed by acting greedily. The authors' deep SQIRL (effective-horizon repository, sb3 `sqirl.py`) learns
a non-stationary policy one timestep at a time; `scheme="timestep"` (default) does that. Round i (i = 0, 1, ...):
  1. collect `round_steps` environment steps of whole episodes that act greedily with the frozen policies
     pi_0..pi_{i-1} at timesteps 0..i-1 and uniformly at random from timestep i on; keep the transitions at
     t >= i (those followed by random actions) of the episodes that ended within the round;
  2. regress Q_1 on their discounted Monte-Carlo returns G_t = r_t + gamma (1 - done_t) G_{t+1}: the random
     policy's Q (a time limit's cut bootstraps with 0);
  3. k - 1 steps of fitted-Q iteration on the same data: Q_{j+1} regressed on the fixed targets
     y = r + gamma (1 - terminated) max_a' Q_j(s', a'), computed once per step from a frozen copy of Q_j;
  4. freeze pi_i = greedy on Q_k (one network per timestep).
Acting at timestep t uses pi_t, and the last learned pi beyond the learned depth (the authors stop at the
horizon; a CPU budget learns fewer stages than the episode length). Each regression is `fit_epochs` shuffled
passes of Huber loss, warm-started from the previous stage's network.

`scheme="stationary"` is ascent's own variant, not the paper's: one stationary network; round 0 uniformly
random, later rounds epsilon-greedy around the current greedy Q (so after round 0, Q_1 is the near-greedy
policy's Q, not the random policy's: epsilon-greedy approximate policy iteration with k-step fitted-Q); the
effective-horizon guarantee does not apply to it.
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

    scheme: str = "timestep"
    """`timestep`: the paper's scheme, one greedy policy per timestep, learned from random continuations after
    the learned prefix; `stationary`: ascent's own epsilon-greedy fitted-Q iteration with one network."""

    round_steps: int = 5000
    """Environment steps collected per round into that round's dataset, > 0 (a multiple of num_envs is used)."""
    k: int = 3
    """Q-iteration steps per round (1: the exploration policy's Monte-Carlo Q only), >= 1."""
    epsilon: float = 0.1
    """scheme=stationary only: random-action probability around the greedy policy from round 1 on (round 0 is
    uniformly random), [0, 1]."""
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
        if self.scheme not in ("timestep", "stationary"):
            raise ConfigError(f"sqirl: scheme must be 'timestep' or 'stationary', got {self.scheme!r}")
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


def ended_within(done: np.ndarray) -> np.ndarray:
    """(T, E) 1 where the transition belongs to an episode that ended within the rows (at or before its env's
    last done), 0 for the unfinished tail after it (its Monte-Carlo return would be cut).

    >>> ended_within(np.array([[0.0, 0.0], [1.0, 0.0], [0.0, 1.0], [0.0, 0.0]])).T.tolist()
    [[1.0, 1.0, 0.0, 0.0], [1.0, 1.0, 1.0, 0.0]]
    """
    T = len(done)
    last = np.where(done.any(axis=0), T - 1 - np.argmax(done[::-1], axis=0), -1)  # (E,) row of the last done
    return (np.arange(T)[:, None] <= last[None, :]).astype(np.float32)


KEYS = ("obs", "actions", "rewards", "next_obs", "terminated", "done", "keep")


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
            "keep": np.ones((self.T, E), np.float32),
        }
        self.t, self.round, self.last_loss = 0, 0, 0.0
        self.ep_t = np.zeros(E, np.int64)  # each environment's timestep in its current episode
        self.policies: list[QNetwork] = []  # scheme=timestep: the frozen greedy policy of each timestep
        self.eval_t = 0  # the timestep of the evaluation episodes (stepped in lockstep)

    @torch.no_grad()
    def collect(self) -> None:
        """Up to `chunk` vector steps of the exploration policy into this round's dataset."""
        envs, E, d = self.envs, self.envs.num_envs, self.data
        for _ in range(min(self.p.chunk, self.T - self.t)):
            obs = envs.obs
            random = self.rng.integers(0, envs.n_actions, size=E)
            if self.p.scheme == "timestep":
                actions, keep = random, self.ep_t >= self.round  # (E,): random from timestep `round` on
                for e in np.nonzero(~keep)[0]:  # the learned prefix: pi_t at timestep t < round
                    actions[e] = int(self.policies[self.ep_t[e]](torch.from_numpy(obs[e : e + 1])).argmax())
            else:
                eps = 1.0 if self.round == 0 else self.p.epsilon
                greedy = self.q(torch.from_numpy(obs)).argmax(dim=1).numpy()
                actions, keep = np.where(self.rng.random(E) < eps, random, greedy), np.ones(E, bool)
            step = envs.step(actions)
            t = self.t
            d["obs"][t], d["actions"][t], d["rewards"][t], d["next_obs"][t] = obs, actions, step.reward, step.final_obs
            d["terminated"][t], d["done"][t] = step.terminated, step.terminated | step.truncated
            d["keep"][t] = keep
            self.ep_t = np.where(d["done"][t] > 0, 0, self.ep_t + 1)
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
        """k regressions on the round's dataset: Monte-Carlo returns, then k - 1 fitted-Q targets; the last loss.
        scheme=timestep: only the kept transitions (random continuations) of episodes that ended in the round,
        and the result is frozen as the next timestep's policy."""
        d = self.data
        flat = {key: torch.from_numpy(v.reshape(self.T * self.envs.num_envs, *v.shape[2:])) for key, v in d.items()}
        y = torch.from_numpy(returns_to_go(d["rewards"], d["done"], self.p.gamma).reshape(-1))  # (N,)
        rows = torch.arange(len(y))
        if self.p.scheme == "timestep":
            use = d["keep"] * ended_within(d["done"])  # (T, E)
            rows = torch.from_numpy(np.nonzero(use.reshape(-1))[0])
            if len(rows) == 0:  # no usable episode (all ran past the round): keep the previous stage's network
                self.policies.append(copy.deepcopy(self.q).requires_grad_(False))
                return self.last_loss
        sub = {key: v[rows] for key, v in flat.items()}
        loss = self.regress(sub["obs"], sub["actions"], y[rows])
        for _ in range(self.p.k - 1):
            frozen = copy.deepcopy(self.q)
            with torch.no_grad():
                y2 = dqn_target(sub["rewards"], sub["terminated"], frozen(sub["next_obs"]), self.p.gamma)  # (n,)
            loss = self.regress(sub["obs"], sub["actions"], y2)
        if self.p.scheme == "timestep":
            self.policies.append(copy.deepcopy(self.q).requires_grad_(False))
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

    def begin_episodes(self) -> None:
        """Evaluation episodes start (they step in lockstep: every `act` call is one timestep)."""
        self.eval_t = 0

    @torch.no_grad()
    def act(self, obs: np.ndarray, deterministic: bool) -> np.ndarray:
        q = self.q
        if self.p.scheme == "timestep" and self.policies:
            q = self.policies[min(self.eval_t, len(self.policies) - 1)]
        self.eval_t += 1
        return q(torch.from_numpy(obs)).argmax(dim=1).numpy()

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
            "ep_t": self.ep_t.copy(),
            "policies": [{k: v.clone() for k, v in p.state_dict().items()} for p in self.policies],
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.optimizer.load_state_dict(state["optimizer"])
        if state["t"] > self.T:
            raise ConfigError(f"sqirl: the checkpoint's round holds {state['t']} vector steps, more than {self.T}")
        for key in KEYS:
            self.data[key][: state["t"]] = state["data"][key]
        self.rng.bit_generator.state = state["rng"]
        self.steps, self.t, self.round, self.last_loss = state["steps"], state["t"], state["round"], state["last_loss"]
        self.ep_t = np.asarray(state["ep_t"], np.int64).copy()
        self.policies = []
        for weights in state["policies"]:
            net = copy.deepcopy(self.q).requires_grad_(False)
            net.load_state_dict(weights)
            self.policies.append(net)


@CLASSIC.register(
    "sqirl",
    params=SQIRLParams,
    paper=papers.SQIRL,
    fidelity="faithful",
    departures=(
        "beyond the learned depth (one stage per round: a few on a CPU budget) the last learned policy acts, "
        "where the authors learn one per step of the horizon",
        "episodes still running at a round's end are left out of that round's regression",
        "`scheme=stationary` is ascent's own epsilon-greedy fitted-Q iteration, not the paper's algorithm",
    ),
)
def sqirl(ctx: ClassicContext, params: SQIRLParams = SQIRLParams()) -> SQIRL:
    """SQIRL (Laidlaw, Russell & Dragan 2023, NeurIPS, arXiv:2304.09853), deep variant; discrete actions.

    Round i: episodes follow the frozen greedy policies pi_0..pi_{i-1} for their first i steps, then act
    uniformly at random; on the random continuations Q_1 <- regression on the Monte-Carlo returns
    G_t = r_t + gamma G_{t+1} (the random policy's Q), Q_{j+1} <- regression on r + gamma (1 - terminated)
    max_a' Q_j(s', a'), j < k; pi_i = greedy on Q_k; acting at timestep t uses pi_t (scheme=timestep).
    scheme=stationary is ascent's own epsilon-greedy variant (see the module docstring).
    """
    return SQIRL(ctx, params)


sqirl.action_spaces = frozenset({"discrete"})
