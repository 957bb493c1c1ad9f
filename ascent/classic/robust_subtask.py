"""Robust subtask learning (Jothimurugan, Hsu, Bastani & Alur 2023, "Robust Subtask Learning for Compositional
Generalization", arXiv:2302.02984): subtask policies trained for the *worst* task, a task being a sequence of
subtasks that an adversary picks.

The game: the learner holds one policy per subtask o (reach the goal region G_o); whenever the current subtask
reaches its goal, the adversary picks the next subtask among the allowed successors succ(o), from the state the
last one ended in. Subtask policies maximise, the adversary minimises, the discounted return. Its value obeys

    Q(o, s, a) = R(s, a) + gamma * sum_s' P(s' | s, a) * C(o, s'),
    C(o, s') = max_a' Q(o, s', a')                      while s' is outside G_o,
    C(o, s') = min_{o' in succ(o)} max_a' Q(o', s', a')  when s' reaches G_o (the adversary moves).

So a subtask policy learns *where* in its goal region to finish: where the worst next subtask is least bad. The
paper solves this with a multi-agent adaptation (the adversary a learned policy) and an asynchronous variant in
which each subtask's critic bootstraps from the min over the successors' value functions; here that min-over-
successors backup is run tabularly (Q-learning) on a small finite game, the adversary acting epsilon-greedily on
the same min. The baseline (`average`) is average-case training: uniformly random successors and the mean over them
in the backup, i.e. subtask policies trained for random task sequences. Both are scored by the exact worst-case
value of their greedy subtask policies against a best-responding adversary (`policy_value`), and by their value
over random task sequences.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ascent import papers
from ascent.registry import Registry

SUBTASK_LEARNERS: Registry = Registry("robust subtask learner")


@dataclass(frozen=True)
class SubtaskGame:
    """A finite compositional game: transitions P (S, A, S), rewards R (S, A), a goal mask per subtask (O, S), the
    successors of each subtask, the start state and the first subtask."""

    P: np.ndarray
    R: np.ndarray
    goals: np.ndarray
    successors: tuple[tuple[int, ...], ...]
    start: int = 0
    first: int = 0
    gamma: float = 0.95
    bonus: float = 1.0
    """Reward for reaching the current subtask's goal, received on arrival (discounted by one step like the next
    state's value)."""

    def __post_init__(self) -> None:
        S, A = self.R.shape
        if self.P.shape != (S, A, S) or not np.allclose(self.P.sum(-1), 1.0):
            raise ValueError(f"P must be (S, A, S) = ({S}, {A}, {S}) with rows summing to 1, got {self.P.shape}")
        if self.goals.shape != (len(self.successors), S):
            raise ValueError(
                f"goals must be (subtasks, states) = ({len(self.successors)}, {S}), got {self.goals.shape}"
            )
        for o, succ in enumerate(self.successors):
            if not succ or min(succ) < 0 or max(succ) >= len(self.successors):
                raise ValueError(f"subtask {o}: successors must be a non-empty list of subtask ids, got {succ}")
        if not 0 < self.gamma < 1:
            raise ValueError(f"gamma must be in (0, 1), got {self.gamma}")


def doors_game(
    near: int = 1,
    far: int = 2,
    near_t1: int = 1,
    near_t2: int = 12,
    far_t: int = 3,
    slip: float = 0.1,
    gamma: float = 0.8,
) -> SubtaskGame:
    """Two doors and two targets, joined by one-way roads of the given lengths (in steps). Subtask 0: reach a door
    (A, `near` steps from the start, or B, `far` steps); subtask 1: reach target T1; subtask 2: reach target T2;
    0 -> {1, 2} (the adversary's choice), 1 -> {0}, 2 -> {0} (both targets lead back to the start in one step).
    From A, T1 is `near_t1` steps away and T2 `near_t2`; from B both are `far_t`. At a node the action picks the
    road (A = 2 actions), on a road every action moves on; with probability `slip` a step stays where it is. Each
    goal reached pays the bonus 1. With the defaults the average over targets favours the near door A, the worst
    case the far door B."""
    names = ["start", "A", "B", "T1", "T2"]
    roads = {  # node -> its two roads (target, length)
        "start": (("A", near), ("B", far)),
        "A": (("T1", near_t1), ("T2", near_t2)),
        "B": (("T1", far_t), ("T2", far_t)),
        "T1": (("start", 1), ("start", 1)),
        "T2": (("start", 1), ("start", 1)),
    }
    for length in (near, far, near_t1, near_t2, far_t):
        if length < 1:
            raise ValueError(f"road lengths must be >= 1, got {length}")
    index = {n: i for i, n in enumerate(names)}
    moves: list[list[int]] = [[] for _ in names]  # state -> its next state per action
    for node in names:
        for target, length in roads[node]:
            prev = index[node]
            for _ in range(length - 1):  # the road's inner cells
                moves.append([])
                cell = len(moves) - 1
                moves[prev].append(cell) if prev == index[node] else moves[prev].extend([cell, cell])
                prev = cell
            moves[prev].append(index[target]) if prev == index[node] else moves[prev].extend([index[target]] * 2)
    S, A = len(moves), 2
    P = np.zeros((S, A, S))
    for s, nxt in enumerate(moves):
        for a in range(A):
            P[s, a, nxt[a]] += 1 - slip
            P[s, a, s] += slip
    goals = np.zeros((3, S), bool)
    goals[0, [index["A"], index["B"]]] = True
    goals[1, index["T1"]], goals[2, index["T2"]] = True, True
    return SubtaskGame(P, np.zeros((S, A)), goals, ((1, 2), (0,), (0,)), start=0, first=0, gamma=gamma)


def _continuation(game: SubtaskGame, V: np.ndarray, aggregate: str) -> np.ndarray:
    """C(o, s') (O, S): V(o, s') outside G_o, the min (or mean) over succ(o) of V(o', s') inside it."""
    C = V.copy()
    for o, succ in enumerate(game.successors):
        nxt = V[list(succ)]
        agg = nxt.min(0) if aggregate == "min" else nxt.mean(0)
        C[o] = np.where(game.goals[o], game.bonus + agg, V[o])
    return C


def solve(game: SubtaskGame, aggregate: str = "min", iters: int = 2000, tol: float = 1e-10) -> np.ndarray:
    """Value iteration on the game's Q (O, S, A): `min` the robust game, `mean` the average-case (random
    successors) problem."""
    if aggregate not in ("min", "mean"):
        raise ValueError(f"aggregate must be 'min' or 'mean', got {aggregate!r}")
    n_sub, (S, A) = len(game.successors), game.R.shape
    Q = np.zeros((n_sub, S, A))
    for _ in range(iters):
        C = _continuation(game, Q.max(-1), aggregate)
        new = game.R[None] + game.gamma * np.einsum("sat,ot->osa", game.P, C)
        if np.abs(new - Q).max() < tol:
            return new
        Q = new
    return Q


def policy_value(
    game: SubtaskGame, policy: np.ndarray, aggregate: str = "min", iters: int = 5000, tol: float = 1e-10
) -> float:
    """The value at (start, first subtask) of the subtask policies `policy` (O, S) of actions, against the best-
    responding adversary (`min`: at every subtask boundary it picks the successor of least value) or over uniformly
    random successors (`mean`)."""
    if aggregate not in ("min", "mean"):
        raise ValueError(f"aggregate must be 'min' or 'mean', got {aggregate!r}")
    n_sub, S = policy.shape
    P_pi = game.P[np.arange(S)[None], policy]  # (O, S, S)
    R_pi = game.R[np.arange(S)[None], policy]  # (O, S)
    V = np.zeros((n_sub, S))
    for _ in range(iters):
        new = R_pi + game.gamma * np.einsum("ost,ot->os", P_pi, _continuation(game, V, aggregate))
        if np.abs(new - V).max() < tol:
            V = new
            break
        V = new
    return float(V[game.first, game.start])


@dataclass(frozen=True)
class SubtaskQParams:
    """Tabular Q-learning of the subtask policies in the game."""

    episodes: int = 400
    """Episodes, each from (start, first subtask)."""
    horizon: int = 60
    """Environment steps per episode."""
    lr: float = 0.2
    """Q-learning step size, in (0, 1]."""
    epsilon: float = 0.2
    """Exploration of the subtask policies (uniformly random action), in [0, 1]."""
    adversary_epsilon: float = 0.3
    """`robust` only: the adversary picks a uniformly random successor with this probability (else the successor
    of least learned value), so that every subtask keeps being trained; in [0, 1]."""

    def __post_init__(self) -> None:
        if self.episodes <= 0 or self.horizon <= 0:
            raise ValueError(f"episodes and horizon must be > 0, got {self.episodes}, {self.horizon}")
        if not 0 < self.lr <= 1:
            raise ValueError(f"lr must be in (0, 1], got {self.lr}")
        for key in ("epsilon", "adversary_epsilon"):
            if not 0 <= getattr(self, key) <= 1:
                raise ValueError(f"{key} must be in [0, 1], got {getattr(self, key)}")


def q_learning(game: SubtaskGame, params: SubtaskQParams, seed: int, robust: bool) -> np.ndarray:
    """Online Q-learning of Q (O, S, A). At a subtask boundary the backup bootstraps from the min (`robust`) or the
    mean over the successors' values, and the next subtask is picked epsilon-greedily by the adversary (`robust`)
    or uniformly at random."""
    rng = np.random.default_rng(seed)
    n_sub, (S, A) = len(game.successors), game.R.shape
    Q = np.zeros((n_sub, S, A))
    p = params
    for _ in range(p.episodes):
        s, o = game.start, game.first
        for _ in range(p.horizon):
            a = int(rng.integers(A)) if rng.random() < p.epsilon else int(Q[o, s].argmax())
            s2 = int(rng.choice(S, p=game.P[s, a]))
            if game.goals[o, s2]:
                succ = list(game.successors[o])
                values = Q[succ, s2].max(-1)
                cont = game.bonus + (values.min() if robust else values.mean())
                if robust and rng.random() >= p.adversary_epsilon:
                    o2 = succ[int(values.argmin())]
                else:
                    o2 = succ[int(rng.integers(len(succ)))]
            else:
                cont, o2 = Q[o, s2].max(), o
            Q[o, s, a] += p.lr * (game.R[s, a] + game.gamma * cont - Q[o, s, a])
            s, o = s2, o2
    return Q


@SUBTASK_LEARNERS.register(
    "robust",
    params=SubtaskQParams,
    paper=papers.ROBUST_SUBTASK,
    fidelity="reduced",
    departures=(
        "tabular Q-learning on a finite gridworld game instead of SAC-based critics and actors on continuous "
        "control (F1/10th racing, rooms navigation): the min-over-successors backup of the asynchronous variant is "
        "kept, the function approximation is not",
        "the adversary is epsilon-greedy on the learned min (no separately trained adversary policy as in the "
        "paper's multi-agent variant); subtasks are trained together in one stream, not asynchronously in parallel",
    ),
)
def robust(game: SubtaskGame, params: SubtaskQParams = SubtaskQParams(), seed: int = 0) -> np.ndarray:
    """Robust subtask learning: Q-learning of the subtask policies against an adversary picking subtask orders."""
    return q_learning(game, params, seed, robust=True)


@SUBTASK_LEARNERS.register(
    "average",
    params=SubtaskQParams,
    paper=papers.ROBUST_SUBTASK,
    fidelity="reduced",
    departures=(
        "the paper's average-case baseline in tabular form: subtask policies trained on uniformly random task "
        "sequences, the boundary backup bootstrapping from the mean over successors",
    ),
)
def average(game: SubtaskGame, params: SubtaskQParams = SubtaskQParams(), seed: int = 0) -> np.ndarray:
    """Average-case subtask learning: Q-learning of the subtask policies on uniformly random subtask orders."""
    return q_learning(game, params, seed, robust=False)
