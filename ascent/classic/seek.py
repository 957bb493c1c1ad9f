"""Irrelevant state features and SEEK, the sequential-knockoff selection of a minimal sufficient state.

`distractors(n, kind)` appends n features that neither the reward nor the dynamics depend on: i.i.d. noise
z_t ~ N(0, scale^2), or an autocorrelated process z_{t+1} = rho z_t + sqrt(1 - rho^2) scale eps_t (stationary,
z_0 ~ N(0, scale^2)) that looks like a slowly varying measurement.

`seek(...)` (Ma, Zhu, Cai, Qi, Chen, Shi & Laber 2023, "Sequential Knockoffs for Variable Selection in
Reinforcement Learning", arXiv:2303.14281) keeps only the state variables SEEK selects. A minimal sufficient state
is the sub-vector under which the process stays an MDP with the same reward; SEEK finds it sequentially:

    1. responses Y = {r, terminated} (those that vary); selected G = {}
    2. for each response y in Y not yet used: model-X knockoffs of the state S (n x p) against y, conditioning on
       the action A; G_y = {j : W_j >= T}; every newly selected j adds the response s'_j (its next value) to Y
    3. stop when no response is left; keep the state variables G (sorted)

Model-X Gaussian knockoffs (Candes, Fan, Janson & Lv 2018, JRSS-B 80(3)): with mu, Sigma the mean and covariance of
S and the equicorrelated D = diag(s sigma_j^2), s = min(1, 2 lambda_min(corr(S))),

    S~ = S - (S - mu) Sigma^-1 D + Z C^T,   C C^T = 2 D - D Sigma^-1 D,   Z ~ N(0, I)

the statistic fits y by the lasso (lam = sqrt(2 log(m) / n), the universal threshold for a standardised response)
on the standardised basis [S, S^2, S~, S~^2, A] (m columns; squares: termination in control tasks depends on |x|,
which no linear term sees) and sets W_j = sum_b |beta_jb| - |beta~_jb|; the
threshold at target FDR q (knockoff+ with offset 1, the original knockoff filter with offset 0):

    T = min{ t in {|W_j| > 0} : (offset + #{j : W_j <= -t}) / max(1, #{j : W_j >= t}) <= q }.

Knockoff+ selects nothing from a response with fewer than 1/q relevant variables (termination in CartPole depends
on two), so the default is offset 0; each response's selection is derandomised over 5 knockoff draws (a variable
counts when at least half select it; in the spirit of Ren, Wei & Candes 2023, "Derandomizing knockoffs", JASA,
arXiv:2012.02717). Simplifications against the paper: one data set (no data splitting), the action a covariate of
every fit rather than action-wise knockoffs, a lasso on a quadratic basis rather than their nonlinear learners.

The transitions come from a uniform random policy on the wrapped environment itself, before the run's first
seeded reset, so SEEK finds what that behaviour's data can show: in CartPole every random episode ends by the
pole, never by |x| > 2.4, so the cart's position and velocity are dropped with the distractors. The selection
depends only on the parameters and the environment (cached per process), so every training and evaluation
environment and a resumed run keep the same variables.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from ascent import papers
from ascent.classic.wrappers import CLASSIC_WRAPPERS
from ascent.typed import ConfigError

# -- distractors ----------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class DistractorsParams:
    """Irrelevant features appended to the observation."""

    n: int = 20
    """How many features to append (>= 1)."""
    kind: Literal["noise", "ar1"] = "noise"
    """noise: i.i.d. N(0, scale^2) every step; ar1: z' = rho z + sqrt(1 - rho^2) scale eps (stationary)."""
    rho: float = 0.95
    """Autocorrelation of the ar1 process, in [0, 1)."""
    scale: float = 1.0
    """Standard deviation of every feature (> 0)."""

    def __post_init__(self) -> None:
        if self.n < 1:
            raise ConfigError(f"distractors: n must be >= 1, got {self.n}")
        if not 0.0 <= self.rho < 1.0:
            raise ConfigError(f"distractors: rho must be in [0, 1), got {self.rho}")
        if not self.scale > 0:
            raise ConfigError(f"distractors: scale must be > 0, got {self.scale}")


def _distractors_class():
    if "Distractors" in globals():
        return globals()["Distractors"]
    import gymnasium as gym

    class Distractors(gym.Wrapper):
        """Append `n` irrelevant features (noise or an AR(1) process) to a flat Box observation."""

        def __init__(self, env: Any, params: DistractorsParams) -> None:
            super().__init__(env)
            self.params = params
            self.cache_key = params
            space = env.observation_space
            if not isinstance(space, gym.spaces.Box) or len(space.shape) != 1:
                raise ValueError(f"distractors need a flat Box observation space, got {space}")
            inf = np.full(params.n, np.inf)
            self.observation_space = gym.spaces.Box(
                np.concatenate([space.low, -inf]).astype(space.dtype),
                np.concatenate([space.high, inf]).astype(space.dtype),
                dtype=space.dtype,
            )
            self.rng = np.random.default_rng(0)
            self.z = np.zeros(params.n)  # (n,)

        def _next(self, first: bool) -> np.ndarray:
            p, eps = self.params, self.rng.standard_normal(self.params.n)  # (n,)
            if p.kind == "noise" or first:
                self.z = p.scale * eps
            else:
                self.z = p.rho * self.z + np.sqrt(1.0 - p.rho**2) * p.scale * eps
            return self.z

        def _observe(self, obs: np.ndarray, first: bool) -> np.ndarray:
            return np.concatenate([obs, self._next(first)]).astype(self.observation_space.dtype)

        def reset(self, *, seed: int | None = None, options: dict | None = None):
            if seed is not None:
                self.rng = np.random.default_rng([seed, 0x5EE7])
            obs, info = self.env.reset(seed=seed, options=options)
            return self._observe(obs, first=True), info

        def step(self, action: Any):
            obs, reward, terminated, truncated, info = self.env.step(action)
            return self._observe(obs, first=False), reward, terminated, truncated, info

        def wrapper_state(self) -> dict:
            return {"rng": self.rng.bit_generator.state, "z": self.z.copy()}

        def load_wrapper_state(self, state: dict) -> None:
            self.rng.bit_generator.state = state["rng"]
            self.z = state["z"].copy()

    Distractors.__qualname__ = "Distractors"  # a module-level name: checkpoints pickle the environment
    globals()["Distractors"] = Distractors
    return Distractors


@CLASSIC_WRAPPERS.register("distractors", params=DistractorsParams, paper=papers.SEEK, fidelity="ascent")
def distractors(env: Any, training: bool, params: DistractorsParams) -> Any:
    """Append n irrelevant features: z_t ~ N(0, scale^2) i.i.d. (noise) or z_{t+1} = rho z_t + sqrt(1-rho^2)
    scale eps (ar1); what SEEK (Ma et al. 2023, arXiv:2303.14281) should drop."""
    return _distractors_class()(env, params)


# -- knockoffs ------------------------------------------------------------------------------------------------------


def gaussian_knockoffs(X: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """(n, p) model-X Gaussian knockoffs of the rows of X (equicorrelated, mean and covariance estimated)."""
    n, p = X.shape
    mu = X.mean(0)  # (p,)
    sigma = np.cov(X, rowvar=False).reshape(p, p) + 1e-6 * np.eye(p)  # (p, p)
    sd = np.sqrt(np.diag(sigma))  # (p,)
    corr = sigma / np.outer(sd, sd)
    s = min(1.0, 2.0 * float(np.linalg.eigvalsh(corr).min())) * 0.999
    D = np.diag(s * sd**2)  # (p, p)
    inv_D = np.linalg.solve(sigma, D)  # Sigma^-1 D, (p, p)
    cov = 2.0 * D - D @ inv_D  # (p, p) conditional covariance of the knockoffs
    w, V = np.linalg.eigh((cov + cov.T) / 2.0)
    C = V * np.sqrt(np.clip(w, 0.0, None))  # (p, p), C C^T = cov
    return X - (X - mu) @ inv_D + rng.standard_normal((n, p)) @ C.T


def _standardise(M: np.ndarray) -> np.ndarray:
    sd = M.std(0)
    return (M - M.mean(0)) / np.where(sd > 0, sd, 1.0)


def _design(X: np.ndarray, Xk: np.ndarray, covariates: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    """The standardised basis F = [X, X^2, Xk, Xk^2, covariates] (n, m = 4p + c) and its Gram matrix F^T F / n."""
    parts = [X, X**2, Xk, Xk**2] + ([covariates] if covariates is not None and covariates.size else [])
    F = _standardise(np.concatenate(parts, axis=1))  # (n, m)
    return F, F.T @ F / len(F)


def lasso_gram(gram: np.ndarray, corr: np.ndarray, lam: float, iters: int = 2000, tol: float = 1e-6) -> np.ndarray:
    """(m,) argmin_b 1/2 b^T G b - c^T b + lam |b|_1 (the lasso 1/2n |t - F b|^2 + lam |b|_1 with G = F^T F / n,
    c = F^T t / n) by FISTA (Beck & Teboulle 2009): proximal gradient steps 1/L, L the largest eigenvalue of G."""
    step = 1.0 / float(np.linalg.eigvalsh(gram)[-1])
    beta = np.zeros(len(corr))
    z, momentum = beta, 1.0
    for _ in range(iters):
        g = z - step * (gram @ z - corr)
        new = np.sign(g) * np.maximum(np.abs(g) - step * lam, 0.0)  # soft threshold
        nxt = (1.0 + np.sqrt(1.0 + 4.0 * momentum**2)) / 2.0
        z = new + (momentum - 1.0) / nxt * (new - beta)
        done = np.max(np.abs(new - beta)) < tol
        beta, momentum = new, nxt
        if done:
            break
    return beta


def _statistic(design: tuple[np.ndarray, np.ndarray], y: np.ndarray, p: int) -> np.ndarray:
    F, gram = design
    t = _standardise(y.reshape(-1, 1)).ravel()  # (n,)
    lam = np.sqrt(2.0 * np.log(F.shape[1]) / len(F))  # the universal threshold for a unit-variance response
    beta = lasso_gram(gram, F.T @ t / len(F), lam)  # (m,)
    b = np.abs(beta[: 4 * p]).reshape(4, p)  # rows: x, x^2, x~, x~^2
    return b[0] + b[1] - b[2] - b[3]


def knockoff_statistic(X: np.ndarray, Xk: np.ndarray, y: np.ndarray, covariates: np.ndarray | None = None):
    """(p,) W_j = sum over the basis (x, x^2) of |beta_j| - |beta~_j|: the lasso of standardised y on the
    standardised [X, X^2, Xk, Xk^2, covariates] at lam = sqrt(2 log(m) / n) (nulls mostly exactly 0)."""
    return _statistic(_design(X, Xk, covariates), y, X.shape[1])


def knockoff_threshold(W: np.ndarray, q: float, offset: int = 1) -> float:
    """The knockoff(+) threshold: the smallest t among the |W_j| > 0 with (offset + #{W <= -t}) /
    max(1, #{W >= t}) <= q; infinity when none qualifies (nothing selected)."""
    for t in np.sort(np.abs(W[W != 0])):
        if (offset + np.sum(W <= -t)) / max(1, np.sum(W >= t)) <= q:
            return float(t)
    return float("inf")


def knockoff_select(X, y, q, offset, rng, covariates=None) -> list[int]:
    """Indices j of X's columns with W_j >= T (fresh knockoffs from `rng`)."""
    W = knockoff_statistic(X, gaussian_knockoffs(X, rng), y, covariates)
    return [int(j) for j in np.flatnonzero(W >= knockoff_threshold(W, q, offset))]


def seek_select(S, A, R, S_next, done, q: float = 0.1, offset: int = 0, seed: int = 0, draws: int = 5):
    """SEEK's sequential selection on transitions (S (n, p), A (n, a), R (n,), S_next (n, p), done (n,)): the
    variables that predict the reward or termination, then those that predict the next value of any variable
    already selected, until nothing new; sorted indices. Each response's selection is derandomised over `draws`
    knockoff copies (drawn once, shared by the responses): a variable is selected when at least half select it."""
    rng = np.random.default_rng(seed)
    X = S.astype(np.float64)
    designs = [_design(X, gaussian_knockoffs(X, rng), A) for _ in range(draws)]  # shared by every response
    responses = [y for y in (R, done.astype(np.float64)) if np.std(y) > 0]
    selected: set[int] = set()
    while responses:
        y = responses.pop(0)
        votes = np.zeros(X.shape[1])  # (p,)
        for design in designs:
            W = _statistic(design, y, X.shape[1])
            votes += W >= knockoff_threshold(W, q, offset)
        new = set(np.flatnonzero(votes >= draws / 2).tolist()) - selected
        selected |= new
        responses += [S_next[:, j] for j in sorted(new) if np.std(S_next[:, j]) > 0]
    return sorted(int(j) for j in selected)


# -- the seek wrapper -----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SeekParams:
    """SEEK's selection on random-policy transitions, or a given list of variables to keep."""

    samples: int = 4000
    """Random-policy transitions to collect (>= 200)."""
    q: float = 0.1
    """Target false discovery rate of each knockoff round, in (0, 1)."""
    offset: int = 0
    """1: knockoff+ (FDR control); 0: the knockoff filter (modified FDR; selects from rounds with < 1/q
    relevant variables)."""
    seed: int = 0
    """Seed of the random policy, the environment resets and the knockoffs (>= 0)."""
    keep: list[int] = field(default_factory=list)
    """Keep exactly these observation indices (no selection run); empty: run SEEK."""

    def __post_init__(self) -> None:
        if self.samples < 200:
            raise ConfigError(f"seek: samples must be >= 200, got {self.samples}")
        if not 0.0 < self.q < 1.0:
            raise ConfigError(f"seek: q must be in (0, 1), got {self.q}")
        if self.offset not in (0, 1):
            raise ConfigError(f"seek: offset must be 0 (knockoff) or 1 (knockoff+), got {self.offset}")
        if self.seed < 0 or any(k < 0 for k in self.keep) or len(set(self.keep)) != len(self.keep):
            raise ConfigError(f"seek: seed and keep must be >= 0, keep without repeats; got {self.seed}, {self.keep}")


def collect(env: Any, samples: int, seed: int) -> tuple[np.ndarray, ...]:
    """`samples` uniform-random-policy transitions of `env`: S, A (one-hot or values), R, S', terminated."""
    rng, space = np.random.default_rng(seed), env.action_space
    discrete = hasattr(space, "n")
    S, A, R, S2, D = [], [], [], [], []
    obs, _ = env.reset(seed=seed)
    episode = 0
    while len(S) < samples:
        a = int(rng.integers(space.n)) if discrete else rng.uniform(space.low, space.high).astype(space.dtype)
        nxt, r, term, trunc, _ = env.step(a)
        S.append(obs), A.append(np.eye(space.n)[a] if discrete else a), R.append(r), S2.append(nxt), D.append(term)
        obs = nxt
        if term or trunc:
            episode += 1
            obs, _ = env.reset(seed=seed + episode)
    return tuple(np.asarray(v, np.float64) for v in (S, A, R, S2, D))


def _chain_key(env: Any) -> tuple:
    chain, e = [], env
    while e is not None:
        chain.append((type(e).__name__, getattr(e, "cache_key", None)))
        e = getattr(e, "env", None)
    spec = getattr(env, "spec", None)
    return (getattr(spec, "id", None), tuple(chain))


_SELECTIONS: dict[tuple, list[int]] = {}
"""(params, environment chain) -> kept indices: one selection per process for all of a run's environments."""


def seek_indices(env: Any, params: SeekParams) -> list[int]:
    """The indices SEEK keeps for `env` (or `params.keep`); all of them, with a warning, when it selects none."""
    dim = int(env.observation_space.shape[0])
    if params.keep:
        if max(params.keep) >= dim:
            raise ValueError(f"seek: keep indices must be < the observation size {dim}, got {params.keep}")
        return sorted(params.keep)
    key = (repr(params), _chain_key(env))
    if key not in _SELECTIONS:
        S, A, R, S2, D = collect(env, params.samples, params.seed)
        kept = seek_select(S, A, R, S2, D, params.q, params.offset, params.seed)
        if not kept:
            warnings.warn(f"seek selected no variable (q={params.q}); keeping all {dim}", stacklevel=2)
            kept = list(range(dim))
        _SELECTIONS[key] = kept
    return list(_SELECTIONS[key])


def _select_class():
    if "SelectFeatures" in globals():
        return globals()["SelectFeatures"]
    import gymnasium as gym

    class SelectFeatures(gym.ObservationWrapper):
        """Keep the observation entries `kept` (sorted)."""

        def __init__(self, env: Any, kept: list[int]) -> None:
            super().__init__(env)
            self.kept = np.asarray(kept, np.int64)  # (k,)
            space = env.observation_space
            self.observation_space = gym.spaces.Box(space.low[self.kept], space.high[self.kept], dtype=space.dtype)

        def observation(self, obs: np.ndarray) -> np.ndarray:
            return obs[self.kept]

    SelectFeatures.__qualname__ = "SelectFeatures"  # a module-level name: checkpoints pickle the environment
    globals()["SelectFeatures"] = SelectFeatures
    return SelectFeatures


@CLASSIC_WRAPPERS.register(
    "seek",
    params=SeekParams,
    paper=(papers.SEEK, papers.MODEL_X_KNOCKOFFS, papers.DERANDOMIZED_KNOCKOFFS),
    fidelity="reduced",
    departures=(
        (
            "no data splitting; the action enters as a covariate, not through action-wise knockoffs; lasso on a "
            "quadratic basis"
        ),
        (
            "the knockoff (not knockoff+) threshold by default; termination is added as a response; a majority vote "
            "over 5 knockoff draws"
        ),
    ),
)
def seek(env: Any, training: bool, params: SeekParams) -> Any:
    """SEEK (Ma et al. 2023, arXiv:2303.14281): keep the state variables selected by sequential model-X knockoffs
    (reward / termination first, then the next values of the selected), W_j = |b_j| - |b~_j|, knockoff threshold
    at FDR q; or exactly `keep`."""
    return _select_class()(env, seek_indices(env, params))


def __getattr__(name: str) -> Any:
    """The wrapper classes, built on first use (gymnasium stays an optional import), e.g. when unpickling."""
    builders = {"Distractors": _distractors_class, "SelectFeatures": _select_class}
    if name in builders:
        return builders[name]()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "DistractorsParams",
    "SeekParams",
    "collect",
    "distractors",
    "gaussian_knockoffs",
    "knockoff_select",
    "knockoff_statistic",
    "knockoff_threshold",
    "seek",
    "seek_indices",
    "seek_select",
]
