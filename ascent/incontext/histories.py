"""Learning histories: a source RL algorithm runs on each task from scratch and every step of every episode is
kept, in order, as the data a sequence model distils (Algorithm Distillation, Laskin et al. 2022, arXiv:2210.14215).

A source is registered in `SOURCES` as `fn(batch: TaskBatch, total_steps: int, seed: int, params) -> Source`; the
one loop `collect` steps it on N tasks at once for E episodes and returns a `History`. The sources:

- `ucb`: UCB1 (Auer et al. 2002), Q(a) + c sqrt(ln t / n(a)), untried arms first (bandits).
- `thompson`: Thompson sampling with Beta(1 + successes, 1 + failures) posteriors (bandits).
- `q_learning`: tabular Q-learning (Watkins 1989) on the family's Markov state with an epsilon-greedy behaviour
  policy and optimistic initial values (the grids; AD's own source was A3C, see docs/in_context.md).
- `posterior_sampling`: posterior sampling for RL (Osband, Russo & Van Roy 2013, arXiv:1306.0940) on Dark Room,
  the dynamics known and the goal inferred: near-optimal within ~8 episodes, so a context of a few episodes holds
  its whole improvement (the AD source of `ascent train ad-darkroom`).
- `noisy_expert`: the AD^epsilon demonstrator (Zisman et al. 2023, "Emergence of In-Context Reinforcement
  Learning from Noise Distillation", arXiv:2312.12275): the optimal policy with probability 1 - eps, a uniform
  action with probability eps, eps falling linearly from `eps_start` to `eps_end` over the first `decay` fraction
  of the history's steps (the authors' schedule: from 1 to 1 - max_perf over 90% of the steps). No learning
  happens: the improvement the history shows is injected noise being withdrawn.
- `expert`: the optimal policy only (the "expert distillation" control's data).

Histories are cached on disk as .npz under a key of everything that determines them (`cached_history`).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Protocol

import numpy as np

from ascent.incontext.tasks import AD, DarkRoomBatch, Family, TaskBatch, toward
from ascent.registry import Paper, Registry

AD_EPS = Paper(
    "AD-eps",
    "Zisman et al.",
    2023,
    "Emergence of In-Context Reinforcement Learning from Noise Distillation",
    "arXiv:2312.12275",
)
UCB1 = Paper(
    "UCB1",
    "Auer, Cesa-Bianchi & Fischer",
    2002,
    "Finite-time Analysis of the Multiarmed Bandit Problem (Machine Learning 47)",
    "Machine Learning 47:235-256 (no arXiv id)",
    section="baselines",
)
THOMPSON = Paper(
    "Thompson sampling",
    "Thompson",
    1933,
    "On the Likelihood that One Unknown Probability Exceeds Another in View of the Evidence of Two Samples",
    "Biometrika 25:285-294 (no arXiv id)",
    section="baselines",
)
Q_LEARNING = Paper(
    "Q-learning",
    "Watkins & Dayan",
    1992,
    "Q-learning (Machine Learning 8)",
    "Machine Learning 8:279-292 (no arXiv id)",
    section="baselines",
)

SOURCES: Registry = Registry("in-context source")
"""History sources: name -> factory(batch, total_steps, seed, params) -> Source."""


class Source(Protocol):
    """A learner (or demonstrator) acting on N tasks at once."""

    def act(self, state: np.ndarray, obs: np.ndarray) -> np.ndarray:
        """(N,) actions for Markov states `state` (N,) and observations `obs` (N,)."""
        ...

    def observe(
        self, state: np.ndarray, actions: np.ndarray, rewards: np.ndarray, next_state: np.ndarray, last: bool
    ) -> None:
        """Learn from one step of every task; `last`: the step ends the episode (no bootstrap after it)."""
        ...


@dataclass
class History:
    """Multi-episode histories of one source on N tasks, flat over time (episode e is columns e*H .. e*H+H-1)."""

    family: str
    source: str
    horizon: int
    tasks: np.ndarray
    """(N, D) the task of each row."""
    obs: np.ndarray
    """(N, L) int64 observation at each step (L = episodes * horizon)."""
    actions: np.ndarray
    """(N, L) int64 the source's action."""
    rewards: np.ndarray
    """(N, L) float32 the reward that followed."""

    @property
    def episodes(self) -> int:
        return self.obs.shape[1] // self.horizon

    def episode_returns(self) -> np.ndarray:
        """(N, E) undiscounted return of every episode."""
        return self.rewards.reshape(len(self.rewards), self.episodes, self.horizon).sum(-1)

    def subsample(self, every: int) -> "History":
        """Every `every`-th episode only (AD's subsampled histories: the context then spans more learning)."""
        if every == 1:
            return self
        n, h = len(self.obs), self.horizon

        def pick(x: np.ndarray) -> np.ndarray:
            return x.reshape(n, self.episodes, h)[:, every - 1 :: every].reshape(n, -1)

        return History(self.family, self.source, h, self.tasks, pick(self.obs), pick(self.actions), pick(self.rewards))

    def save(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp.npz")
        meta = json.dumps({"family": self.family, "source": self.source, "horizon": self.horizon})
        np.savez_compressed(tmp, tasks=self.tasks, obs=self.obs, actions=self.actions, rewards=self.rewards, meta=meta)
        tmp.replace(path)

    @classmethod
    def load(cls, path: Path) -> "History":
        with np.load(path) as z:
            meta = json.loads(str(z["meta"]))
            return cls(
                meta["family"], meta["source"], meta["horizon"], z["tasks"], z["obs"], z["actions"], z["rewards"]
            )


def collect(family: Family, tasks: np.ndarray, source_spec: str, episodes: int, seed: int) -> History:
    """Run the source `source_spec` on every task for `episodes` episodes; the whole history of each."""
    piece = SOURCES.resolve(source_spec, key="source")
    batch = family.batch(tasks, seed)
    total = episodes * family.horizon
    src = piece(batch, total, seed)
    n = len(tasks)
    obs_all, act_all = np.zeros((n, total), np.int64), np.zeros((n, total), np.int64)
    rew_all = np.zeros((n, total), np.float32)
    for e in range(episodes):
        obs, state = batch.reset(), batch.state()
        for t in range(family.horizon):
            i = e * family.horizon + t
            actions = src.act(state, obs)
            next_obs, rewards = batch.step(actions)
            next_state = batch.state()
            src.observe(state, actions, rewards, next_state, t == family.horizon - 1)
            obs_all[:, i], act_all[:, i], rew_all[:, i] = obs, actions, rewards
            obs, state = next_obs, next_state
    return History(family.name, piece.spec, family.horizon, np.asarray(tasks), obs_all, act_all, rew_all)


def cached_history(
    family: Family,
    family_spec: str,
    tasks: np.ndarray,
    source_spec: str,
    episodes: int,
    seed: int,
    cache_dir: Optional[Path],
) -> History:
    """`collect`, read from `cache_dir` when the same history was made before (key: family spec, tasks, source spec,
    episodes, seed and HISTORY_VERSION)."""
    if cache_dir is None:
        return collect(family, tasks, source_spec, episodes, seed)
    spec = SOURCES.resolve(source_spec, key="source").spec
    key = hashlib.sha256(
        json.dumps([HISTORY_VERSION, family_spec, spec, episodes, seed, np.asarray(tasks).tolist()]).encode()
    ).hexdigest()[:16]
    path = Path(cache_dir) / f"{family.name}-{spec.split('(')[0]}-{key}.npz"
    if path.exists():
        return History.load(path)
    history = collect(family, tasks, source_spec, episodes, seed)
    history.save(path)
    return history


HISTORY_VERSION = 1
"""Bump when the dynamics or a source change, so cached histories are remade."""


def eps_schedule(step: int, total: int, start: float, end: float, decay: float) -> float:
    """Linear from `start` at step 0 to `end` at step decay * total, then constant."""
    frac = min(1.0, step / max(1.0, decay * total))
    return start + (end - start) * frac


@dataclass(frozen=True)
class UCBParams:
    c: float = 1.0
    """Exploration weight c in Q(a) + c sqrt(ln t / n(a))."""

    def __post_init__(self) -> None:
        if self.c < 0:
            raise ValueError("ucb c must be >= 0")


class UCB:
    def __init__(self, batch: TaskBatch, total_steps: int, seed: int, params: UCBParams) -> None:
        self.c, n, k = params.c, batch.n, batch.num_actions
        self.counts, self.sums, self.t = np.zeros((n, k)), np.zeros((n, k)), 0
        self.rng = np.random.default_rng([seed, 1])

    def act(self, state: np.ndarray, obs: np.ndarray) -> np.ndarray:
        self.t += 1
        with np.errstate(divide="ignore", invalid="ignore"):
            score = self.sums / self.counts + self.c * np.sqrt(np.log(self.t) / self.counts)
        score = np.where(self.counts == 0, np.inf, score) + 1e-9 * self.rng.random(score.shape)  # random tie-break
        return score.argmax(1)

    def observe(self, state, actions, rewards, next_state, last) -> None:
        rows = np.arange(len(actions))
        self.counts[rows, actions] += 1
        self.sums[rows, actions] += rewards


@SOURCES.register("ucb", params=UCBParams, paper=UCB1, fidelity="faithful")
def ucb(batch: TaskBatch, total_steps: int, seed: int, params: UCBParams = UCBParams()) -> UCB:
    """UCB1 (Auer, Cesa-Bianchi and Fischer 2002): argmax mean(a) + c sqrt(ln t / n(a)), untried arms first."""
    return UCB(batch, total_steps, seed, params)


class Thompson:
    def __init__(self, batch: TaskBatch, total_steps: int, seed: int) -> None:
        self.a, self.b = np.ones((batch.n, batch.num_actions)), np.ones((batch.n, batch.num_actions))
        self.rng = np.random.default_rng([seed, 2])

    def act(self, state: np.ndarray, obs: np.ndarray) -> np.ndarray:
        return self.rng.beta(self.a, self.b).argmax(1)

    def observe(self, state, actions, rewards, next_state, last) -> None:
        rows = np.arange(len(actions))
        self.a[rows, actions] += rewards
        self.b[rows, actions] += 1 - rewards


@SOURCES.register("thompson", paper=THOMPSON, fidelity="faithful")
def thompson(batch: TaskBatch, total_steps: int, seed: int) -> Thompson:
    """Thompson sampling (Thompson 1933) with Beta(1 + successes, 1 + failures) posteriors, Bernoulli rewards."""
    return Thompson(batch, total_steps, seed)


@dataclass(frozen=True)
class QLearningParams:
    lr: float = 0.5
    """Step size alpha of Q(s,a) += alpha (r + gamma max Q(s',.) - Q(s,a))."""
    gamma: float = 0.9
    """Discount."""
    q_init: float = 1.0
    """Initial value of every Q(s, a) (optimistic: untried actions look good, which drives exploration)."""
    eps_start: float = 0.1
    """Epsilon of the epsilon-greedy behaviour policy at the first step."""
    eps_end: float = 0.0
    """Epsilon after `decay` of the history."""
    decay: float = 0.5
    """Fraction of the history over which epsilon falls linearly."""

    def __post_init__(self) -> None:
        if not (0 < self.lr <= 1 and 0 <= self.gamma < 1 and 0 <= self.eps_end <= self.eps_start <= 1):
            raise ValueError("q_learning needs 0 < lr <= 1, 0 <= gamma < 1, 0 <= eps_end <= eps_start <= 1")
        if not 0 < self.decay <= 1:
            raise ValueError("q_learning decay must be in (0, 1]")


class QLearning:
    def __init__(self, batch: TaskBatch, total_steps: int, seed: int, params: QLearningParams) -> None:
        self.p, self.total, self.step = params, total_steps, 0
        self.q = np.full((batch.n, batch.num_states, batch.num_actions), params.q_init)  # (N, S, A)
        self.rng = np.random.default_rng([seed, 3])

    def act(self, state: np.ndarray, obs: np.ndarray) -> np.ndarray:
        p = self.p
        eps = eps_schedule(self.step, self.total, p.eps_start, p.eps_end, p.decay)
        self.step += 1
        q = self.q[np.arange(len(state)), state]  # (N, A)
        greedy = (q + 1e-9 * self.rng.random(q.shape)).argmax(1)  # random tie-break
        explore = self.rng.random(len(state)) < eps
        return np.where(explore, self.rng.integers(0, q.shape[1], len(state)), greedy)

    def observe(self, state, actions, rewards, next_state, last) -> None:
        rows = np.arange(len(actions))
        target = rewards + (0.0 if last else self.p.gamma * self.q[rows, next_state].max(1))
        self.q[rows, state, actions] += self.p.lr * (target - self.q[rows, state, actions])


@SOURCES.register(
    "q_learning",
    params=QLearningParams,
    paper=(Q_LEARNING, AD),
    fidelity="reduced",
    departures=(
        "AD's source on the grids is A3C; a tabular learner (optimistic values, decaying eps-greedy) costs seconds",
        "the learner sees the Markov state (Key-to-Door: cell and key/door flags), the distilled model the cell only",
    ),
)
def q_learning(batch: TaskBatch, total_steps: int, seed: int, params: QLearningParams = QLearningParams()) -> QLearning:
    """Tabular Q-learning (Watkins 1989), epsilon-greedy with optimistic initial values, on the Markov state."""
    return QLearning(batch, total_steps, seed, params)


@dataclass(frozen=True)
class NoisyExpertParams:
    eps_start: float = 1.0
    """Probability of a uniform action at the first step."""
    eps_end: float = 0.0
    """Probability of a uniform action after `decay` of the history (AD^epsilon: 1 - max_perf)."""
    decay: float = 0.9
    """Fraction of the history's steps over which eps falls linearly (the authors use 0.9)."""

    def __post_init__(self) -> None:
        if not (0 <= self.eps_end <= self.eps_start <= 1 and 0 < self.decay <= 1):
            raise ValueError("noisy_expert needs 0 <= eps_end <= eps_start <= 1 and 0 < decay <= 1")


class NoisyExpert:
    def __init__(self, batch: TaskBatch, total_steps: int, seed: int, params: NoisyExpertParams) -> None:
        self.batch, self.p, self.total, self.step = batch, params, total_steps, 0
        self.rng = np.random.default_rng([seed, 4])

    def act(self, state: np.ndarray, obs: np.ndarray) -> np.ndarray:
        eps = eps_schedule(self.step, self.total, self.p.eps_start, self.p.eps_end, self.p.decay)
        self.step += 1
        noise = self.rng.random(self.batch.n) < eps
        return np.where(noise, self.rng.integers(0, self.batch.num_actions, self.batch.n), self.batch.expert())

    def observe(self, state, actions, rewards, next_state, last) -> None:
        pass


@SOURCES.register(
    "noisy_expert",
    params=NoisyExpertParams,
    paper=AD_EPS,
    fidelity="faithful",
    departures=("eps falls per step over a fraction of the whole history, as in the authors' code (decay=0.9)",),
)
def noisy_expert(
    batch: TaskBatch, total_steps: int, seed: int, params: NoisyExpertParams = NoisyExpertParams()
) -> NoisyExpert:
    """AD^epsilon's demonstrator (Zisman et al. 2023, arXiv:2312.12275): optimal actions with eps-greedy noise,
    eps decaying linearly over the history."""
    return NoisyExpert(batch, total_steps, seed, params)


@SOURCES.register(
    "expert",
    paper=AD,
    fidelity="faithful",
    departures=("the optimal policy is computed from the task (rows first, then columns), not a trained agent",),
)
def expert(batch: TaskBatch, total_steps: int, seed: int) -> NoisyExpert:
    """The optimal policy (expert distillation's data: no exploration, no improvement in the history)."""
    return NoisyExpert(batch, total_steps, seed, NoisyExpertParams(eps_start=0.0, eps_end=0.0))


PSRL = Paper(
    "PSRL",
    "Osband, Russo & Van Roy",
    2013,
    "(More) Efficient Reinforcement Learning via Posterior Sampling",
    "arXiv:1306.0940",
    section="baselines",
)


@dataclass(frozen=True)
class PosteriorSamplingParams:
    resample: bool = True
    """Draw a new goal hypothesis as soon as the current one is refuted (reached without reward) instead of at
    the next episode only (the paper's per-episode sample: the agent then idles on the refuted cell)."""


class PosteriorSampling:
    """Posterior sampling on Dark Room with the dynamics known and the goal cell unknown: the posterior over the goal
    is uniform over the cells not yet seen without reward (one rewarded step pins it); each episode draws a goal from
    it and walks there (rows first, the expert's path), which is the optimal policy of the sampled task."""

    def __init__(self, batch: TaskBatch, total_steps: int, seed: int, params: PosteriorSamplingParams) -> None:
        if not isinstance(batch, DarkRoomBatch):
            raise ValueError(f"posterior_sampling is defined for darkroom only, not {type(batch).__name__}")
        self.batch, self.p = batch, params
        self.rng = np.random.default_rng([seed, 5])
        self.candidate = np.ones((batch.n, batch.num_obs), dtype=bool)  # goal still possible at cell
        self.found = np.full(batch.n, -1)  # the rewarded cell, -1 while unknown
        self.target = np.zeros(batch.n, dtype=np.int64)
        self.t = 0

    def draw(self, rows: np.ndarray) -> None:
        for i in rows:
            cells = np.flatnonzero(self.candidate[i])
            self.target[i] = self.found[i] if self.found[i] >= 0 else self.rng.choice(cells)

    def act(self, state: np.ndarray, obs: np.ndarray) -> np.ndarray:
        n, size = self.batch.n, self.batch.size
        if self.t % self.batch.horizon == 0:
            self.draw(np.arange(n))  # a new sample every episode
        elif self.p.resample:
            self.draw(np.flatnonzero(~self.candidate[np.arange(n), self.target]))
        self.t += 1
        target = np.stack(np.divmod(self.target, size), 1)
        return toward(self.batch.pos, target)

    def observe(self, state, actions, rewards, next_state, last) -> None:
        rows = np.arange(len(actions))
        hit = rewards > 0
        self.candidate[rows[~hit], next_state[~hit]] = False
        self.found[hit] = next_state[hit]


@SOURCES.register(
    "posterior_sampling",
    params=PosteriorSamplingParams,
    paper=(PSRL, AD),
    fidelity="reduced",
    departures=(
        "the transition dynamics are given (the grid moves) and only the goal cell is inferred: the posterior over "
        "the goal is exact (uniform over cells not yet seen unrewarded), not a Dirichlet/Normal model of an MDP",
        "resample=True draws a new goal as soon as the sampled one is refuted, not only at the next episode",
        "Dark Room only; AD's source was A3C: this learner finds the goal within a few episodes, so a short "
        "context holds its whole improvement",
    ),
)
def posterior_sampling(
    batch: TaskBatch, total_steps: int, seed: int, params: PosteriorSamplingParams = PosteriorSamplingParams()
) -> PosteriorSampling:
    """Posterior sampling for RL (Osband, Russo & Van Roy 2013, arXiv:1306.0940) on Dark Room: sample a goal cell
    from the posterior each episode, walk to it; the posterior excludes every cell visited without reward."""
    return PosteriorSampling(batch, total_steps, seed, params)


def source_summary(history: History, optimal: np.ndarray, first: int = 5, last: int = 5) -> dict:
    """Mean return over the first and last episodes of the histories, and the optimal return, for logs."""
    ret = history.episode_returns()
    return {
        "source": history.source,
        "episodes": history.episodes,
        "return_first": float(ret[:, :first].mean()),
        "return_last": float(ret[:, -last:].mean()),
        "return_optimal": float(np.mean(optimal)),
    }
