"""Batched tensor environments for TSP and CVRP, stepped on typed records.

A rollout holds B instances and S parallel solutions of each (POMO's starts, or samples), so every state tensor is
(B, S, ...) while the instance data stays (B, N, ...): nothing is copied S times. `reset` gives a `RouteState`;
`step(state, action)` gives a `RouteStep` (the next state, the step's reward, done). The reward of a step is minus
the length of the edge it adds (the closing edge included on the step that finishes), so an episode's return is minus
the tour length: the reward of Kool et al. 2019 (arXiv:1803.08475) and RL4CO, paid per step.

TSP (a Hamiltonian cycle): an action is the next node; visited nodes are masked; N steps; the last one adds the
edge back to the first node.

CVRP (Kool et al. 2019, appendix; RL4CO's `CVRPEnv`): the vehicle starts at the depot (node 0) with capacity 1
(demands are divided by the capacity); an action is a customer whose demand fits the remaining load, or the
depot, which refills it. Masked: visited customers, customers that do not fit, and the depot while the vehicle is at
it and customers remain. An episode is done when every customer is served and the vehicle is back at the depot;
a finished solution can only choose the depot again (a zero-length, probability-one step), so a batch runs until its
longest solution ends.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Optional

import torch

from ascent.co.problems import Instances

EPS = 1e-6
"""Slack on the capacity check (normalised demands are ratios of integers)."""


@dataclass(frozen=True)
class RouteState:
    """The state of S solutions of each of B instances."""

    current: torch.Tensor
    """(B, S) int64 the node each solution stands at (-1: none yet, TSP before its first step)."""
    first: torch.Tensor
    """(B, S) int64 the first node visited (-1 before the first step); TSP's context."""
    visited: torch.Tensor
    """(B, S, N) bool nodes served (the CVRP depot never is)."""
    load: torch.Tensor
    """(B, S) float remaining capacity, 1 = full (CVRP); 0 for TSP."""
    length: torch.Tensor
    """(B, S) float length travelled so far."""
    done: torch.Tensor
    """(B, S) bool the solution is complete."""
    mask: torch.Tensor
    """(B, S, N) bool the feasible next actions (at least one everywhere)."""
    steps: int = 0
    """Steps taken."""


@dataclass(frozen=True)
class RouteStep:
    """What one step returns."""

    state: RouteState
    reward: torch.Tensor
    """(B, S) float minus the length this step added."""
    done: torch.Tensor
    """(B, S) bool complete after this step."""


def _dist(locs: torch.Tensor, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Euclidean distance between nodes a and b (B, S) of instances locs (B, N, 2) -> (B, S)."""
    pa = locs.gather(1, a.clamp(min=0).unsqueeze(-1).expand(-1, -1, 2))  # (B, S, 2)
    pb = locs.gather(1, b.clamp(min=0).unsqueeze(-1).expand(-1, -1, 2))
    return (pa - pb).norm(dim=-1)


class RoutingEnv:
    """Common part: the instances, their (B, N, 2) coordinates, reset and the step's bookkeeping."""

    problem = ""

    def __init__(self, inst: Instances) -> None:
        if inst.problem != self.problem:
            raise ValueError(f"{type(self).__name__} needs {self.problem} instances, got {inst.problem}")
        self.inst = inst
        self.locs = inst.locs  # (B, N, 2)
        self.B, self.N = inst.locs.shape[:2]

    @property
    def max_steps(self) -> int:
        """An upper bound on the steps of any solution."""
        raise NotImplementedError

    def start_nodes(self) -> torch.Tensor:
        """(S,) the POMO starts: the nodes a first action may be forced to (Kwon et al. 2020, section 4.1)."""
        raise NotImplementedError

    def reset(self, S: int) -> RouteState:
        """S empty solutions of each instance."""
        B, N = self.B, self.N
        none = torch.full((B, S), -1, dtype=torch.long)
        zeros = torch.zeros(B, S)
        visited = torch.zeros(B, S, N, dtype=torch.bool)
        state = RouteState(none, none, visited, zeros, zeros, torch.zeros(B, S, dtype=torch.bool), visited)
        return replace(state, mask=self.feasible(state))

    def feasible(self, state: RouteState) -> torch.Tensor:
        """(B, S, N) bool the actions allowed in `state`."""
        raise NotImplementedError

    def step(self, state: RouteState, action: torch.Tensor) -> RouteStep:
        """Apply `action` (B, S); an infeasible action raises ValueError (the decoder never takes one)."""
        if not state.mask.gather(2, action.unsqueeze(-1)).all():
            raise ValueError("an action outside the feasible mask")
        return self._step(state, action)

    def _step(self, state: RouteState, action: torch.Tensor) -> RouteStep:
        raise NotImplementedError


class TSPEnv(RoutingEnv):
    """The travelling salesman problem on the instances' nodes; see the module docstring."""

    problem = "tsp"

    @property
    def max_steps(self) -> int:
        return self.N

    def start_nodes(self) -> torch.Tensor:
        return torch.arange(self.N)

    def feasible(self, state: RouteState) -> torch.Tensor:
        return ~state.visited

    def _step(self, state: RouteState, action: torch.Tensor) -> RouteStep:
        started = state.current >= 0
        edge = torch.where(started, _dist(self.locs, state.current, action), torch.zeros(()))
        first = torch.where(started, state.first, action)
        visited = state.visited.scatter(2, action.unsqueeze(-1), True)
        done = visited.all(dim=-1)
        edge = edge + torch.where(done, _dist(self.locs, action, first), torch.zeros(()))  # close the cycle
        nxt = replace(state, current=action, first=first, visited=visited, length=state.length + edge, done=done)
        nxt = replace(nxt, mask=self.feasible(nxt) | done.unsqueeze(-1), steps=state.steps + 1)
        return RouteStep(nxt, -edge, done)


class CVRPEnv(RoutingEnv):
    """The capacitated vehicle routing problem, node 0 the depot; see the module docstring."""

    problem = "cvrp"

    def __init__(self, inst: Instances) -> None:
        super().__init__(inst)
        self.demand = inst.demand.float() / inst.capacity.float().unsqueeze(-1)  # (B, N) in [0, 1], depot 0

    @property
    def max_steps(self) -> int:
        return 2 * (self.N - 1)  # every customer, each followed at worst by a depot visit

    def start_nodes(self) -> torch.Tensor:
        return torch.arange(1, self.N)

    def reset(self, S: int) -> RouteState:
        state = super().reset(S)
        depot = torch.zeros_like(state.current)
        state = replace(state, current=depot, first=depot, load=torch.ones(self.B, S))
        return replace(state, mask=self.feasible(state))

    def feasible(self, state: RouteState) -> torch.Tensor:
        fits = self.demand.unsqueeze(1) <= state.load.unsqueeze(-1) + EPS  # (B, S, N)
        customers = fits & ~state.visited
        customers[..., 0] = False
        remaining = (~state.visited[..., 1:]).any(dim=-1)  # (B, S) customers left to serve
        depot_ok = (state.current != 0) | ~remaining  # no depot-to-depot step while customers remain
        customers[..., 0] = depot_ok
        return customers

    def _step(self, state: RouteState, action: torch.Tensor) -> RouteStep:
        edge = _dist(self.locs, state.current, action)
        at_depot = action == 0
        served = self.demand.gather(1, action)  # (B, S)
        load = torch.where(at_depot, torch.ones(()), state.load - served)
        visited = state.visited.scatter(2, action.unsqueeze(-1), True)
        visited[..., 0] = False
        done = at_depot & visited[..., 1:].all(dim=-1)
        first = torch.where(state.first == 0, action, state.first)
        nxt = replace(state, current=action, first=first, visited=visited, load=load, length=state.length + edge)
        nxt = replace(nxt, done=done, steps=state.steps + 1)
        return RouteStep(replace(nxt, mask=self.feasible(nxt)), -edge, done)


def take(state: RouteState, solutions: slice) -> RouteState:
    """The state of some of the S solutions (a slice along dimension 1 of every tensor)."""
    return replace(
        state,
        current=state.current[:, solutions],
        first=state.first[:, solutions],
        visited=state.visited[:, solutions],
        load=state.load[:, solutions],
        length=state.length[:, solutions],
        done=state.done[:, solutions],
        mask=state.mask[:, solutions],
    )


ENVS: dict[str, type[RoutingEnv]] = {"tsp": TSPEnv, "cvrp": CVRPEnv}


def make_env(inst: Instances) -> RoutingEnv:
    """The environment of `inst`'s problem."""
    return ENVS[inst.problem](inst)


def tour_length(inst: Instances, actions: torch.Tensor, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """Exact length of solutions given as action sequences (B, T) or (B, S, T) -> (B,) or (B, S), computed directly
    from the coordinates (not from the environment): TSP, the cycle through the actions; CVRP, the path depot ->
    actions -> depot (depot entries split the routes; trailing depot padding adds nothing)."""
    squeeze = actions.dim() == 2
    acts = actions.unsqueeze(1) if squeeze else actions  # (B, S, T)
    B, S, T = acts.shape
    locs = inst.locs.to(dtype)
    pts = locs.gather(1, acts.reshape(B, S * T, 1).expand(-1, -1, 2)).reshape(B, S, T, 2)
    if inst.problem == "tsp":
        nxt = pts.roll(-1, dims=2)
    else:
        depot = locs[:, :1].unsqueeze(1).expand(B, S, 1, 2)
        pts = torch.cat([depot, pts, depot], dim=2)
        nxt = pts[:, :, 1:]
        pts = pts[:, :, :-1]
    length = (nxt - pts).norm(dim=-1).sum(dim=-1)
    return length.squeeze(1) if squeeze else length


def check_solutions(inst: Instances, actions: torch.Tensor) -> None:
    """Raise ValueError unless every solution (B, S, T) is feasible: TSP, a permutation of the nodes; CVRP, every
    customer exactly once and no route's demand over the capacity. A slow loop, for tests and reference tours."""
    acts = actions.unsqueeze(1) if actions.dim() == 2 else actions
    for b in range(acts.shape[0]):
        for s in range(acts.shape[1]):
            tour = [int(a) for a in acts[b, s]]
            if inst.problem == "tsp":
                if sorted(tour) != list(range(inst.num_nodes)):
                    raise ValueError(f"instance {b} solution {s}: not a permutation of the nodes: {tour}")
                continue
            customers = [a for a in tour if a != 0]
            if sorted(customers) != list(range(1, inst.num_nodes)):
                raise ValueError(f"instance {b} solution {s}: customers not each served once: {tour}")
            load, cap = 0, int(inst.capacity[b])
            for a in tour:
                load = 0 if a == 0 else load + int(inst.demand[b, a])
                if load > cap:
                    raise ValueError(f"instance {b} solution {s}: a route carries {load} > capacity {cap}")


def solution_lengths(inst: Instances, actions: torch.Tensor, env: Optional[RoutingEnv] = None) -> torch.Tensor:
    """Lengths (B, S) of solutions (B, S, T) replayed through the environment (checks every action is feasible)."""
    env = env or make_env(inst)
    state = env.reset(actions.shape[1])
    for t in range(actions.shape[2]):
        state = env.step(state, actions[:, :, t]).state
    if not state.done.all():
        raise ValueError("a solution ends before it is complete")
    return state.length
