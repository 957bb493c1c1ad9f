"""Skipper (Zhao, Alver, van Seijen, Laroche, Precup & Bengio 2024, "Consciousness-Inspired Spatio-Temporal
Abstractions for Better Generalization in Reinforcement Learning", ICLR 2024, arXiv:2310.00229): decision-time
planning over a small graph of *checkpoints* whose vertices and edges are learned from hindsight.

- Checkpoints are partial descriptions of states: here the agent's cell (the state with its agent plane replaced),
  as the authors' gridworld checkpoints are agent positions. A checkpoint *generator* p(cell | s), trained on
  hindsight pairs (s, a cell the agent occupied in the same episode: the authors' "episode" strategy), proposes
  `candidates` cells at the start of an episode; the distinct ones, with the current state and the task's goal,
  are the vertices (at most `checkpoints`).
- Edges (the abstract problem) come from goal-conditioned estimators trained with hindsight-relabelled targets t:
  the distance d(s, a, t) in steps (target 1 + [0 if s' reaches t, max_distance if s' is terminal, else
  d_target(s', a*, t)], a* = argmin_a d(s', a, t): the authors' transformed discount target in their `no_Q_head`
  mode, where the distance estimate is also the local policy; an edge's discount is gamma^d), the cumulative reward
  G(s, a, t) = r + gamma G_target(s', a*, t) (0 after reaching t or terminating), and the terminal classifier
  omega(s). A share `random_targets` of the relabelled targets are
  uniform random cells, so unreachable targets learn a discount near 0.
- Planning: edge i -> j takes a* = argmin_a d(v_i, a, v_j), discount gamma^d and reward G there; edges longer
  than `dist_cutoff` steps, self loops, edges into vertices at the agent's own cell and edges out of
  terminal vertices are pruned; `plan_iters`
  sweeps of value iteration Q = R + Gamma V (the authors' `abstract_planning`, 5 sweeps) give the next checkpoint
  argmax_j Q[current, j] (ties to the nearer one). The agent follows argmin_a d(s, a, target) and replans when it
  arrives at another vertex or after `replan_every` steps; training adds epsilon-greedy primitive actions.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from ascent import papers
from ascent.classic.base import CLASSIC, ClassicContext
from ascent.classic.networks import adam, mlp
from ascent.classic.replay import ReplayBuffer


@dataclass(frozen=True)
class SkipperParams:
    """Skipper (Zhao et al. 2024, arXiv:2310.00229) on a grid observation whose last plane is the agent's cell."""

    lr: float = 5e-4
    """Adam learning rate of every network, > 0."""
    gamma: float = 0.99
    """Discount of the edge estimates and of the task, in (0, 1)."""
    hidden: list[int] = field(default_factory=lambda: [256, 256])
    """Hidden widths of the edge estimator, the terminal classifier and the generator (ReLU)."""
    batch_size: int = 64
    """Relabelled transitions per gradient step."""
    buffer_size: int = 50000
    """Replay capacity."""
    learning_starts: int = 1000
    """Environment steps of uniform random actions before learning and planning."""
    train_freq: int = 4
    """Environment steps between gradient steps (the authors': 4)."""
    target_update_interval: int = 1000
    """Environment steps between hard copies of the edge estimator into its target."""
    exploration_fraction: float = 0.25
    """Share of total_steps over which epsilon decays linearly from eps_start to eps_end."""
    eps_start: float = 1.0
    """Epsilon of the epsilon-greedy primitive actions at the start."""
    eps_end: float = 0.05
    """Epsilon after the decay."""
    checkpoints: int = 12
    """Vertices of the planning graph, the current state and the goal included (the authors': 12)."""
    candidates: int = 32
    """Cells drawn from the generator per graph (the authors' 32 unpruned checkpoints); the distinct ones are kept."""
    replan_every: int = 8
    """Steps after which the agent replans even if it has not reached a vertex (the authors' freq_plan 8)."""
    dist_cutoff: float = 8.0
    """Edges estimated longer than this many steps are pruned."""
    plan_iters: int = 5
    """Value-iteration sweeps over the graph (the authors': 5)."""
    random_targets: float = 0.25
    """Share of relabelled targets drawn uniformly over cells instead of from the transition's episode."""
    max_distance: float = 64.0
    """The distance estimate's ceiling (an unreachable target, one behind a terminal state), > dist_cutoff."""

    def __post_init__(self) -> None:
        for key in ("batch_size", "buffer_size", "train_freq", "target_update_interval", "replan_every", "plan_iters"):
            if getattr(self, key) <= 0:
                raise ValueError(f"{key} must be > 0, got {getattr(self, key)}")
        if self.checkpoints < 2 or self.candidates < 1:
            raise ValueError(f"checkpoints must be >= 2 and candidates >= 1, got {self.checkpoints}, {self.candidates}")
        if not 0.0 < self.gamma < 1.0 or not 0.0 < self.exploration_fraction <= 1.0:
            raise ValueError(f"gamma must be in (0, 1) and exploration_fraction in (0, 1], got {self.gamma}")
        if not self.lr > 0 or not 0 < self.dist_cutoff < self.max_distance or self.learning_starts < 0:
            raise ValueError("lr must be > 0, dist_cutoff in (0, max_distance) and learning_starts >= 0")
        if not (0.0 <= self.random_targets <= 1.0 and 0.0 <= self.eps_end <= 1.0 and 0.0 <= self.eps_start <= 1.0):
            raise ValueError("random_targets, eps_start and eps_end must be in [0, 1]")
        if not self.hidden or min(self.hidden) <= 0:
            raise ValueError(f"hidden must list positive layer widths, got {self.hidden}")


def plan_graph(
    discounts: torch.Tensor, rewards: torch.Tensor, terminal: torch.Tensor, keep: torch.Tensor, iters: int
) -> torch.Tensor:
    """Q (N, N) of option i -> j after `iters` value-iteration sweeps Q = R + Gamma V, V = max_j Q, on the edges
    `keep` (N, N bool) out of non-terminal vertices; a self loop and a pruned edge are worth 0 (the authors'
    `abstract_planning` with `no_loop`).

    >>> d = torch.tensor([[0.0, 0.9, 0.5], [0.9, 0.0, 0.9], [0.0, 0.0, 0.0]])
    >>> r = torch.tensor([[0.0, 0.0, 0.3], [0.0, 0.0, 1.0], [0.0, 0.0, 0.0]])
    >>> plan_graph(d, r, torch.tensor([False, False, True]), torch.ones(3, 3, dtype=torch.bool), 5)[0]
    tensor([0.0000, 0.9000, 0.3000])
    """
    keep = keep & ~terminal[:, None] & ~torch.eye(len(discounts), dtype=torch.bool)
    gam, rew = discounts * keep, rewards * keep
    v = torch.zeros(len(discounts), dtype=discounts.dtype)
    for _ in range(iters):
        q = rew + gam * v[None, :]
        v = q.max(1).values
    return q


def distance_target(
    reached: torch.Tensor, terminated: torch.Tensor, next_distance: torch.Tensor, ceiling: float
) -> torch.Tensor:
    """The bootstrapped distance to a target: 1 + (0 where s' reaches it, the ceiling where s' is terminal short of
    it, else the target network's distance from s'), at most the ceiling (the authors' transformed discount target).

    >>> distance_target(torch.tensor([True, False, False]), torch.tensor([True, True, False]),
    ...                 torch.tensor([5.0, 5.0, 5.0]), 64.0)
    tensor([ 1., 64.,  6.])
    """
    rest = torch.where(reached, 0.0, torch.where(terminated, ceiling, next_distance))
    return (1.0 + rest).clamp(max=ceiling)


def choose_target(q_row: torch.Tensor, distances: torch.Tensor, tol: float = 1e-5) -> int:
    """The vertex j > 0 of highest Q[current, j]; among ties, the nearest (the authors' "more robust" target).

    >>> choose_target(torch.tensor([0.0, 0.5, 0.5, 0.2]), torch.tensor([0.0, 6.0, 3.0, 1.0]))
    2
    """
    q = q_row.clone()
    q[0] = -math.inf
    ties = torch.nonzero(q >= q.max() - tol).flatten()
    return int(ties[distances[ties].argmin()])


class EdgeNet(torch.nn.Module):
    """(s, one-hot target cell) -> per action: distance in steps and cumulative reward (2A outputs). The input also
    carries the target's offset from the agent, (dx, dy) / side: the relation the authors' binder extracts."""

    def __init__(self, obs_dim: int, cells: int, n_actions: int, hidden: list[int]) -> None:
        super().__init__()
        self.n_actions, self.cells, self.side = n_actions, cells, math.isqrt(cells)
        self.net = mlp([obs_dim + cells + 2, *hidden, 2 * n_actions], "relu")

    def forward(self, obs: torch.Tensor, target: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        here, there = obs[:, -self.cells :].argmax(-1), target.argmax(-1)
        offset = torch.stack([there // self.side - here // self.side, there % self.side - here % self.side], -1)
        out = self.net(torch.cat([obs, target, offset.float() / self.side], -1))
        return out[:, : self.n_actions], out[:, self.n_actions :]  # distances, rewards


@dataclass
class Plan:
    """The current graph and target of one episode."""

    vertices: list[int] = field(default_factory=list)
    """Cells of the vertices (index 0: the agent's cell when last planned; the last: the goal)."""
    target: int = -1
    """The checkpoint being pursued (a cell), -1: plan at the next step."""
    since: int = 0
    """Steps since the last plan."""
    reached: int = -1
    """The vertex cell last arrived at (arriving at another one triggers a replan, staying on it does not)."""


class Skipper:
    """Hindsight-learned checkpoint graph + value iteration over it + a checkpoint-conditioned local policy."""

    def __init__(self, ctx: ClassicContext, params: SkipperParams) -> None:
        envs, p = ctx.envs, params
        if not envs.discrete:
            raise ValueError("skipper needs a discrete action space")
        if envs.num_envs != 1:
            raise ValueError("skipper runs one environment (classic.num_envs=1): hindsight reads episodes in order")
        side = math.isqrt(envs.obs_dim // 3)
        if envs.obs_dim % 3 or side * side * 3 != envs.obs_dim:
            raise ValueError(
                "skipper needs a grid observation of 3 planes of size x size cells whose last is the agent's cell "
                f"(ascent/RandDistShift-v0); got observations of {envs.obs_dim} entries"
            )
        self.ctx, self.p, self.envs, self.steps = ctx, p, envs, 0
        self.cells, A = side * side, envs.n_actions
        self.edges = EdgeNet(envs.obs_dim, self.cells, A, p.hidden)
        self.edges_target = EdgeNet(envs.obs_dim, self.cells, A, p.hidden)
        self.edges_target.load_state_dict(self.edges.state_dict())
        self.omega = mlp([envs.obs_dim, *p.hidden, 1], "relu")
        self.generator = mlp([envs.obs_dim, *p.hidden, self.cells], "relu")
        self.opt = adam([*self.edges.parameters(), *self.omega.parameters(), *self.generator.parameters()], p.lr)
        self.buffer = ReplayBuffer(p.buffer_size, envs.obs_dim, (), discrete=True)
        self.ep_start = np.zeros(p.buffer_size, np.int64)  # absolute index of the slot's episode's first transition
        self.ep_end = np.full(p.buffer_size, -1, np.int64)  # ... and of its last one (-1: the episode goes on)
        self.written, self.episode_start = 0, 0
        self.rng = np.random.default_rng(ctx.seed)
        self.gen = torch.Generator().manual_seed(ctx.seed)
        self.eval_gen = torch.Generator().manual_seed(ctx.seed + 1)
        self.plan, self.eval_plans = Plan(), {}
        self.steps_per_iteration = p.train_freq

    # ----- checkpoints and the graph -----
    def agent_cell(self, obs: np.ndarray | torch.Tensor) -> Any:
        return obs[..., -self.cells :].argmax(-1)

    def at_cells(self, obs: torch.Tensor, cells: list[int]) -> torch.Tensor:
        """The observation with the agent moved to each cell: (len(cells), obs_dim)."""
        out = obs.repeat(len(cells), 1)
        out[:, -self.cells :] = F.one_hot(torch.tensor(cells), self.cells).float()
        return out

    def propose(self, obs: torch.Tensor, gen: torch.Generator) -> list[int]:
        """Vertices: the agent's cell, the distinct generated cells (in draw order), the goal's cell."""
        n = self.cells
        here, goal = int(self.agent_cell(obs)), int(obs[n : 2 * n].argmax())
        probs = torch.softmax(self.generator(obs[None]), -1)[0]
        drawn = torch.multinomial(probs, self.p.candidates, replacement=True, generator=gen).tolist()
        middle = [c for c in dict.fromkeys(drawn) if c not in (here, goal)][: self.p.checkpoints - 2]
        return [here, *middle, goal]

    def graph(self, obs: torch.Tensor, vertices: list[int]):
        """(discounts, rewards, distances, terminal) of the edges between `vertices` from the estimators."""
        N = len(vertices)
        states = self.at_cells(obs, vertices)  # (N, D)
        targets = F.one_hot(torch.tensor(vertices), self.cells).float()
        d_logit, g = self.edges(states.repeat_interleave(N, 0), targets.repeat(N, 1))
        best = d_logit.argmin(1, keepdim=True)
        dist = d_logit.gather(1, best).clamp(0.0, self.p.max_distance).view(N, N)
        rew = g.gather(1, best).view(N, N)
        disc = self.p.gamma**dist
        terminal = torch.sigmoid(self.omega(states)).squeeze(-1) > 0.5
        terminal[0] = False  # the agent's own state is not terminal
        return disc, rew, dist, terminal

    def replan(self, obs: np.ndarray, plan: Plan, gen: torch.Generator) -> None:
        o = torch.from_numpy(obs)
        if not plan.vertices:
            plan.vertices = self.propose(o, gen)
        plan.vertices[0] = int(self.agent_cell(o))
        disc, rew, dist, terminal = self.graph(o, plan.vertices)
        keep = (dist <= self.p.dist_cutoff) & (torch.tensor(plan.vertices) != plan.vertices[0])[None, :]
        if not keep[0, 1:].any():  # nothing in reach: head for the goal (the authors take a random action)
            plan.target = plan.vertices[-1]
        else:
            q = plan_graph(disc, rew, terminal, keep, self.p.plan_iters)
            plan.target = plan.vertices[choose_target(q[0], dist[0])]
        plan.since = 0

    def local_action(self, obs: np.ndarray, plan: Plan, gen: torch.Generator) -> int:
        """Replan when due, then the action of least estimated distance to the target; advances the plan's clock."""
        here = int(self.agent_cell(obs))
        arrived = here in plan.vertices[1:] and here != plan.reached
        if plan.target < 0 or arrived or plan.since >= self.p.replan_every:
            plan.reached = here if arrived else plan.reached
            self.replan(obs, plan, gen)
        plan.since += 1
        target = F.one_hot(torch.tensor([plan.target]), self.cells).float()
        return int(self.edges(torch.from_numpy(obs)[None], target)[0].argmin())

    # ----- the loop -----
    def epsilon(self) -> float:
        frac = min(1.0, self.steps / max(1.0, self.p.exploration_fraction * self.ctx.total_steps))
        return self.p.eps_start + frac * (self.p.eps_end - self.p.eps_start)

    def iteration(self, want_metrics: bool) -> dict[str, float]:
        envs, p = self.envs, self.p
        for _ in range(p.train_freq):
            obs = envs.obs
            learning = self.steps >= p.learning_starts
            if learning:
                with torch.no_grad():
                    action = self.local_action(obs[0], self.plan, self.gen)  # keeps the plan's clock running
            if not learning or self.rng.random() < self.epsilon():
                action = int(self.rng.integers(envs.n_actions))
            step = envs.step(np.array([action]))
            self.record(obs, action, step)
        if self.steps < p.learning_starts:
            return {}
        if self.steps % p.target_update_interval < p.train_freq:
            self.edges_target.load_state_dict(self.edges.state_dict())
        losses = self.train_step()
        return losses if want_metrics else {}

    def record(self, obs: np.ndarray, action: int, step: Any) -> None:
        slot = self.written % self.p.buffer_size
        self.buffer.add(obs, np.array([action]), step.reward, step.final_obs, step.terminated)
        self.ep_start[slot], self.ep_end[slot] = self.episode_start, -1
        self.written += 1
        self.steps += 1
        if step.terminated[0] or step.truncated[0]:
            last = self.written - 1
            for a in range(max(self.episode_start, self.written - self.p.buffer_size), self.written):
                self.ep_end[a % self.p.buffer_size] = last
            self.episode_start, self.plan = self.written, Plan()

    def relabel(self, idx: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """Hindsight targets for buffer slots `idx`: a cell the agent held somewhere in the slot's episode (the
        authors' "episode" strategy), or with probability random_targets a uniform cell; and which are from the
        episode."""
        size, oldest = self.p.buffer_size, max(0, self.written - self.p.buffer_size)
        start = np.maximum(self.ep_start[idx], oldest)
        end = np.where(self.ep_end[idx] >= 0, self.ep_end[idx], self.written - 1)
        pick = start + (rng.random(len(idx)) * (end - start + 1)).astype(np.int64)
        cells = self.agent_cell(self.buffer.next_obs[pick % size])
        hindsight = rng.random(len(idx)) >= self.p.random_targets
        return np.where(hindsight, cells, rng.integers(0, self.cells, len(idx))), hindsight

    def train_step(self) -> dict[str, float]:
        p, size = self.p, len(self.buffer)
        idx = self.rng.integers(0, size, p.batch_size)
        tgt_cells, hindsight = self.relabel(idx, self.rng)
        buf = self.buffer
        obs, nxt = torch.from_numpy(buf.obs[idx]), torch.from_numpy(buf.next_obs[idx])
        act, rew = torch.from_numpy(buf.actions[idx]), torch.from_numpy(buf.rewards[idx])
        term = torch.from_numpy(buf.terminated[idx]).bool()
        tcell = torch.from_numpy(tgt_cells)
        target = F.one_hot(tcell, self.cells).float()
        reached = self.agent_cell(nxt) == tcell
        with torch.no_grad():
            a_next = self.edges(nxt, target)[0].argmin(1, keepdim=True)
            d_next, g_next = (x.gather(1, a_next).squeeze(1) for x in self.edges_target(nxt, target))
            d_tgt = distance_target(reached, term, d_next.clamp(0.0, p.max_distance), p.max_distance)
            g_tgt = rew + p.gamma * torch.where(reached | term, 0.0, g_next)
        d_logit, g = (x.gather(1, act[:, None]).squeeze(1) for x in self.edges(obs, target))
        loss_d = F.smooth_l1_loss(d_logit, d_tgt)
        loss_g = F.mse_loss(g, g_tgt)
        loss_omega = F.binary_cross_entropy_with_logits(self.omega(nxt).squeeze(1), term.float())
        h = torch.from_numpy(hindsight)
        loss_gen = F.cross_entropy(self.generator(obs)[h], tcell[h]) if h.any() else torch.zeros(())
        loss = loss_d + loss_g + loss_omega + loss_gen
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        self.opt.step()
        return {
            "loss/distance": loss_d.item(),
            "loss/reward": loss_g.item(),
            "loss/omega": loss_omega.item(),
            "loss/generator": loss_gen.item(),
            "train/epsilon": self.epsilon(),
        }

    def begin_episodes(self) -> None:
        """Before an evaluation: forget the evaluation plans; the same draws each time (own generator)."""
        self.eval_plans = {}
        self.eval_gen.manual_seed(self.ctx.seed + 1)

    @torch.no_grad()
    def act(self, obs: np.ndarray, deterministic: bool) -> np.ndarray:
        """Planned actions for a batch of evaluation states (no epsilon). Each row's plan is kept under its layout
        (the observation without the agent plane): rows of one layout are the same deterministic episode, so they
        share it."""
        out, done = np.zeros(len(obs), np.int64), {}
        for i, row in enumerate(obs):
            key = row[: -self.cells].tobytes() + row[-self.cells :].tobytes()
            if key not in done:
                plan = self.eval_plans.setdefault(row[: -self.cells].tobytes(), Plan())
                done[key] = self.local_action(row, plan, self.eval_gen)
            out[i] = done[key]
        return out

    def modules(self) -> dict[str, torch.nn.Module]:
        return {
            "edges": self.edges,
            "edges_target": self.edges_target,
            "omega": self.omega,
            "generator": self.generator,
        }

    def state_dict(self) -> dict[str, Any]:
        return {
            "opt": self.opt.state_dict(),
            "buffer": self.buffer.state_dict(),
            "episodes": (self.ep_start.copy(), self.ep_end.copy(), self.written, self.episode_start),
            "rng": self.rng.bit_generator.state,
            "gen": self.gen.get_state(),
            "steps": self.steps,
            "plan": (list(self.plan.vertices), self.plan.target, self.plan.since, self.plan.reached),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.opt.load_state_dict(state["opt"])
        self.buffer.load_state_dict(state["buffer"])
        self.ep_start[:], self.ep_end[:], self.written, self.episode_start = state["episodes"]
        self.rng.bit_generator.state = state["rng"]
        self.gen.set_state(state["gen"])
        self.steps = state["steps"]
        self.plan = Plan(*state["plan"])


@CLASSIC.register(
    "skipper",
    params=SkipperParams,
    paper=papers.SKIPPER,
    fidelity="reduced",
    departures=(
        "checkpoints are agent cells read from and written into the observation's agent plane, so the generator is "
        "a categorical over cells conditioned on the state, trained on the episode's visited cells (the paper: a "
        "conditional VAE over a learned partial description)",
        "edge estimates are scalar (distance in steps by a Huber loss, reward by squared error, on their "
        "bootstrapped targets) instead of the paper's histogram (distributional) heads; the distance head is also "
        "the local policy (the authors' no_Q_head mode); no prioritised replay",
        "graph pruning keeps the distinct generated cells (at most `checkpoints`) and cuts edges longer than "
        "dist_cutoff; the paper prunes 32 candidates to 12 by k-medoids over estimated distances",
        "a share of the relabelled targets are uniform random cells so unreachable targets learn a low discount "
        "(the authors' later delusion-suppression option generates them with the generator)",
        "when no vertex is within dist_cutoff the goal becomes the target (the authors act randomly); MLPs on the "
        "flattened grid plus the target's offset from the agent instead of the authors' convolutional encoder with "
        "a local-perception binder",
    ),
)
def skipper(ctx: ClassicContext, params: SkipperParams = SkipperParams()) -> Skipper:
    """Skipper: value iteration over a hindsight-learned graph of checkpoints, a checkpoint-conditioned policy."""
    return Skipper(ctx, params)


skipper.action_spaces = frozenset({"discrete"})


def _check(params: SkipperParams, num_envs: int) -> None:
    if num_envs != 1:
        raise ValueError(f"skipper runs one environment: set classic.num_envs=1 (got {num_envs})")


skipper.check = _check
