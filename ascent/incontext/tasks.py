"""Task families for in-context RL: multi-armed bandits, Dark Room and Dark Key-to-Door, each a distribution of
tasks with a fixed train/test split, stepped in numpy for many tasks at once and exposed through the Gymnasium API.

The grid families follow Algorithm Distillation (Laskin et al. 2022, "In-context Reinforcement Learning with
Algorithm Distillation", arXiv:2210.14215, Section 5 and Appendix): a 9 x 9 room in which the agent sees only its
own cell (a discrete observation), five actions (0 no-op, 1 up, 2 right, 3 down, 4 left; walls clip), and a task
is where the hidden targets are.

- Dark Room: the agent starts in the centre; the goal cell is the task; reward 1 on every step the agent is on
  the goal; episodes last 20 steps and never terminate early. 81 tasks (goal cells).
- Dark Key-to-Door: a key cell and a door cell (distinct) are the task; the agent starts on a random cell each
  episode; reward 1 the first time it reaches the key, and 1 the first time it reaches the door holding the key
  (so the return is at most 2); episodes last 50 steps. 81 * 80 tasks.
- Bandits (as in DPT, Lee et al. 2023, arXiv:2306.14892, and AD's meta-RL framing): K Bernoulli arms whose means are
  drawn uniformly from [0, 1]; an episode is one pull (one observation, always 0).

`TaskBatch` steps N tasks of one family in lockstep (all episodes have the family's fixed horizon, so the N tasks
start and end episodes together). `InContextVecEnv` is a `gymnasium.vector.VectorEnv` over a batch (autoreset in
the same step, the finished episode's last observation in `info["final_obs"]`) and `InContextEnv` a single-task
`gymnasium.Env`; both share the batch's dynamics, which are what the tests check.

Departures: the Key-to-Door door pays once per episode (the paper: return at most 2, which this keeps); the
train/test split is a seeded permutation of the finite task sets (AD holds out goals the same way).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, Optional

import numpy as np

from ascent.registry import Paper, Registry

AD = Paper(
    "AD",
    "Laskin et al.",
    2022,
    "In-context Reinforcement Learning with Algorithm Distillation",
    "arXiv:2210.14215",
)
DPT = Paper(
    "DPT",
    "Lee et al.",
    2023,
    "Supervised Pretraining Can Learn In-Context Reinforcement Learning",
    "arXiv:2306.14892",
    section="related",
)

FAMILIES: Registry = Registry("in-context task family")
"""In-context task families: name -> factory(params) -> Family (`ascent list incontext_families --params`)."""

MOVES = np.array([(0, 0), (-1, 0), (0, 1), (1, 0), (0, -1)], dtype=np.int64)
"""Grid actions as (row, column) offsets: 0 no-op, 1 up, 2 right, 3 down, 4 left."""


class TaskBatch:
    """N tasks of one family stepped in lockstep; subclasses hold the dynamics.

    `reset()` starts an episode in every task and returns (N,) observations; `step(actions)` returns
    (obs (N,), reward (N,) float32); an episode is `horizon` steps (the caller counts them). `state()` is the
    Markov state of each task for tabular learners (for Dark Room it equals the observation; Key-to-Door adds
    whether the key is held), `expert()` the optimal action of each task.
    """

    num_obs: int
    num_states: int
    num_actions: int
    horizon: int

    def __init__(self, tasks: np.ndarray, seed: int) -> None:
        self.tasks = np.asarray(tasks)
        self.n = len(self.tasks)
        self.rng = np.random.default_rng(seed)

    def reset(self) -> np.ndarray:
        raise NotImplementedError

    def step(self, actions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        raise NotImplementedError

    def state(self) -> np.ndarray:
        raise NotImplementedError

    def expert(self) -> np.ndarray:
        raise NotImplementedError

    def _check(self, actions: np.ndarray) -> np.ndarray:
        actions = np.asarray(actions, dtype=np.int64)
        if actions.shape != (self.n,) or actions.min(initial=0) < 0 or actions.max(initial=0) >= self.num_actions:
            raise ValueError(f"expected {self.n} actions in [0, {self.num_actions}), got {actions!r}")
        return actions


class BanditBatch(TaskBatch):
    """Bernoulli bandits; a task row holds the K arm means."""

    num_obs = 1
    num_states = 1
    horizon = 1

    def __init__(self, tasks: np.ndarray, seed: int) -> None:
        super().__init__(tasks, seed)
        self.num_actions = self.tasks.shape[1]

    def reset(self) -> np.ndarray:
        return np.zeros(self.n, dtype=np.int64)

    def step(self, actions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        actions = self._check(actions)
        p = self.tasks[np.arange(self.n), actions]  # (N,)
        return np.zeros(self.n, dtype=np.int64), (self.rng.random(self.n) < p).astype(np.float32)

    def state(self) -> np.ndarray:
        return np.zeros(self.n, dtype=np.int64)

    def expert(self) -> np.ndarray:
        return self.tasks.argmax(1)


def toward(pos: np.ndarray, target: np.ndarray) -> np.ndarray:
    """The action moving each agent one cell toward its target, rows first (no-op on the target); (N,)."""
    dr, dc = target[:, 0] - pos[:, 0], target[:, 1] - pos[:, 1]
    return np.select([dr > 0, dr < 0, dc > 0, dc < 0], [3, 1, 2, 4], default=0)


class GridBatch(TaskBatch):
    """The shared 9 x 9 dark-room mechanics: positions, moves clipped at the walls, cell index observations."""

    num_actions = 5

    def __init__(self, tasks: np.ndarray, seed: int, size: int) -> None:
        super().__init__(tasks, seed)
        self.size = size
        self.num_obs = size * size
        self.pos = np.zeros((self.n, 2), dtype=np.int64)

    def cell(self, pos: np.ndarray) -> np.ndarray:
        return pos[:, 0] * self.size + pos[:, 1]

    def move(self, actions: np.ndarray) -> None:
        self.pos = np.clip(self.pos + MOVES[self._check(actions)], 0, self.size - 1)


class DarkRoomBatch(GridBatch):
    """Dark Room; a task row is the goal (row, column)."""

    def __init__(self, tasks: np.ndarray, seed: int, size: int = 9, horizon: int = 20) -> None:
        super().__init__(tasks, seed, size)
        self.horizon = horizon
        self.num_states = self.num_obs

    def reset(self) -> np.ndarray:
        self.pos[:] = self.size // 2
        return self.cell(self.pos)

    def step(self, actions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        self.move(actions)
        return self.cell(self.pos), (self.pos == self.tasks).all(1).astype(np.float32)

    def state(self) -> np.ndarray:
        return self.cell(self.pos)

    def expert(self) -> np.ndarray:
        return toward(self.pos, self.tasks)


class KeyToDoorBatch(GridBatch):
    """Dark Key-to-Door; a task row is (key row, key column, door row, door column)."""

    def __init__(self, tasks: np.ndarray, seed: int, size: int = 9, horizon: int = 50) -> None:
        super().__init__(tasks, seed, size)
        self.horizon = horizon
        self.num_states = 3 * self.num_obs  # cell x (no key, key, door opened)
        self.key = np.zeros(self.n, dtype=bool)
        self.opened = np.zeros(self.n, dtype=bool)

    def reset(self) -> np.ndarray:
        self.pos = self.rng.integers(0, self.size, size=(self.n, 2))
        self.key[:], self.opened[:] = False, False
        return self.cell(self.pos)

    def step(self, actions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        self.move(actions)
        got_key = ~self.key & (self.pos == self.tasks[:, :2]).all(1)
        self.key |= got_key
        opens = self.key & ~self.opened & (self.pos == self.tasks[:, 2:]).all(1)
        self.opened |= opens
        return self.cell(self.pos), (got_key.astype(np.float32) + opens.astype(np.float32))

    def state(self) -> np.ndarray:
        return self.cell(self.pos) + self.num_obs * (self.key.astype(np.int64) + self.opened.astype(np.int64))

    def expert(self) -> np.ndarray:
        target = np.where(self.key[:, None], self.tasks[:, 2:], self.tasks[:, :2])
        return np.where(self.opened, 0, toward(self.pos, target))


@dataclass(frozen=True)
class Family:
    """A task family: its task set, the split, and how to step a batch of its tasks."""

    name: str
    num_obs: int
    num_actions: int
    horizon: int
    train_tasks: np.ndarray
    """(M, D) the training tasks (a finite family's tasks outside the test set; bandits: drawn with the split seed)."""
    test_tasks: np.ndarray
    """(K, D) held-out tasks, never in a training history."""
    batch_cls: Any
    batch_kwargs: tuple = ()

    def batch(self, tasks: np.ndarray, seed: int) -> TaskBatch:
        """A `TaskBatch` over `tasks` whose randomness (rewards, start cells) comes from `seed`."""
        return self.batch_cls(tasks, seed, **dict(self.batch_kwargs))

    def tasks(self, split: Literal["train", "test"], n: int, seed: int) -> np.ndarray:
        """`n` tasks of a split: each split task once, in a seeded order, repeated when n exceeds the split."""
        pool = self.train_tasks if split == "train" else self.test_tasks
        order = np.concatenate(
            [np.random.default_rng([seed, k]).permutation(len(pool)) for k in range(-(-n // len(pool)))]
        )
        return pool[order[:n]]


def split_pool(pool: np.ndarray, num_test: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(train, test): a seeded permutation of `pool`, the first `num_test` rows held out."""
    if not 0 < num_test < len(pool):
        raise ValueError(f"num_test must be in [1, {len(pool) - 1}] for a family of {len(pool)} tasks, got {num_test}")
    order = np.random.default_rng(seed).permutation(len(pool))
    return pool[order[num_test:]], pool[order[:num_test]]


@dataclass(frozen=True)
class BanditParams:
    arms: int = 5
    """Number of Bernoulli arms K."""
    num_train: int = 1000
    """Training tasks (arm means drawn uniformly from [0, 1])."""
    num_test: int = 100
    """Held-out tasks (drawn from another stream of the split seed)."""
    split_seed: int = 0
    """Seed of the task draw."""

    def __post_init__(self) -> None:
        if self.arms < 2 or self.num_train < 1 or self.num_test < 1:
            raise ValueError("bandit needs arms >= 2, num_train >= 1 and num_test >= 1")


@FAMILIES.register(
    "bandit",
    params=BanditParams,
    paper=DPT,
    fidelity="reduced",
    departures=(
        "Bernoulli rewards with uniform means; DPT's bandits add Gaussian noise to the arm mean",
        "one pull per episode, observation always 0 (the in-context model sees the pull history only)",
    ),
)
def bandit(params: BanditParams = BanditParams()) -> Family:
    """K-armed Bernoulli bandits, one pull per episode (DPT, Lee et al. 2023, arXiv:2306.14892)."""
    train = np.random.default_rng([params.split_seed, 0]).random((params.num_train, params.arms))
    test = np.random.default_rng([params.split_seed, 1]).random((params.num_test, params.arms))
    return Family("bandit", 1, params.arms, 1, train, test, BanditBatch)


@dataclass(frozen=True)
class DarkRoomParams:
    size: int = 9
    """Side of the square room."""
    horizon: int = 20
    """Steps per episode."""
    num_test: int = 20
    """Goal cells held out (the rest train)."""
    split_seed: int = 0
    """Seed of the goal permutation that makes the split."""

    def __post_init__(self) -> None:
        if self.size < 2 or self.horizon < 1:
            raise ValueError("darkroom needs size >= 2 and horizon >= 1")


@FAMILIES.register(
    "darkroom",
    params=DarkRoomParams,
    paper=AD,
    fidelity="faithful",
    departures=("the held-out goals are a seeded permutation's first num_test cells (20 of 81 by default)",),
)
def darkroom(params: DarkRoomParams = DarkRoomParams()) -> Family:
    """Dark Room: find a hidden goal cell from the centre of a 9 x 9 room (Laskin et al. 2022, arXiv:2210.14215)."""
    s = params.size
    pool = np.stack(np.divmod(np.arange(s * s), s), 1)  # (S*S, 2) every cell
    train, test = split_pool(pool, params.num_test, params.split_seed)
    kw = (("size", s), ("horizon", params.horizon))
    return Family("darkroom", s * s, 5, params.horizon, train, test, DarkRoomBatch, kw)


@dataclass(frozen=True)
class KeyToDoorParams:
    size: int = 9
    """Side of the square room."""
    horizon: int = 50
    """Steps per episode."""
    num_test: int = 100
    """(key, door) pairs held out."""
    split_seed: int = 0
    """Seed of the pair permutation that makes the split."""

    def __post_init__(self) -> None:
        if self.size < 2 or self.horizon < 2:
            raise ValueError("key_to_door needs size >= 2 and horizon >= 2")


@FAMILIES.register(
    "key_to_door",
    params=KeyToDoorParams,
    paper=AD,
    fidelity="faithful",
    departures=(
        "the start cell is drawn per episode; the door pays once per episode and the episode runs on (return <= 2)",
    ),
)
def key_to_door(params: KeyToDoorParams = KeyToDoorParams()) -> Family:
    """Dark Key-to-Door: reach a hidden key, then a hidden door (Laskin et al. 2022, arXiv:2210.14215)."""
    s = params.size
    cells = np.stack(np.divmod(np.arange(s * s), s), 1)
    k, d = np.meshgrid(np.arange(s * s), np.arange(s * s), indexing="ij")
    keep = k != d
    pool = np.concatenate([cells[k[keep]], cells[d[keep]]], 1)  # (S*S*(S*S-1), 4)
    train, test = split_pool(pool, params.num_test, params.split_seed)
    kw = (("size", s), ("horizon", params.horizon))
    return Family("key_to_door", s * s, 5, params.horizon, train, test, KeyToDoorBatch, kw)


def make_family(spec: str) -> Family:
    """The family a spec names, e.g. `darkroom` or `bandit(arms=10)`."""
    return FAMILIES.resolve(spec, key="family")()


def optimal_returns(family: Family, tasks: np.ndarray, seed: int = 0, episodes: int = 1) -> np.ndarray:
    """(N,) mean return of the expert policy on each task over `episodes` episodes (bandits: the best arm's mean)."""
    if family.name == "bandit":
        return tasks.max(1).astype(np.float64)
    batch, total = family.batch(tasks, seed), np.zeros(len(tasks))
    for _ in range(episodes):
        batch.reset()
        for _ in range(family.horizon):
            total += batch.step(batch.expert())[1]
    return total / episodes


def gymnasium():
    """The gymnasium module, or a clear error saying how to install it."""
    from ascent.classic.envs import gymnasium as gym

    return gym()


def _spaces(family: Family) -> tuple[Any, Any]:
    spaces = gymnasium().spaces
    return spaces.Discrete(family.num_obs), spaces.Discrete(family.num_actions)


def make_vec_env(family: Family, tasks: np.ndarray, seed: int = 0) -> Any:
    """A `gymnasium.vector.VectorEnv` stepping `tasks` of `family` (see the module docstring)."""
    gym = gymnasium()

    class InContextVecEnv(gym.vector.VectorEnv):
        metadata = {"autoreset_mode": gym.vector.AutoresetMode.SAME_STEP}

        def __init__(self) -> None:
            self.family, self.batch = family, family.batch(tasks, seed)
            self.num_envs = self.batch.n
            self.single_observation_space, self.single_action_space = _spaces(family)
            self.observation_space = gym.vector.utils.batch_space(self.single_observation_space, self.num_envs)
            self.action_space = gym.vector.utils.batch_space(self.single_action_space, self.num_envs)
            self.t = 0

        def reset(self, *, seed: Optional[int] = None, options: Optional[dict] = None) -> tuple[np.ndarray, dict]:
            if seed is not None:
                self.batch.rng = np.random.default_rng(seed)
            self.t = 0
            return self.batch.reset(), {}

        def step(self, actions: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, dict]:
            obs, reward = self.batch.step(actions)
            self.t += 1
            done = self.t >= self.family.horizon
            info: dict = {}
            if done:
                info["final_obs"], obs, self.t = obs, self.batch.reset(), 0
            trunc = np.full(self.num_envs, done)
            return obs, reward, np.zeros(self.num_envs, dtype=bool), trunc, info

    return InContextVecEnv()


def make_env(family: Family, task: np.ndarray, seed: int = 0) -> Any:
    """A single-task `gymnasium.Env` (episodes truncate after the family's horizon)."""
    gym = gymnasium()

    class InContextEnv(gym.Env):
        def __init__(self) -> None:
            self.family, self.batch = family, family.batch(np.asarray(task)[None], seed)
            self.observation_space, self.action_space = _spaces(family)
            self.t = 0

        def reset(self, *, seed: Optional[int] = None, options: Optional[dict] = None) -> tuple[int, dict]:
            super().reset(seed=seed)
            if seed is not None:
                self.batch.rng = np.random.default_rng(seed)
            self.t = 0
            return int(self.batch.reset()[0]), {}

        def step(self, action: int) -> tuple[int, float, bool, bool, dict]:
            obs, reward = self.batch.step(np.array([action]))
            self.t += 1
            return int(obs[0]), float(reward[0]), False, self.t >= self.family.horizon, {}

    return InContextEnv()
