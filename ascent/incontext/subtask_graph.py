"""Subtask-graph tasks and subtask-graph inference: MSGI (Sohn et al. 2020, arXiv:2001.00248) and MTSGI (Sohn et al.
2022, arXiv:2205.12648), against a graph-free agent at the same number of episodes.

A task is a hidden subtask graph: n subtasks, each with a precondition in disjunctive normal form over the other
subtasks' completion (`pre[j]` = list of conjunctions; empty conjunction: always eligible) and a reward. The agent
acts at the subtask (option) level as in the papers: action j executes subtask j, which completes it and pays its
reward when j is eligible (its precondition holds and it is not yet done) and wastes the step otherwise; action n
stops. It observes the completion and eligibility vectors and the steps left; an episode is `budget` steps.

Few-shot protocol (both papers): on a new task the agent gets K adaptation episodes, then is scored on one test
episode. MSGI explores (count-based bonus over eligible subtasks), infers each precondition from the (completion,
eligibility) pairs it saw with a decision tree turned into a DNF (the papers' ILP), estimates each subtask's reward
from what it received, and plans on the inferred graph. MTSGI also runs that inference on the training tasks and
keeps the inferred graphs as its prior; on a test task it picks the prior graph that best explains the adaptation
data and keeps, per subtask, the prior's precondition where the test data do not contradict it (and the prior's
reward where the subtask was never executed). The graph-free control is option-level tabular Q-learning on the
test task itself (the papers' HRL baseline) with the same K episodes.

Tasks come from a family of template graphs: a task is a template with some preconditions redrawn and its rewards
perturbed, so training tasks share structure with held-out ones (MTSGI's premise).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

import gymnasium as gym
import numpy as np

from ascent.incontext.agents import AGENTS
from ascent.papers import MSGI, MTSGI

DNF = list[tuple[int, ...]]


@dataclass
class SubtaskGraph:
    """Preconditions (one DNF per subtask: a list of conjunctions of subtask indices) and rewards."""

    pre: list[DNF]
    reward: np.ndarray  # (n,)

    @property
    def n(self) -> int:
        return len(self.pre)

    def eligible(self, done: np.ndarray) -> np.ndarray:
        """(n,) bool: not done and some conjunction of the precondition fully done."""
        ok = np.array([any(all(done[i] for i in conj) for conj in dnf) for dnf in self.pre], dtype=bool)
        return ok & ~done.astype(bool)


@dataclass(frozen=True)
class FamilyParams:
    """A family of subtask-graph tasks built from template graphs."""

    layers: tuple[int, ...] = (3, 3, 3, 3)
    """Subtasks per layer; a subtask's precondition uses subtasks of earlier layers."""
    templates: int = 4
    """Template graphs; every task is one of them, perturbed."""
    redraw: float = 0.2
    """Probability that a task redraws a subtask's precondition from scratch."""
    p_or: float = 0.25
    """Probability that a precondition is a disjunction of two conjunctions."""
    reward_noise: float = 0.1
    """sd of the per-task Gaussian perturbation of the template's rewards."""
    distractors: int = 2
    """Subtasks per task with a negative reward (-0.5)."""
    budget: int = 6
    """Steps (subtask executions) per episode."""

    def __post_init__(self) -> None:
        if len(self.layers) < 2 or min(self.layers) < 1 or self.templates < 1 or self.budget < 1:
            raise ValueError("need >= 2 non-empty layers, templates >= 1 and budget >= 1")
        if not (0 <= self.redraw <= 1 and 0 <= self.p_or <= 1):
            raise ValueError("redraw and p_or are probabilities in [0, 1]")


def _draw_pre(rng: np.random.Generator, earlier: np.ndarray, p_or: float) -> DNF:
    def conj() -> tuple[int, ...]:
        k = min(len(earlier), int(rng.integers(1, 3)))
        return tuple(sorted(int(i) for i in rng.choice(earlier, size=k, replace=False)))

    dnf = [conj()]
    if rng.random() < p_or:
        dnf.append(conj())
    return dnf


class SubtaskFamily:
    """Template graphs (seeded) and tasks drawn from them; `tasks(split, count, seed)` gives disjoint streams."""

    def __init__(self, params: FamilyParams = FamilyParams(), seed: int = 0) -> None:
        self.params = params
        self.layer_of = np.repeat(np.arange(len(params.layers)), params.layers)
        self.n = int(self.layer_of.size)
        rng = np.random.default_rng([seed, 39])
        self.templates = [self._draw_graph(rng) for _ in range(params.templates)]

    def _draw_graph(self, rng: np.random.Generator) -> SubtaskGraph:
        pre: list[DNF] = []
        for j in range(self.n):
            earlier = np.flatnonzero(self.layer_of < self.layer_of[j])
            pre.append([()] if earlier.size == 0 else _draw_pre(rng, earlier, self.params.p_or))
        reward = 0.2 + 0.3 * self.layer_of + 0.2 * rng.random(self.n)
        return SubtaskGraph(pre, reward)

    def task(self, rng: np.random.Generator) -> SubtaskGraph:
        p = self.params
        t = self.templates[int(rng.integers(len(self.templates)))]
        pre = [list(d) for d in t.pre]
        for j in range(self.n):
            earlier = np.flatnonzero(self.layer_of < self.layer_of[j])
            if earlier.size and rng.random() < p.redraw:
                pre[j] = _draw_pre(rng, earlier, p.p_or)
        reward = t.reward + p.reward_noise * rng.standard_normal(self.n)
        reward[rng.choice(self.n, size=p.distractors, replace=False)] = -0.5
        return SubtaskGraph(pre, reward)

    def tasks(self, split: str, count: int, seed: int) -> list[SubtaskGraph]:
        if split not in ("train", "test"):
            raise ValueError(f"split must be train or test, got {split!r}")
        rng = np.random.default_rng([seed, 0 if split == "train" else 1, 56])
        return [self.task(rng) for _ in range(count)]


class SubtaskEnv(gym.Env):
    """One subtask-graph task as a Gymnasium environment (subtask-level actions; n = stop).

    Observation: float32 (2n + 1,) = completion (n), eligibility (n), steps left / budget."""

    def __init__(self, graph: SubtaskGraph, budget: int) -> None:
        self.graph, self.budget = graph, budget
        n = graph.n
        self.observation_space = gym.spaces.Box(0.0, 1.0, (2 * n + 1,), np.float32)
        self.action_space = gym.spaces.Discrete(n + 1)
        self.done = np.zeros(n, dtype=bool)
        self.left = budget

    def _obs(self) -> np.ndarray:
        return np.concatenate([self.done, self.graph.eligible(self.done), [self.left / self.budget]]).astype(np.float32)

    def reset(self, *, seed: Optional[int] = None, options: Optional[dict] = None):
        super().reset(seed=seed)
        self.done[:] = False
        self.left = self.budget
        return self._obs(), {}

    def step(self, action: int):
        n = self.graph.n
        if not 0 <= int(action) <= n:
            raise ValueError(f"action must be in [0, {n}], got {action!r}")
        if action == n:
            return self._obs(), 0.0, True, False, {"executed": False}
        ok = bool(self.graph.eligible(self.done)[action])
        reward = float(self.graph.reward[action]) if ok else 0.0
        self.done[action] |= ok
        self.left -= 1
        stuck = not self.graph.eligible(self.done).any()
        return self._obs(), reward, self.left == 0 or stuck, False, {"executed": ok}


# ---------------------------------------------------------------------------------------------------- inference


def _tree(x: np.ndarray, y: np.ndarray, features: list[int], depth: int, path: tuple) -> list[tuple]:
    """CART on binary features (gini): the paths (tuples of (feature, value)) of leaves predicting 1."""
    if y.all():
        return [path]
    if not y.any() or depth == 0 or not features:
        return []
    best, best_gini = None, _gini(y)
    for f in features:
        on = x[:, f] == 1
        if on.all() or not on.any():
            continue
        g = (on.sum() * _gini(y[on]) + (~on).sum() * _gini(y[~on])) / len(y)
        if g < best_gini - 1e-12:
            best, best_gini = f, g
    if best is None:
        return [path] if y.mean() > 0.5 else []
    on = x[:, best] == 1
    rest = [f for f in features if f != best]
    return _tree(x[on], y[on], rest, depth - 1, path + ((best, 1),)) + _tree(
        x[~on], y[~on], rest, depth - 1, path + ((best, 0),)
    )


def _gini(y: np.ndarray) -> float:
    p = float(y.mean()) if len(y) else 0.0
    return 2 * p * (1 - p)


def infer_precondition(done: np.ndarray, elig: np.ndarray, j: int, depth: int = 4) -> Optional[DNF]:
    """The ILP step of MSGI for subtask j: a decision tree from completion vectors (m, n) to j's eligibility (m,),
    over the samples where j is not done; each leaf predicting "eligible" becomes a conjunction of the features
    tested positive on its path (negative tests are dropped: preconditions are monotone). None: no sample."""
    keep = ~done[:, j].astype(bool)
    x, y = done[keep].astype(np.int8), elig[keep, j].astype(bool)
    if not len(y):
        return None
    features = [f for f in range(done.shape[1]) if f != j]
    paths = _tree(x, y, features, depth, ())
    return sorted({tuple(sorted(f for f, v in p if v == 1)) for p in paths})


def consistent(dnf: DNF, done: np.ndarray, elig: np.ndarray, j: int) -> bool:
    """Does precondition `dnf` for subtask j reproduce every observed eligibility of j (where j was not done)?"""
    for d, e in zip(done, elig):
        if not d[j] and any(all(d[i] for i in c) for c in dnf) != bool(e[j]):
            return False
    return True


@dataclass
class Experience:
    """What an agent saw on one task: (completion, eligibility) pairs and the rewards of executed subtasks."""

    n: int
    done: list[np.ndarray] = field(default_factory=list)
    elig: list[np.ndarray] = field(default_factory=list)
    rewards: dict[int, list[float]] = field(default_factory=dict)
    counts: Optional[np.ndarray] = None

    def add(self, obs: np.ndarray) -> None:
        self.done.append(obs[: self.n] > 0.5)
        self.elig.append(obs[self.n : 2 * self.n] > 0.5)

    def arrays(self) -> tuple[np.ndarray, np.ndarray]:
        return np.array(self.done), np.array(self.elig)


def infer_graph(exp: Experience, depth: int = 4) -> tuple[SubtaskGraph, np.ndarray]:
    """MSGI's inferred graph from one task's experience (never-eligible subtasks get an unsatisfiable precondition,
    never-executed ones reward 0) and a (n,) mask of the subtasks whose reward was observed."""
    done, elig = exp.arrays()
    pre: list[DNF] = []
    for j in range(exp.n):
        dnf = infer_precondition(done, elig, j, depth)
        pre.append(dnf if dnf else [])
    seen = np.array([j in exp.rewards for j in range(exp.n)])
    reward = np.array([np.mean(exp.rewards[j]) if j in exp.rewards else 0.0 for j in range(exp.n)])
    return SubtaskGraph(pre, reward), seen


def plan_value(graph: SubtaskGraph, done: np.ndarray, steps: int, memo: dict) -> float:
    """Best return reachable in `steps` executions on `graph` from completion `done` (exact, memoised; stopping is
    allowed). The papers plan with GRProp, a differentiable approximation; at 12 subtasks the exact value is cheap."""
    key = (done.tobytes(), steps)
    if key in memo:
        return memo[key]
    best = 0.0
    if steps > 0:
        for j in np.flatnonzero(graph.eligible(done)):
            nxt = done.copy()
            nxt[j] = True
            best = max(best, float(graph.reward[j]) + plan_value(graph, nxt, steps - 1, memo))
    memo[key] = best
    return best


def plan_action(graph: SubtaskGraph, obs: np.ndarray, budget: int, memo: dict) -> int:
    """The planner's action on the real task: among the subtasks observed eligible, the one with the best
    estimated reward plus planned value afterwards on `graph`; stop (n) when none is worth more than 0."""
    n = graph.n
    done, elig = obs[:n] > 0.5, obs[n : 2 * n] > 0.5
    steps = int(round(obs[-1] * budget))
    best, act = 0.0, n
    for j in np.flatnonzero(elig):
        nxt = done.copy()
        nxt[j] = True
        v = float(graph.reward[j]) + plan_value(graph, nxt, steps - 1, memo)
        if v > best + 1e-9:
            best, act = v, int(j)
    return act


# ---------------------------------------------------------------------------------------------------- agents


def explore_episode(env: SubtaskEnv, exp: Experience, rng: np.random.Generator) -> float:
    """One adaptation episode of MSGI's exploration: the eligible subtask executed least often so far (ties at
    random), the count term of the paper's UCB-style bonus; records every observation and reward in `exp`."""
    if exp.counts is None:
        exp.counts = np.zeros(exp.n)
    obs, _ = env.reset()
    exp.add(obs)
    total, end = 0.0, False
    while not end:
        elig = np.flatnonzero(obs[exp.n : 2 * exp.n] > 0.5)
        c = exp.counts[elig] + rng.random(elig.size) * 0.5
        j = int(elig[np.argmin(c)])
        obs, r, end, _, _ = env.step(j)
        exp.counts[j] += 1
        exp.rewards.setdefault(j, []).append(r)
        exp.add(obs)
        total += r
    return total


def play(env: SubtaskEnv, policy) -> float:
    """Return of one episode of `policy(obs) -> action`."""
    obs, _ = env.reset()
    total, end = 0.0, False
    while not end:
        obs, r, end, _, _ = env.step(policy(obs))
        total += r
    return total


@dataclass(frozen=True)
class MSGIParams:
    """Subtask-graph inference (MSGI) / with the training tasks' graphs as prior (MTSGI)."""

    depth: int = 4
    """Depth of the decision tree that infers each precondition."""


class GraphAgent:
    """MSGI (no prior) or MTSGI (prior = graphs inferred on training tasks): `adapt` explores K episodes and infers
    the graph; `act` plans on it."""

    def __init__(self, params: MSGIParams, prior: Optional[list[tuple[SubtaskGraph, np.ndarray]]] = None) -> None:
        self.params, self.prior = params, prior
        self.graph: Optional[SubtaskGraph] = None
        self.memo: dict = {}

    def adapt(self, env: SubtaskEnv, episodes: int, rng: np.random.Generator) -> Experience:
        exp = Experience(env.graph.n)
        for _ in range(episodes):
            explore_episode(env, exp, rng)
        graph, seen = infer_graph(exp, self.params.depth)
        if self.prior:
            graph = combine_with_prior(graph, seen, exp, self.prior)
        self.graph, self.memo, self.budget = graph, {}, env.budget
        return exp

    def act(self, obs: np.ndarray) -> int:
        assert self.graph is not None, "adapt first"
        return plan_action(self.graph, obs, self.budget, self.memo)


def combine_with_prior(
    graph: SubtaskGraph, seen: np.ndarray, exp: Experience, prior: list[tuple[SubtaskGraph, np.ndarray]]
) -> SubtaskGraph:
    """MTSGI's transfer: the prior graph that explains the most observed eligibilities and rewards (its preconditions
    consistent with the data, its rewards within 0.3 of the observed means), then per subtask the prior's
    precondition unless the data contradict it, and the prior's reward where the subtask was never executed."""
    done, elig = exp.arrays()
    n = graph.n

    def score(g: SubtaskGraph) -> float:
        pre_ok = sum(consistent(g.pre[j], done, elig, j) for j in range(n))
        rew_ok = sum(abs(g.reward[j] - graph.reward[j]) < 0.3 for j in np.flatnonzero(seen))
        return pre_ok + rew_ok

    best = max((g for g, _ in prior), key=score)
    pre = [best.pre[j] if consistent(best.pre[j], done, elig, j) else graph.pre[j] for j in range(n)]
    reward = np.where(seen, graph.reward, best.reward)
    return SubtaskGraph(pre, reward)


def build_prior(
    family: SubtaskFamily, tasks: list[SubtaskGraph], episodes: int, seed: int, depth: int = 4
) -> list[tuple[SubtaskGraph, np.ndarray]]:
    """MTSGI's prior: the graph MSGI infers on each training task from `episodes` exploration episodes."""
    rng = np.random.default_rng([seed, 7])
    out = []
    for g in tasks:
        exp = Experience(g.n)
        env = SubtaskEnv(g, family.params.budget)
        for _ in range(episodes):
            explore_episode(env, exp, rng)
        out.append(infer_graph(exp, depth))
    return out


@dataclass(frozen=True)
class OptionQParams:
    """Option-level tabular Q-learning on the test task (graph-free control)."""

    lr: float = 0.5
    """Step size."""
    q_init: float = 1.0
    """Optimistic initial value (drives exploration)."""
    eps: float = 0.1
    """epsilon-greedy exploration during adaptation."""


class OptionQAgent:
    """Graph-free: Q(completion, steps left, subtask) learned from the K adaptation episodes on the test task
    alone, greedy among eligible subtasks (and stop) in the test episode."""

    def __init__(self, params: OptionQParams = OptionQParams()) -> None:
        self.params = params
        self.q: dict = {}

    def _q(self, obs: np.ndarray, n: int) -> np.ndarray:
        key = obs[:n].tobytes() + obs[-1:].tobytes()
        if key not in self.q:
            self.q[key] = np.full(n + 1, self.params.q_init)
            self.q[key][n] = 0.0
        return self.q[key]

    def _choose(self, obs: np.ndarray, n: int, rng: Optional[np.random.Generator]) -> int:
        allowed = np.append(np.flatnonzero(obs[n : 2 * n] > 0.5), n)
        if rng is not None and rng.random() < self.params.eps:
            return int(rng.choice(allowed))
        q = self._q(obs, n)[allowed]
        return int(allowed[np.argmax(q + (1e-6 * rng.random(q.size) if rng is not None else 0))])

    def adapt(self, env: SubtaskEnv, episodes: int, rng: np.random.Generator) -> None:
        n, lr = env.graph.n, self.params.lr
        self.n = n
        for _ in range(episodes):
            obs, _ = env.reset()
            end = False
            while not end:
                a = self._choose(obs, n, rng)
                nxt, r, end, _, _ = env.step(a)
                target = r if end else r + self._q(nxt, n)[np.append(np.flatnonzero(nxt[n : 2 * n] > 0.5), n)].max()
                q = self._q(obs, n)
                q[a] += lr * (target - q[a])
                obs = nxt

    def act(self, obs: np.ndarray) -> int:
        return self._choose(obs, self.n, None)


@AGENTS.register(
    "msgi",
    params=MSGIParams,
    paper=MSGI,
    fidelity="reduced",
    departures=(
        "exploration is the count term of MSGI's UCB bonus (least-executed eligible subtask), no learned policy",
        "plans exactly on the inferred graph (memoised search) instead of GRProp, cheap at 12 subtasks",
        "the ILP is a depth-4 CART tree on completion bits whose positive leaves become monotone conjunctions",
    ),
)
def msgi(params: MSGIParams = MSGIParams()) -> GraphAgent:
    """MSGI (Sohn et al. 2020, arXiv:2001.00248): explore, infer preconditions by ILP (decision tree -> DNF) and
    rewards by their means, plan on the inferred subtask graph."""
    return GraphAgent(params)


@AGENTS.register(
    "mtsgi",
    params=MSGIParams,
    paper=MTSGI,
    fidelity="reduced",
    departures=(
        "the prior is the set of graphs inferred on training tasks; the test task takes the one that explains its "
        "adaptation data best, not the paper's similarity-weighted mixture over training tasks",
        "a prior precondition is kept unless the test data contradict it; the paper weighs prior and inferred "
        "graphs by confidence",
        "exploration is MSGI's (count-based), not the paper's prior-guided exploration",
        "symbolic subtask-level tasks (the papers' options given), not a MiniGrid or pixel gridworld",
    ),
)
def mtsgi(params: MSGIParams = MSGIParams(), prior: Optional[list] = None) -> GraphAgent:
    """MTSGI (Sohn et al. 2022, arXiv:2205.12648): MSGI's inference on the test task, with the subtask graphs inferred
    on the training tasks as a prior for preconditions and rewards the adaptation data leave open."""
    return GraphAgent(params, prior or [])


@AGENTS.register(
    "option_q",
    params=OptionQParams,
    paper=MSGI,
    fidelity="reduced",
    departures=(
        "MSGI's HRL baseline learns an option policy by A2C; here tabular Q-learning over (completion, steps)",
    ),
)
def option_q(params: OptionQParams = OptionQParams()) -> OptionQAgent:
    """The graph-free control: option-level Q-learning on the test task (MSGI's HRL baseline, tabular)."""
    return OptionQAgent(params)


def evaluate(
    family: SubtaskFamily, tasks: list[SubtaskGraph], shots: list[int], seed: int, prior: list
) -> dict[str, np.ndarray]:
    """Test-episode return after K adaptation episodes on each task, per agent: (len(shots), tasks) arrays for
    `mtsgi`, `msgi`, `option_q`, `random` (uniform over eligible subtasks) and `oracle` (planning on the true graph)."""
    budget = family.params.budget
    out = {k: np.zeros((len(shots), len(tasks))) for k in ("mtsgi", "msgi", "option_q", "random", "oracle")}
    for t, g in enumerate(tasks):
        env = SubtaskEnv(g, budget)
        memo: dict = {}
        oracle = play(env, lambda o: plan_action(g, o, budget, memo))
        for s, k in enumerate(shots):
            out["oracle"][s, t] = oracle
            for name, agent in (("mtsgi", mtsgi(prior=prior)), ("msgi", msgi()), ("option_q", option_q())):
                agent.adapt(env, k, np.random.default_rng([seed, t, k, 1]))
                out[name][s, t] = play(env, agent.act)
            rng = np.random.default_rng([seed, t, k, 2])
            out["random"][s, t] = play(env, lambda o: int(rng.choice(np.flatnonzero(o[g.n : 2 * g.n] > 0.5))))
    return out
