"""Policy-Aware Matrix Completion (PAMC; Shihab, Akter & Sharma 2025, "What Fundamental Structure in Reward
Functions Enables Efficient Sparse-Reward Learning?", arXiv:2509.03790) on a tabular reward matrix.

The reward matrix R (S, A) is (approximately) low rank; the agent sees noisy rewards y = R[s, a] + noise only at
the pairs its behaviour policy visits, (s, a) ~ p = d(s) pi(a | s): policy-dependent, missing-not-at-random
sampling (the policy prefers some actions, so their entries are seen far more often). PAMC
- completes R from the observed entries by inverse-propensity-weighted low-rank fitting: each observation is
  weighted by 1 / p(s, a), so the fit targets the uniform error over entries and not the behaviour policy's
  (`pamc`: a spectral start from the IPW estimate sum_i y_i e_{s_i a_i}^T / (N p), then alternating ridge least
  squares on rank-r factors U V^T with those weights);
- gives distribution-free confidence sets by split conformal prediction: fit on one part of the observations,
  score |y - R_hat| on the other, and take the weighted (1 - alpha) quantile with weights 1 / p (Tibshirani,
  Barber, Candes & Ramdas 2019, arXiv:1904.06019: conformal prediction under covariate shift, here from the
  behaviour distribution p to uniform entries), so the set R_hat[s, a] +- q[s, a] covers a fresh noisy reward at a
  uniformly drawn entry with probability >= 1 - alpha (`conformal_sets`).

The baseline `entry_means` uses no structure: each entry's mean, the global mean where an entry was never seen.
`REWARD_COMPLETERS` holds both: `fn(obs: RewardObservations, params) -> R_hat (S, A)`.
benchmarks/theory_pamc.py measures coverage, set size and the sample efficiency of the greedy policy.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ascent import papers
from ascent.registry import Registry
from ascent.typed import ConfigError

REWARD_COMPLETERS: Registry = Registry("reward completer")
"""Reward-matrix estimators from sparse observations: `fn(obs: RewardObservations, params) -> R_hat (S, A)`."""


@dataclass(frozen=True)
class RewardObservations:
    """Noisy rewards seen at visited pairs and the sampling distribution that chose them."""

    states: np.ndarray
    """(N,) int state of each observation."""
    actions: np.ndarray
    """(N,) int action of each observation."""
    rewards: np.ndarray
    """(N,) float observed reward."""
    propensity: np.ndarray
    """(S, A) probability that one observation lands on (s, a) (the behaviour policy's, known), > 0."""

    def __post_init__(self) -> None:
        n = len(self.states)
        if len(self.actions) != n or len(self.rewards) != n:
            raise ConfigError(
                f"states, actions, rewards must have one length, got {n}, {len(self.actions)}, {len(self.rewards)}"
            )
        if self.propensity.ndim != 2 or (self.propensity <= 0).any():
            raise ConfigError("propensity must be an (S, A) array of positive probabilities")

    @property
    def shape(self) -> tuple[int, int]:
        return self.propensity.shape

    def subset(self, mask: np.ndarray) -> "RewardObservations":
        return RewardObservations(self.states[mask], self.actions[mask], self.rewards[mask], self.propensity)

    def entry_stats(self) -> tuple[np.ndarray, np.ndarray]:
        """Counts n (S, A) and means (S, A) of the observations (0 where unseen)."""
        n = np.zeros(self.shape)
        total = np.zeros(self.shape)
        np.add.at(n, (self.states, self.actions), 1.0)
        np.add.at(total, (self.states, self.actions), self.rewards)
        return n, np.divide(total, n, out=np.zeros(self.shape), where=n > 0)


@dataclass(frozen=True)
class PAMCParams:
    """The IPW low-rank completion of PAMC."""

    rank: int = 2
    """r, the rank of the fitted factors U (S, r) V (A, r), >= 1."""
    ridge: float = 0.1
    """lambda, the ridge penalty on each factor row, > 0."""
    iters: int = 30
    """Alternating least-squares sweeps, >= 1."""
    ipw: bool = True
    """Weight observations by 1 / p(s, a) (PAMC); false fits the behaviour policy's own weighting."""

    def __post_init__(self) -> None:
        if self.rank < 1 or self.iters < 1 or self.ridge <= 0:
            raise ConfigError(
                f"pamc: need rank >= 1, iters >= 1, ridge > 0, got {self.rank}, {self.iters}, {self.ridge}"
            )


@REWARD_COMPLETERS.register(
    "pamc",
    params=PAMCParams,
    paper=papers.PAMC,
    fidelity="reduced",
    departures=(
        "the tabular matrix-completion core only: known behaviour propensities, a rank-r alternating least squares "
        "fit (the paper's guarantees are for nuclear-norm / low-rank + sparse recovery; no sparse outlier part)",
        "no reward-free representation learning from dynamics and no abstention loop inside an RL agent",
    ),
)
def pamc(obs: RewardObservations, params: PAMCParams = PAMCParams()) -> np.ndarray:
    """R_hat = U V^T minimising sum_sa w_sa (ybar_sa - u_s . v_a)^2 + lambda (|U|^2 + |V|^2), w_sa = n_sa / p_sa
    (IPW; n_sa with `ipw=False`), from the rank-r SVD of the IPW estimate sum_i y_i e_{s_i a_i}^T / (N p)."""
    n, ybar = obs.entry_stats()  # (S, A) each
    p = obs.propensity
    w = n / p if params.ipw else n.copy()  # (S, A)
    w = w / max(w[n > 0].mean(), 1e-12)
    ipw = n * ybar / (max(n.sum(), 1.0) * p)  # (S, A) unbiased for R
    u_, s_, vt = np.linalg.svd(ipw, full_matrices=False)
    r = params.rank
    U, V = u_[:, :r] * np.sqrt(s_[:r]), vt[:r].T * np.sqrt(s_[:r])  # (S, r), (A, r)
    eye = params.ridge * np.eye(r)
    for _ in range(params.iters):
        U = _ridge_rows(V, w, ybar, eye)  # (S, r)
        V = _ridge_rows(U, w.T, ybar.T, eye)  # (A, r)
    return U @ V.T


def _ridge_rows(F: np.ndarray, w: np.ndarray, y: np.ndarray, eye: np.ndarray) -> np.ndarray:
    """Row i: argmin_x sum_j w_ij (y_ij - x . F_j)^2 + lambda |x|^2, for F (J, r), w and y (I, J)."""
    gram = np.einsum("ij,jr,jk->irk", w, F, F) + eye  # (I, r, r)
    rhs = (w * y) @ F  # (I, r)
    return np.linalg.solve(gram, rhs[:, :, None])[:, :, 0]


@REWARD_COMPLETERS.register(
    "entry_means",
    paper=None,
    fidelity="ascent",
)
def entry_means(obs: RewardObservations, params: None = None) -> np.ndarray:
    """The no-structure baseline: each entry's mean reward, the mean of all observations where unseen."""
    n, ybar = obs.entry_stats()
    fill = float(obs.rewards.mean()) if len(obs.rewards) else 0.0
    return np.where(n > 0, ybar, fill)


def weighted_quantile(scores: np.ndarray, weights: np.ndarray, test_weight: np.ndarray, alpha: float) -> np.ndarray:
    """The weighted split-conformal quantile (Tibshirani et al. 2019): for each test weight w_t (T,), the smallest
    score q with sum_{i: s_i <= q} w_i / (sum_i w_i + w_t) >= 1 - alpha; +inf where the calibration mass is too
    small. With equal weights this is the usual ceil((n + 1)(1 - alpha))-th smallest score.

    >>> weighted_quantile(np.arange(1.0, 10.0), np.ones(9), np.ones(1), 0.2).tolist()
    [8.0]
    """
    order = np.argsort(scores)
    s, w = scores[order], weights[order]
    cum = np.cumsum(w)  # (n,)
    need = (1 - alpha) * (cum[-1] + test_weight)  # (T,)
    idx = np.searchsorted(cum, need - 1e-12 * cum[-1])  # first i with cum_i >= need
    return np.where(idx < len(s), s[np.minimum(idx, len(s) - 1)], np.inf)


def conformal_sets(
    obs: RewardObservations,
    completer: str = "pamc",
    alpha: float = 0.1,
    calib_fraction: float = 0.3,
    weighted: bool = True,
    seed: int = 0,
) -> tuple[np.ndarray, np.ndarray]:
    """Split conformal sets for every entry: R_hat (S, A) fitted on 1 - calib_fraction of the observations and
    the half-width q (S, A) from the rest, so P(|y - R_hat[s, a]| <= q[s, a]) >= 1 - alpha for a fresh reward y
    at a uniformly drawn entry (with `weighted`: calibration weights 1 / p; without, the behaviour
    distribution's coverage only)."""
    if not 0 < alpha < 1 or not 0 < calib_fraction < 1:
        raise ConfigError(f"need 0 < alpha < 1 and 0 < calib_fraction < 1, got {alpha}, {calib_fraction}")
    rng = np.random.default_rng(seed)
    calib = rng.random(len(obs.states)) < calib_fraction
    r_hat = REWARD_COMPLETERS.resolve(completer)(obs.subset(~calib))
    c = obs.subset(calib)
    scores = np.abs(c.rewards - r_hat[c.states, c.actions])  # (Nc,)
    p = obs.propensity
    if weighted:
        q = weighted_quantile(scores, 1.0 / p[c.states, c.actions], 1.0 / p.ravel(), alpha).reshape(p.shape)
    else:
        q = np.full(p.shape, weighted_quantile(scores, np.ones(len(scores)), np.ones(1), alpha)[0])
    return r_hat, q


# --------------------------------------------------------------------------------------------- the instance


@dataclass(frozen=True)
class LowRankRewardWorld:
    """A tabular reward matrix R = U V^T (S, A) of rank `rank`, Gaussian reward noise, and a behaviour policy
    softmax(beta * R[s]) mixed with `mix` uniform, over a non-uniform state distribution."""

    R: np.ndarray
    """(S, A) the true mean rewards."""
    propensity: np.ndarray
    """(S, A) the sampling distribution d(s) pi(a | s) of one observation."""
    noise: float
    """Standard deviation of the observed reward around R."""

    def observe(self, n: int, rng: np.random.Generator) -> RewardObservations:
        flat = rng.choice(self.R.size, size=n, p=self.propensity.ravel())
        s, a = np.divmod(flat, self.R.shape[1])
        return RewardObservations(s, a, self.R[s, a] + self.noise * rng.standard_normal(n), self.propensity)

    def greedy_regret(self, r_hat: np.ndarray) -> float:
        """Mean over states of max_a R[s] - R[s, argmax_a r_hat[s]]."""
        pick = r_hat.argmax(1)
        return float((self.R.max(1) - self.R[np.arange(len(pick)), pick]).mean())


def make_world(
    seed: int, states: int = 40, actions: int = 12, rank: int = 2, noise: float = 0.1, beta: float = 3.0
) -> LowRankRewardWorld:
    """Random factors, R scaled to unit standard deviation; behaviour softmax(beta R[s]) mixed 90/10 with uniform,
    state weights Dirichlet(1)."""
    rng = np.random.default_rng(seed)
    R = rng.standard_normal((states, rank)) @ rng.standard_normal((rank, actions))
    R = (R - R.mean()) / R.std()
    logits = beta * R
    pi = np.exp(logits - logits.max(1, keepdims=True))
    pi = 0.9 * pi / pi.sum(1, keepdims=True) + 0.1 / actions
    d = rng.dirichlet(np.ones(states))
    return LowRankRewardWorld(R, d[:, None] * pi, noise)
