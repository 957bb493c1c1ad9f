"""Preference-to-reward reductions (Wang, Liu & Jin 2023, "Is RLHF More Difficult than Standard RL? A Theoretical
Perspective", NeurIPS 2023, arXiv:2306.14111), on a tabular episodic MDP whose reward depends on the final state.

The learner only sees preferences: comparing trajectories tau and tau0 returns 1 with probability
sigma((r(tau) - r(tau0)) / kappa) (Bradley-Terry with a known link). The paper's P2R interface (Preference to
Reward, Sec. 3) lets an unmodified reward-based RL algorithm run on top of it: fix a reference trajectory tau0;
when the algorithm asks for the reward of tau,
- if every reward in the confidence set agrees on r(tau) - r(tau0) to within 2 epsilon, answer the estimate and
  ask no human;
- otherwise query m comparisons of tau against tau0, shrink the confidence set, and answer the new estimate.
Rewards are answered only up to the constant r(tau0), which no reward-based algorithm cares about. Since each
answer is epsilon-accurate (on the confidence event), any epsilon-robust RL algorithm keeps its guarantee, and
the number of preference queries depends on the reward class (here: the number of final states) and epsilon, not
on how many episodes the RL algorithm runs.

Here the reward class is tabular in the final state, so the confidence set is a product of intervals: for final
state s, n comparisons against tau0 with win rate p_hat give the Hoeffding interval p_hat +- sqrt(log(2 S / delta)
/ (2 n)) (a union bound over the final states), mapped through the inverse link kappa * logit, which is monotone.
`PREFERENCE_INTERFACES` holds the interface and the naive reduction it is measured against (`per_episode`: one
comparison per episode, its 0/1 outcome handed to the RL algorithm as the reward, T queries for T episodes).
`OptimisticFinalStateRL` is the reward-based RL algorithm both feed (optimistic model-based value iteration).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from ascent import papers
from ascent.registry import Registry
from ascent.typed import ConfigError

PREFERENCE_INTERFACES: Registry = Registry("preference-to-reward interface")
"""`fn(mdp: FinalStateMDP, rng, params) -> interface` with `interface.reward(final_state) -> float` and a
`queries` count of the preference comparisons it asked for."""


@dataclass(frozen=True)
class FinalStateMDP:
    """An episodic tabular MDP: S states, A actions, horizon H, transitions P (S, A, S), start state 0; the return
    of a trajectory is r(s_H), the reward of its final state; preferences follow Bradley-Terry with temperature
    kappa against a reference final state."""

    P: np.ndarray
    """(S, A, S) transition probabilities."""
    r: np.ndarray
    """(S,) reward of each final state, in [0, 1]."""
    horizon: int
    """H, steps per episode."""
    kappa: float = 0.25
    """Bradley-Terry temperature: P(tau > tau0) = sigmoid((r(tau) - r(tau0)) / kappa)."""

    @property
    def states(self) -> int:
        return self.P.shape[0]

    def prefer(self, s: int, s_ref: int, n: int, rng: np.random.Generator) -> int:
        """Wins of final state s over s_ref in n independent comparisons."""
        p = 1.0 / (1.0 + math.exp(-(self.r[s] - self.r[s_ref]) / self.kappa))
        return int(rng.binomial(n, p))

    def rollout(self, policy: np.ndarray, rng: np.random.Generator) -> list[tuple[int, int, int]]:
        """One episode of a deterministic non-stationary policy (H, S) -> [(s, a, s'), ...]."""
        s, path = 0, []
        for h in range(self.horizon):
            a = int(policy[h, s])
            nxt = int(rng.choice(self.states, p=self.P[s, a]))
            path.append((s, a, nxt))
            s = nxt
        return path

    def value(self, policy: np.ndarray) -> float:
        """E[r(s_H)] under the policy (H, S) from state 0."""
        v = self.r.copy()
        for h in reversed(range(self.horizon)):
            v = np.einsum("sn,n->s", self.P[np.arange(self.states), policy[h]], v)
        return float(v[0])

    def optimal_value(self) -> float:
        v = self.r.copy()
        for _ in range(self.horizon):
            v = (self.P @ v).max(1)
        return float(v[0])


def make_mdp(seed: int, states: int = 6, actions: int = 3, horizon: int = 4, kappa: float = 0.25) -> FinalStateMDP:
    """Random Dirichlet(0.3) transitions and final-state rewards uniform in [0, 1]."""
    rng = np.random.default_rng(seed)
    P = rng.dirichlet(0.3 * np.ones(states), size=(states, actions))
    return FinalStateMDP(P, rng.random(states), horizon, kappa)


@dataclass(frozen=True)
class P2RParams:
    """The P2R interface's accuracy and confidence."""

    epsilon: float = 0.1
    """Answers are within epsilon of r(tau) - r(tau0) on the confidence event, > 0."""
    delta: float = 0.05
    """The confidence event fails with probability at most delta, in (0, 1)."""
    batch: int = 32
    """m, comparisons per query round, >= 1."""
    reference: int = 0
    """The reference final state tau0."""

    def __post_init__(self) -> None:
        if self.epsilon <= 0 or not 0 < self.delta < 1 or self.batch < 1:
            raise ConfigError(
                f"p2r: need epsilon > 0, 0 < delta < 1, batch >= 1, got {self.epsilon}, {self.delta}, {self.batch}"
            )


@dataclass
class P2R:
    """The preference-to-reward interface (see the module docstring)."""

    mdp: FinalStateMDP
    rng: np.random.Generator
    p: P2RParams
    wins: np.ndarray = field(init=False)
    n: np.ndarray = field(init=False)
    queries: int = 0

    def __post_init__(self) -> None:
        self.wins = np.zeros(self.mdp.states)
        self.n = np.zeros(self.mdp.states)

    def interval(self, s: int) -> tuple[float, float]:
        """The confidence interval of r(s) - r(s_ref): the Hoeffding interval of the win rate through kappa logit."""
        if s == self.p.reference:
            return 0.0, 0.0
        if self.n[s] == 0:
            return -1.0, 1.0
        half = math.sqrt(math.log(2 * self.mdp.states / self.p.delta) / (2 * self.n[s]))
        rate = self.wins[s] / self.n[s]
        lo, hi = max(rate - half, 1e-9), min(rate + half, 1 - 1e-9)
        k = self.mdp.kappa
        return max(-1.0, k * math.log(lo / (1 - lo))), min(1.0, k * math.log(hi / (1 - hi)))

    def reward(self, s: int) -> float:
        """r(s) - r(s_ref) to within epsilon: asks for comparisons only while the interval is wider than 2 epsilon."""
        lo, hi = self.interval(s)
        while hi - lo > 2 * self.p.epsilon:
            self.wins[s] += self.mdp.prefer(s, self.p.reference, self.p.batch, self.rng)
            self.n[s] += self.p.batch
            self.queries += self.p.batch
            lo, hi = self.interval(s)
        return (lo + hi) / 2


@PREFERENCE_INTERFACES.register(
    "p2r",
    params=P2RParams,
    paper=papers.P2R,
    fidelity="reduced",
    departures=(
        "utility-based preferences only (the paper's first reduction); no von Neumann winner / Markov-game "
        "reduction and no K-wise comparisons",
        "the tabular final-state reward class with a Hoeffding confidence set through the inverse link, in place of "
        "the paper's likelihood-ratio confidence set over a general reward class",
    ),
)
def p2r(mdp: FinalStateMDP, rng: np.random.Generator, params: P2RParams = P2RParams()) -> P2R:
    """P2R (Wang, Liu & Jin 2023, arXiv:2306.14111): answer r(tau) - r(tau0) from the confidence set when it is
    2 epsilon tight, otherwise query m comparisons of tau against tau0 first."""
    return P2R(mdp, rng, params)


@dataclass
class PerEpisode:
    """One comparison against the reference per reward request; its 0/1 outcome is the reward."""

    mdp: FinalStateMDP
    rng: np.random.Generator
    reference: int = 0
    queries: int = 0

    def reward(self, s: int) -> float:
        self.queries += 1
        return float(self.mdp.prefer(s, self.reference, 1, self.rng))


@PREFERENCE_INTERFACES.register("per_episode", paper=None, fidelity="ascent")
def per_episode(mdp: FinalStateMDP, rng: np.random.Generator, params: None = None) -> PerEpisode:
    """The naive reduction: each episode's reward is the outcome of one fresh comparison against the reference
    (an unbiased estimate of sigmoid((r - r0) / kappa), a monotone transform of the reward); T queries."""
    return PerEpisode(mdp, rng)


class TrueReward:
    """The control: reward-based RL on the true reward (no preferences; zero queries)."""

    queries = 0

    def __init__(self, mdp: FinalStateMDP) -> None:
        self.mdp = mdp

    def reward(self, s: int) -> float:
        return float(self.mdp.r[s])


class OptimisticFinalStateRL:
    """A reward-based tabular RL algorithm: empirical transitions with a count bonus c / sqrt(N(s, a)), optimistic
    value 1 for final states whose reward it has not been told, backward induction for a greedy policy; the
    reward of a final state is the running mean of what it was told for it."""

    def __init__(self, mdp: FinalStateMDP, bonus: float = 0.5) -> None:
        S, A = mdp.P.shape[:2]
        self.S, self.A, self.H, self.bonus = S, A, mdp.horizon, bonus
        self.counts = np.zeros((S, A, S))
        self.r_sum, self.r_n = np.zeros(S), np.zeros(S)

    def policy(self) -> np.ndarray:
        n = self.counts.sum(2)  # (S, A)
        P_hat = np.where(n[:, :, None] > 0, self.counts / np.maximum(n, 1)[:, :, None], 1.0 / self.S)
        v = np.where(self.r_n > 0, self.r_sum / np.maximum(self.r_n, 1), 1.0)  # (S,)
        top = v.max()
        pi = np.zeros((self.H, self.S), dtype=int)
        for h in reversed(range(self.H)):
            q = np.minimum(P_hat @ v + self.bonus / np.sqrt(np.maximum(n, 1)), top + self.bonus)  # (S, A)
            pi[h] = q.argmax(1)
            v = q.max(1)
        return pi

    def update(self, path: list[tuple[int, int, int]], final_reward: float) -> None:
        for s, a, nxt in path:
            self.counts[s, a, nxt] += 1
        self.r_sum[path[-1][2]] += final_reward
        self.r_n[path[-1][2]] += 1


def run_reduction(mdp: FinalStateMDP, source, episodes: int, rng: np.random.Generator) -> dict[str, float]:
    """The RL algorithm for `episodes` episodes, each episode's reward from `source` (a reward interface):
    cumulative regret sum_t V* - V^{pi_t}, the final policy's suboptimality and the preference queries."""
    agent, best, regret = OptimisticFinalStateRL(mdp), mdp.optimal_value(), 0.0
    for _ in range(episodes):
        pi = agent.policy()
        regret += best - mdp.value(pi)
        path = mdp.rollout(pi, rng)
        agent.update(path, source.reward(path[-1][2]))
    return {"regret": regret, "final_gap": best - mdp.value(agent.policy()), "queries": float(source.queries)}
