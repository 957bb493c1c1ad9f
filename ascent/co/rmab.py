"""A combinatorial restless multi-armed bandit (coRMAB) with capacity constraints, its feasible action set as a
mixed-integer program, and the myopic baseline (Xu, Wilder, Khalil & Tambe 2025, "Reinforcement learning with
combinatorial actions for coupled restless bandits", ICLR 2025, arXiv:2503.01919, section 5 "capacity-constrained";
the authors' code, github.com/lily-x/combinatorial-rmab, `environment/base_envs.py` MultiStateRMAB and
`environment/constrained.py`).

The bandit: J arms, each a chain of S = 4 states; acting on arm j moves it up with probability p_up[j, 1]
(uniform in [0.7, 0.9]), not acting with p_up[j, 0] (uniform in [0, 0.2]); otherwise it moves down (clamped to
0..S-1). The reward of a step is sum_j r[j, s'_j]. The first W arms are "good": r = (0.2, 0.15, 0.1, top) with
top in {4, 5, 6}, the others r = (0.1, 0.15, 0.2, top) with top in {1, 2, 3}; a good arm must be pushed through
two states that pay less before it reaches its top state, the trap a one-step (myopic) planner falls into.

The combinatorial action: W workers with capacities C_i (integers in 2..7) and arms with costs c_j (integers in
2..6); an action assigns arms to workers, x_ij in {0, 1}, sum_j c_j x_ij <= C_i, each arm at most once, and
a_j = sum_i x_ij pulls arm j. The action set cannot be decoupled across arms (a multiple knapsack), so an index
policy does not apply; a policy picks its action by solving a MILP over (a, x) (HiGHS, scipy.optimize.milp).

The myopic baseline (the paper's "myopic"): the feasible action that maximises the expected reward of the next
step, sum_j E[r_j(s'_j) | s_j, a_j], linear in a, one MILP per step.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Optional

import numpy as np
import torch

from ascent import papers
from ascent.co.knapsack import CO_PROBLEMS
from ascent.co.problems import InstanceError
from ascent.registry import Registry

RMAB_POLICIES: Registry = Registry("co rmab policy")
"""coRMAB policies: `fn(inst, seed, params) -> RMABPolicy` (a trained or planning policy, state -> action)."""

RMABPolicy = Callable[[torch.Tensor], torch.Tensor]
"""state (J,) int64 -> action (J,) float 0/1, feasible."""

N_STATES = 4


@dataclass(frozen=True)
class CoRMAB:
    """One capacity-constrained coRMAB instance (module docstring)."""

    p_up: torch.Tensor
    """(J, 2) float probability of moving up when not acted on (column 0) / acted on (column 1)."""
    reward: torch.Tensor
    """(J, S) float reward of being in each state."""
    costs: torch.Tensor
    """(J,) int64 cost of pulling each arm, > 0."""
    capacity: torch.Tensor
    """(W,) int64 each worker's capacity, >= 0."""
    horizon: int = 10
    """Steps per episode."""
    start: Optional[torch.Tensor] = None
    """(J,) int64 a fixed start state; None: every arm starts in state 0 or 1 with probability 1/2."""

    def __post_init__(self) -> None:
        J = self.p_up.shape[0]
        if self.p_up.dim() != 2 or self.p_up.shape[1] != 2 or J < 1:
            raise InstanceError(f"p_up must be (J>=1, 2), got {tuple(self.p_up.shape)}")
        if self.reward.dim() != 2 or self.reward.shape[0] != J or self.reward.shape[1] < 2:
            raise InstanceError(f"reward must be ({J}, S>=2), got {tuple(self.reward.shape)}")
        if tuple(self.costs.shape) != (J,) or self.capacity.dim() != 1 or self.capacity.numel() < 1:
            raise InstanceError(
                f"costs must be ({J},) and capacity (W>=1,), got {tuple(self.costs.shape)}, "
                f"{tuple(self.capacity.shape)}"
            )
        if not (torch.isfinite(self.p_up).all() and ((self.p_up >= 0) & (self.p_up <= 1)).all()):
            raise InstanceError("p_up must hold probabilities in [0, 1]")
        if not torch.isfinite(self.reward).all():
            raise InstanceError("reward contains NaN or infinite numbers")
        if self.costs.dtype.is_floating_point or self.capacity.dtype.is_floating_point:
            raise InstanceError("costs and capacity must be integers")
        if (self.costs <= 0).any():
            raise InstanceError(f"every arm cost must be positive, got {self.costs.tolist()}")
        if (self.capacity < 0).any():
            raise InstanceError(f"a worker capacity is negative: {self.capacity.tolist()}")
        if self.horizon < 1:
            raise InstanceError(f"horizon must be >= 1, got {self.horizon}")
        if self.start is not None and (
            tuple(self.start.shape) != (J,) or (self.start < 0).any() or (self.start >= self.reward.shape[1]).any()
        ):
            raise InstanceError(f"start must be ({J},) states in 0..{self.reward.shape[1] - 1}")

    @property
    def arms(self) -> int:
        return self.p_up.shape[0]

    @property
    def workers(self) -> int:
        return self.capacity.shape[0]

    @property
    def states(self) -> int:
        return self.reward.shape[1]

    # -------------------------------------------------------------------------------------------- dynamics

    def reset(self, g: torch.Generator) -> torch.Tensor:
        """A fresh start (J,): `start` if set, else every arm in state 0 or 1 with probability 1/2 (the authors'
        `fresh_reset`)."""
        if self.start is not None:
            return self.start.clone()
        return torch.bernoulli(torch.full((self.arms,), 0.5), generator=g).long()

    def expected_reward(self, state: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        """E[sum_j r_j(s'_j) | state, action] for states (..., J) and actions (..., J) -> (...)."""
        up_r, down_r = self._up_down_rewards(state)
        p = torch.where(action > 0.5, self.p_up[:, 1], self.p_up[:, 0])  # (..., J)
        return (p * up_r + (1 - p) * down_r).sum(-1)

    def arm_gain(self, state: torch.Tensor) -> torch.Tensor:
        """Per arm, the expected one-step reward of acting minus not acting, (J,): the myopic objective's weights."""
        up_r, down_r = self._up_down_rewards(state)
        return (self.p_up[:, 1] - self.p_up[:, 0]) * (up_r - down_r)

    def _up_down_rewards(self, state: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        up = (state + 1).clamp(max=self.states - 1)
        down = (state - 1).clamp(min=0)
        r = self.reward.expand(*state.shape[:-1], -1, -1)  # (..., J, S)
        return r.gather(-1, up.unsqueeze(-1)).squeeze(-1), r.gather(-1, down.unsqueeze(-1)).squeeze(-1)

    def step(self, state: torch.Tensor, action: torch.Tensor, u: torch.Tensor) -> tuple[torch.Tensor, float]:
        """Next state and realised reward, given uniforms u (J,) (up when u < p_up): common random numbers let two
        policies face the same draws."""
        p = torch.where(action > 0.5, self.p_up[:, 1], self.p_up[:, 0])
        nxt = torch.where(u < p, state + 1, state - 1).clamp(0, self.states - 1)
        return nxt, float(self.reward.gather(1, nxt.unsqueeze(1)).sum())

    def random_action(self, g: torch.Generator) -> torch.Tensor:
        """A random feasible action (the authors' `get_random_action`): workers in random order, each takes the
        arms, in a random order, that still fit its capacity."""
        workers = torch.randperm(self.workers, generator=g).tolist()
        arms = torch.randperm(self.arms, generator=g).tolist()
        action = torch.zeros(self.arms)
        for i in workers:
            room = int(self.capacity[i])
            for j in arms:
                if action[j] == 0 and int(self.costs[j]) <= room:
                    action[j], room = 1.0, room - int(self.costs[j])
        return action


@CO_PROBLEMS.register(
    "cormab",
    paper=papers.SEQUOIA,
    fidelity="faithful",
    departures=("torch's seeded generator instead of numpy's global one; the horizon is a parameter (paper: 20)",),
)
def generate_cormab(arms: int, workers: int, seed: int, horizon: int = 10) -> CoRMAB:
    """A capacity-constrained coRMAB with the authors' distributions (module docstring), seeded.

    >>> inst = generate_cormab(8, 3, seed=0)
    >>> inst.arms, inst.workers, inst.states, bool((inst.reward[:3, 0] == 0.2).all())
    (8, 3, 4, True)
    """
    if arms < 1 or not 1 <= workers <= arms:
        raise InstanceError(f"need arms >= 1 and 1 <= workers <= arms, got arms={arms}, workers={workers}")
    g = torch.Generator().manual_seed(int(seed))
    p_up = torch.stack([torch.rand(arms, generator=g) * 0.2, 0.7 + torch.rand(arms, generator=g) * 0.2], dim=1)
    reward = torch.tensor([0.1, 0.15, 0.2, 0.0]).repeat(arms, 1)
    reward[:workers] = torch.tensor([0.2, 0.15, 0.1, 0.0])
    reward[:workers, -1] = torch.randint(4, 7, (workers,), generator=g).float()
    reward[workers:, -1] = torch.randint(1, 4, (arms - workers,), generator=g).float()
    costs = torch.randint(2, 7, (arms,), generator=g)
    capacity = torch.randint(2, 8, (workers,), generator=g)
    return CoRMAB(p_up, reward, costs, capacity, horizon)


# ------------------------------------------------------------------------------------- the action set as a MILP


@dataclass
class ActionMILP:
    """The feasible action set as MILP rows over variables [a (J), x (W*J), extra...], with an objective to
    maximise; `extra` variables and rows are appended by whoever embeds a model (SEQUOIA's Q-network)."""

    inst: CoRMAB
    c: list[float] = field(default_factory=list)
    """Objective coefficients (maximised) of every variable."""
    lb: list[float] = field(default_factory=list)
    ub: list[float] = field(default_factory=list)
    integer: list[int] = field(default_factory=list)
    rows: list[tuple[dict[int, float], float, float]] = field(default_factory=list)
    """(coefficients by variable index, lower, upper)."""
    constant: float = 0.0
    """Added to the objective value."""

    def __post_init__(self) -> None:
        J, W = self.inst.arms, self.inst.workers
        for _ in range(J + W * J):
            self.add_var(0.0, 0.0, 1.0, integer=True)
        for i in range(W):  # sum_j c_j x_ij <= C_i
            coefs = {J + i * J + j: float(self.inst.costs[j]) for j in range(J)}
            self.rows.append((coefs, -np.inf, float(self.inst.capacity[i])))
        for j in range(J):  # a_j = sum_i x_ij (a_j <= 1: each arm to one worker at most)
            coefs = {j: 1.0, **{J + i * J + j: -1.0 for i in range(W)}}
            self.rows.append((coefs, 0.0, 0.0))

    def add_var(self, c: float, lb: float, ub: float, integer: bool = False) -> int:
        """A new variable; returns its index."""
        self.c.append(float(c))
        self.lb.append(float(lb))
        self.ub.append(float(ub))
        self.integer.append(int(integer))
        return len(self.c) - 1

    def solve(self, time_limit_s: float = 30.0) -> tuple[torch.Tensor, float]:
        """(the optimal action a (J,) float 0/1, the optimal objective value); HiGHS proves optimality or it raises
        RuntimeError."""
        from scipy.optimize import Bounds, LinearConstraint, milp

        A = np.zeros((len(self.rows), len(self.c)))
        for r, (coefs, _, _) in enumerate(self.rows):
            for k, v in coefs.items():
                A[r, k] = v
        res = milp(
            c=-np.asarray(self.c),
            integrality=np.asarray(self.integer),
            bounds=Bounds(np.asarray(self.lb), np.asarray(self.ub)),
            constraints=LinearConstraint(A, [r[1] for r in self.rows], [r[2] for r in self.rows]),
            options={"time_limit": float(time_limit_s), "mip_rel_gap": 1e-9},
        )
        if res.status != 0 or res.x is None:
            raise RuntimeError(f"HiGHS did not solve the coRMAB action MILP: {res.message}")
        action = torch.from_numpy(np.round(res.x[: self.inst.arms])).float()
        return action, float(-res.fun) + self.constant


def feasible(inst: CoRMAB, action: torch.Tensor) -> bool:
    """Whether some assignment of the pulled arms to workers respects every capacity (a MILP feasibility check)."""
    m = ActionMILP(inst)
    for j in range(inst.arms):
        m.lb[j] = m.ub[j] = float(action[j] > 0.5)
    try:
        m.solve()
    except RuntimeError:
        return False
    return True


def myopic_action(inst: CoRMAB, state: torch.Tensor) -> torch.Tensor:
    """The feasible action maximising the next step's expected reward (one MILP)."""
    m = ActionMILP(inst)
    gain = inst.arm_gain(state)
    for j in range(inst.arms):
        m.c[j] = float(gain[j])
    return m.solve()[0]


@dataclass(frozen=True)
class NoParams:
    """The myopic policy has no parameters."""


@RMAB_POLICIES.register(
    "myopic",
    paper=papers.SEQUOIA,
    fidelity="faithful",
    departures=("HiGHS (scipy) instead of Gurobi for the per-step MILP",),
)
def myopic(inst: CoRMAB, seed: int = 0, params: Optional[NoParams] = None) -> RMABPolicy:
    """The paper's myopic baseline: a_t = argmax over feasible a of sum_j E[r_j(s_{t+1}) | s_t, a] (a MILP per
    step; no training, `seed` unused)."""
    return lambda state: myopic_action(inst, state)


def evaluate(inst: CoRMAB, policy: RMABPolicy, episodes: int, seed: int) -> list[float]:
    """The undiscounted return of each of `episodes` episodes; episode e uses start state and uniforms drawn from
    seed (seed, e), so two policies evaluated with the same seed face the same draws (common random numbers)."""
    returns = []
    for e in range(episodes):
        g = torch.Generator().manual_seed(int(seed) * 100_003 + e)
        state, total = inst.reset(g), 0.0
        for _ in range(inst.horizon):
            u = torch.rand(inst.arms, generator=g)
            state, r = inst.step(state, policy(state), u)
            total += r
        returns.append(total)
    return returns
