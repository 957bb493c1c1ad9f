"""Rulebook-informed RL: a grid-driving world and a situation-aware rulebook reward with controlled rule exceptions
(Bogdoll, Qin, Nekolla, Abouelazm, Joseph & Zöllner 2024, "Informed Reinforcement Learning for Situation-Aware
Traffic Rule Exceptions", ICRA 2024, arXiv:2402.04168; the authors' code, github.com/fzi-forschungszentrum-informatik/
informed_rl, `utilities/traffic_rulebook.py`).

The paper scores each step of a learned trajectory with a rulebook: rules ordered by priority (no collision > stay
on the road > keep your lane > progress), each a penalty whose weight follows the hierarchy. The reward is
*situation-aware*: when an anomaly (a stopped vehicle) blocks the ego lane within an activation distance, the
lower-priority rules (lane keeping, staying on the road) are scaled down by a hierarchy coefficient (0.1 in the
authors' code), so the agent may break them, in a controlled way, to get past; away from the anomaly they apply in
full. The baseline is the unstructured driving reward (progress, goal, collision) without the rulebook.

`GridDriving` is a small driving world in Gymnasium's API: a road of `length` columns and three rows (0 the
shoulder, off-road; 1 the ego lane; 2 the oncoming lane). Each episode is one situation: a clear road, a stopped
vehicle blocking the ego lane (passing it needs a rule exception), or a slow lead vehicle (passing it is faster but
no exception covers it: the rulebook says follow). An oncoming car drives down row 2. Actions: forward, left and
forward, right and forward, wait. The reward is a `DRIVING_REWARDS` entry applied to the step's `DrivingEvent`;
`info` carries the event and its rule violations, so every arm is scored by the same rule count.
`q_learning` is the agent (tabular; the paper's point is that the reward works with any agent).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import gymnasium as gym
import numpy as np

from ascent import papers
from ascent.registry import Registry
from ascent.typed import ConfigError

DRIVING_REWARDS: Registry = Registry("driving reward")
"""Per-step rewards of the grid-driving world: `fn(event: DrivingEvent, params) -> float`."""

SHOULDER, EGO_LANE, ONCOMING = 0, 1, 2
FORWARD, LEFT, RIGHT, WAIT = 0, 1, 2, 3
SITUATIONS = ("clear", "stopped", "slow")


@dataclass(frozen=True)
class DrivingEvent:
    """What happened in one step: the facts every reward reads."""

    progress: int
    """Columns advanced this step (0 or 1)."""
    row: int
    """The ego's row after the step (0 shoulder, 1 ego lane, 2 oncoming lane)."""
    collision: bool
    """The ego hit the stopped vehicle, the lead vehicle or the oncoming car (the episode ends)."""
    finished: bool
    """The ego reached the last column without a collision (the episode ends)."""
    exception: bool
    """A stopped vehicle blocks the ego lane and the ego is at most `activation` columns before it or beside it."""

    @property
    def off_road(self) -> bool:
        return self.row == SHOULDER

    @property
    def off_lane(self) -> bool:
        return self.row == ONCOMING


@dataclass(frozen=True)
class RulebookParams:
    """Rule weights in priority order (collision > off-road > lane keeping > progress) and the exception's
    hierarchy coefficient."""

    collision: float = 60.0
    """Penalty of a collision (highest priority)."""
    off_road: float = 40.0
    """Penalty per step on the shoulder."""
    lane: float = 20.0
    """Penalty per step in the oncoming lane."""
    progress: float = 1.0
    """Reward per column advanced."""
    finish: float = 10.0
    """Reward for reaching the end of the road."""
    time: float = 0.1
    """Cost per step."""
    coeff: float = 0.1
    """Hierarchy coefficient applied to the off-road and lane penalties inside an exception (1 = no exception)."""

    def __post_init__(self) -> None:
        if min(self.collision, self.off_road, self.lane, self.progress, self.finish, self.time) < 0:
            raise ConfigError("rulebook weights must be >= 0")
        if not 0 <= self.coeff <= 1:
            raise ConfigError(f"rulebook coeff must be in [0, 1], got {self.coeff}")


def _task_terms(e: DrivingEvent, p: RulebookParams) -> float:
    return p.progress * e.progress + p.finish * e.finished - p.time - p.collision * e.collision


@DRIVING_REWARDS.register(
    "plain",
    params=RulebookParams,
    paper=papers.INFORMED_RL,
    fidelity="reduced",
    departures=("the unstructured baseline reward on a grid instead of CARLA: progress, goal, time, collision",),
)
def plain(event: DrivingEvent, params: RulebookParams = RulebookParams()) -> float:
    """progress * cols + finish * 1[finished] - time - collision * 1[collision]; no traffic rules."""
    return _task_terms(event, params)


@DRIVING_REWARDS.register(
    "rulebook",
    params=RulebookParams,
    paper=papers.INFORMED_RL,
    fidelity="reduced",
    departures=(
        "a 3-row grid road instead of CARLA with Frenet-space trajectories: one step is one cell, rules are checked "
        "per step, not on a sampled trajectory",
        "three rules below collision (off-road, lane keeping, progress) instead of the paper's LTL rule realisations; "
        "no minimum-clearance reward",
    ),
)
def rulebook(event: DrivingEvent, params: RulebookParams = RulebookParams()) -> float:
    """Situation-aware rulebook: plain - c * (off_road * 1[shoulder] + lane * 1[oncoming lane]), c = coeff inside an
    exception (a stopped vehicle blocks the lane within the activation distance), 1 elsewhere."""
    c = params.coeff if event.exception else 1.0
    return _task_terms(event, params) - c * (params.off_road * event.off_road + params.lane * event.off_lane)


@DRIVING_REWARDS.register("static_rulebook", params=RulebookParams, paper=None, fidelity="ascent")
def static_rulebook(event: DrivingEvent, params: RulebookParams = RulebookParams()) -> float:
    """Ablation: the same rules with no exception (coefficient 1 everywhere), to show what the exception buys."""
    return _task_terms(event, params) - params.off_road * event.off_road - params.lane * event.off_lane


@dataclass(frozen=True)
class DrivingConfig:
    """The world's size and situation mix."""

    length: int = 14
    """Columns of road; the ego starts at column 0, row 1 and finishes at column length - 1."""
    horizon: int = 40
    """Steps before truncation."""
    activation: int = 2
    """Columns before a stopped vehicle from which the exception holds (the rulebook's activation distance)."""
    p_situation: tuple[float, float, float] = (0.2, 0.4, 0.4)
    """Probabilities of the clear, stopped-vehicle and slow-vehicle situations."""
    p_oncoming: float = 0.8
    """Probability that an oncoming car drives down row 2."""

    def __post_init__(self) -> None:
        if self.length < 8 or self.horizon < self.length or self.activation < 0:
            raise ConfigError(f"need length >= 8, horizon >= length, activation >= 0; got {self}")
        p = np.asarray(self.p_situation, dtype=float)
        if p.shape != (3,) or (p < 0).any() or abs(p.sum() - 1) > 1e-9 or not 0 <= self.p_oncoming <= 1:
            raise ConfigError("p_situation must be 3 probabilities summing to 1 and p_oncoming in [0, 1]")


@dataclass
class Situation:
    """One episode's scenario (positions are columns; None = absent)."""

    kind: str
    stopped: int | None = None
    lead: int | None = None
    oncoming: int | None = None
    extra: dict = field(default_factory=dict)


class GridDriving(gym.Env):
    """The grid-driving world (module docstring). Observation (MultiDiscrete): [row, kind of the nearest vehicle in
    the ego lane at or ahead of the ego (0 none, 1 stopped, 2 slow), its distance (0-3, 4 = 4 or more), the oncoming
    car's distance ahead (0 none or passed, 1 + min(dx, 5)), columns to go (min(., 3))]. `options={"situation":
    Situation(...)}` replays a given scenario."""

    def __init__(self, reward: str = "rulebook", config: DrivingConfig = DrivingConfig()) -> None:
        self.config = config
        self.reward_name = reward
        self.reward_fn = DRIVING_REWARDS.resolve(reward)
        self.observation_space = gym.spaces.MultiDiscrete([3, 3, 5, 7, 4])
        self.action_space = gym.spaces.Discrete(4)

    def sample_situation(self) -> Situation:
        c, rng = self.config, self.np_random
        kind = SITUATIONS[int(rng.choice(3, p=np.asarray(c.p_situation)))]
        s = Situation(kind)
        if kind == "stopped":
            s.stopped = int(rng.integers(4, c.length - 4))
        elif kind == "slow":
            s.lead = int(rng.integers(2, 5))
        if rng.random() < c.p_oncoming:
            s.oncoming = int(c.length + rng.integers(0, 13))
        return s

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        s = (options or {}).get("situation") or self.sample_situation()
        self.s = Situation(s.kind, s.stopped, s.lead, s.oncoming)
        self.x, self.row, self.t = 0, EGO_LANE, 0
        return self._obs(), {"situation": self.s.kind}

    def _obs(self) -> np.ndarray:
        ahead = [(x, k) for x, k in ((self.s.stopped, 1), (self.s.lead, 2)) if x is not None and x >= self.x]
        kind, dist = (0, 0) if not ahead else (min(ahead)[1], min(min(ahead)[0] - self.x, 4))
        dx = None if self.s.oncoming is None else self.s.oncoming - self.x
        car = 0 if dx is None or dx < 0 else 1 + min(dx, 5)
        return np.array([self.row, kind, dist, car, min(self.config.length - 1 - self.x, 3)], dtype=np.int64)

    def in_exception(self) -> bool:
        s = self.s.stopped
        return s is not None and s - self.config.activation <= self.x <= s

    def step(self, action):
        if not self.action_space.contains(action):
            raise ValueError(f"action must be one of 0 forward, 1 left, 2 right, 3 wait; got {action!r}")
        old_x, old_row, old_car = self.x, self.row, self.s.oncoming
        if action != WAIT:
            self.x += 1
            self.row = min(self.row + 1, ONCOMING) if action == LEFT else self.row
            self.row = max(self.row - 1, SHOULDER) if action == RIGHT else self.row
        self.t += 1
        if self.s.lead is not None and self.t % 2 == 0:
            self.s.lead = self.s.lead + 1 if self.s.lead + 1 < self.config.length else None
        if self.s.oncoming is not None:
            self.s.oncoming = self.s.oncoming - 1 if self.s.oncoming > 0 else None
        me = (self.x, self.row)
        swapped = old_car is not None and old_row == ONCOMING and self.row == ONCOMING and old_car == self.x
        collision = (
            me == (self.s.stopped, EGO_LANE)
            or me == (self.s.lead, EGO_LANE)
            or me == (self.s.oncoming, ONCOMING)
            or (swapped and self.s.oncoming == old_x)
        )
        finished = not collision and self.x >= self.config.length - 1
        event = DrivingEvent(int(self.x > old_x), self.row, collision, finished, self.in_exception())
        info = {"event": event, "violation": (event.off_road or event.off_lane) and not event.exception}
        truncated = self.t >= self.config.horizon and not (collision or finished)
        return self._obs(), float(self.reward_fn(event)), collision or finished, truncated, info


def obs_index(obs: np.ndarray) -> int:
    """The flat index of a GridDriving observation (for a Q-table)."""
    return int(np.ravel_multi_index(tuple(int(v) for v in obs), (3, 3, 5, 7, 4)))


@dataclass(frozen=True)
class QLearningParams:
    episodes: int = 3000
    """Training episodes."""
    alpha: float = 0.2
    """Step size."""
    gamma: float = 0.95
    """Discount."""
    eps_start: float = 1.0
    """Exploration at the start; decays linearly to eps_end over the first 80% of the episodes."""
    eps_end: float = 0.05
    """Exploration at the end."""

    def __post_init__(self) -> None:
        if self.episodes < 1 or not 0 < self.alpha <= 1 or not 0 <= self.gamma < 1:
            raise ConfigError("need episodes >= 1, alpha in (0, 1], gamma in [0, 1)")


def q_learning(env: GridDriving, seed: int, params: QLearningParams = QLearningParams()) -> np.ndarray:
    """Tabular Q-learning with epsilon-greedy exploration (Watkins & Dayan 1992); returns Q (states, actions)."""
    rng = np.random.default_rng(seed)
    q = np.zeros((int(np.prod(env.observation_space.nvec)), env.action_space.n))
    obs, _ = env.reset(seed=seed)
    for ep in range(params.episodes):
        if ep:
            obs, _ = env.reset()
        eps = max(params.eps_end, params.eps_start - (params.eps_start - params.eps_end) * ep / (0.8 * params.episodes))
        s, done = obs_index(obs), False
        while not done:
            a = int(rng.integers(env.action_space.n)) if rng.random() < eps else int(q[s].argmax())
            obs, r, term, trunc, _ = env.step(a)
            s2 = obs_index(obs)
            q[s, a] += params.alpha * (r + (0.0 if term else params.gamma * q[s2].max()) - q[s, a])
            s, done = s2, term or trunc
    return q


@dataclass(frozen=True)
class DrivingScore:
    """Greedy-policy statistics over test episodes (means per episode)."""

    success: float
    """Fraction that reached the end without a collision."""
    collision: float
    """Fraction that ended in a collision."""
    violations: float
    """Steps off the road or in the oncoming lane outside an exception, per episode."""
    exception_steps: float
    """Steps off the ego lane inside an exception (allowed, scaled down), per episode."""
    by_situation: dict
    """success and violations per situation kind."""


def evaluate(q: np.ndarray, situations: list[Situation], config: DrivingConfig = DrivingConfig()) -> DrivingScore:
    """Run the greedy policy of `q` on each given situation (the same list for every arm)."""
    env = GridDriving("plain", config)
    rows = []
    for i, s in enumerate(situations):
        obs, _ = env.reset(seed=i, options={"situation": s})
        done, viol, exc, coll, fin = False, 0, 0, False, False
        while not done:
            obs, _, term, trunc, info = env.step(int(q[obs_index(obs)].argmax()))
            e = info["event"]
            viol += info["violation"]
            exc += (e.off_road or e.off_lane) and e.exception
            coll, fin, done = e.collision, e.finished, term or trunc
        rows.append((s.kind, fin, coll, viol, exc))
    mean = lambda k, rs: float(np.mean([r[k] for r in rs])) if rs else float("nan")  # noqa: E731
    by = {
        kind: {
            "success": mean(1, [r for r in rows if r[0] == kind]),
            "violations": mean(3, [r for r in rows if r[0] == kind]),
        }
        for kind in SITUATIONS
    }
    return DrivingScore(mean(1, rows), mean(2, rows), mean(3, rows), mean(4, rows), by)


def held_out_situations(n: int, seed: int, config: DrivingConfig = DrivingConfig()) -> list[Situation]:
    """`n` scenarios drawn from the world's mix with their own seed (shared by every arm)."""
    env = GridDriving("plain", config)
    env.reset(seed=seed)
    return [env.sample_situation() for _ in range(n)]


def train_and_score(reward: str, seed: int, episodes: int = 3000, n_test: int = 300) -> DrivingScore:
    """One arm of the comparison: Q-learning on `reward` with `seed`, scored on the seed's test situations."""
    q = q_learning(GridDriving(reward), seed, QLearningParams(episodes=episodes))
    return evaluate(q, held_out_situations(n_test, 10_000 + seed))
