"""Inverse RL in constrained MDPs (Schlaginhaufen & Kamgarpour 2023, "Identifiability and Generalizability in
Constrained Inverse Reinforcement Learning", ICML 2023, arXiv:2306.00629), on a tabular gridworld.

Convex-analytic view: a policy is its normalised discounted occupancy mu (S, A), in the polytope M of Bellman flows
from the start distribution nu. The expert solves the entropy-regularised constrained problem

    mu_E = argmax_{mu in M, <c, mu> <= b} <r, mu> + tau H(mu),   H(mu) = -sum_sa mu(s, a) log pi_mu(a | s).

IRL looks for a reward r under which mu_E is optimal, i.e. it minimises the expert's suboptimality

    L(r) = max_{mu in M, <c, mu> <= b} [<r, mu> + tau H(mu)] - <r, mu_E> - tau H(mu_E)  >= 0,

convex in r, with gradient mu*_r - mu_E (Danskin). The inner constrained problem is solved through its Lagrangian
dual, min_{lambda >= 0} max_mu <r - lambda c, mu> + tau H(mu) + lambda b: soft value iteration for r - lambda c,
and bisection on lambda for <c, mu_lambda> = b (`constrained_soft_optimum`). The paper's points this module lets a
script measure: L(r_hat) -> 0 means the constrained optimum of r_hat matches the expert; r_hat is identified only up
to potential shaping gamma P Phi - Phi and the constraint direction c (the paper: entropy regularisation gives
shaping, constraints add non-identifiability); and a reward learned while ignoring the constraint absorbs
-lambda c, so it transfers badly when the constraint changes.

`IRL_METHODS` holds `constrained` (the paper's setting) and `unconstrained` (the same IRL with the constraint left
out of the forward problem, the baseline): `fn(world, mu_E, params) -> r_hat (S, A)`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from ascent import papers
from ascent.registry import Registry
from ascent.typed import ConfigError

IRL_METHODS: Registry = Registry("irl method")
"""Inverse RL from an expert occupancy: `fn(world: CMDP, mu_expert (S, A), params) -> r_hat (S, A)`."""


@dataclass(frozen=True)
class CMDP:
    """A discounted tabular constrained MDP with entropy regularisation."""

    P: np.ndarray
    """(S, A, S) transitions."""
    nu: np.ndarray
    """(S,) start distribution."""
    cost: np.ndarray
    """(S, A) constraint cost c."""
    budget: float
    """b: the constraint <c, mu> <= b on the normalised occupancy."""
    gamma: float = 0.9
    """Discount."""
    tau: float = 0.1
    """Entropy temperature."""

    def soft_policy(
        self, r: np.ndarray, v: np.ndarray | None = None, tol: float = 1e-9
    ) -> tuple[np.ndarray, np.ndarray]:
        """pi (S, A) and V (S,) of soft value iteration Q = r + gamma P V, V = tau logsumexp(Q / tau), from V = v."""
        v = np.zeros(self.P.shape[0]) if v is None else v
        for _ in range(5000):
            q = r + self.gamma * self.P @ v  # (S, A)
            m = q.max(1)
            v_new = m + self.tau * np.log(np.exp((q - m[:, None]) / self.tau).sum(1))
            done = np.abs(v_new - v).max() < tol
            v = v_new
            if done:
                break
        q = r + self.gamma * self.P @ v
        z = np.exp((q - q.max(1, keepdims=True)) / self.tau)
        return z / z.sum(1, keepdims=True), v

    def occupancy(self, pi: np.ndarray) -> np.ndarray:
        """mu (S, A) = (1 - gamma) d_pi(s) pi(a | s), d_pi = nu^T (I - gamma P_pi)^-1; sums to 1."""
        P_pi = np.einsum("sa,san->sn", pi, self.P)
        d = np.linalg.solve((np.eye(len(self.nu)) - self.gamma * P_pi).T, self.nu)
        return (1 - self.gamma) * d[:, None] * pi

    def soft_optimum(self, r: np.ndarray) -> np.ndarray:
        """The unconstrained regularised optimum's occupancy."""
        return self.occupancy(self.soft_policy(r)[0])

    def constrained_soft_optimum(
        self, r: np.ndarray, budget: float | None = None, lam0: float = 0.0
    ) -> tuple[np.ndarray, float]:
        """The occupancy maximising <r, mu> + tau H(mu) subject to <c, mu> <= budget, and its multiplier lambda:
        lambda = 0 if the unconstrained optimum is feasible, else the root of <c, mu_lambda> = budget (bisection on
        a bracket grown around the warm start lam0, then Illinois regula falsi; <c, mu_lambda> decreases in lambda)."""
        b = self.budget if budget is None else budget
        pi, v = self.soft_policy(r)
        if (self.cost * self.occupancy(pi)).sum() <= b:
            return self.occupancy(pi), 0.0

        def excess(lam: float) -> float:
            nonlocal v
            pi_l, v = self.soft_policy(r - lam * self.cost, v)
            return float((self.cost * self.occupancy(pi_l)).sum()) - b

        step = 0.05 * (1 + lam0)
        lo, hi = max(0.0, lam0 - step), lam0 + step
        f_lo, f_hi = excess(lo), excess(hi)
        while lo > 0 and f_lo < 0:
            hi, f_hi = lo, f_lo
            lo, step = max(0.0, lo - 2 * step), 2 * step
            f_lo = excess(lo)
        while f_hi > 0:
            lo, f_lo = hi, f_hi
            hi, step = hi + 2 * step, 2 * step
            f_hi = excess(hi)
            if hi > 1e6:
                raise ConfigError(f"constraint <c, mu> <= {b} is infeasible for this MDP")
        side = 0
        while hi - lo > 1e-9 * (1 + hi) and abs(f_hi) > 1e-10:  # Illinois regula falsi: f_lo > 0 >= f_hi
            mid = hi - f_hi * (hi - lo) / (f_hi - f_lo)
            f_mid = excess(mid)
            if f_mid > 0:
                lo, f_lo = mid, f_mid
                f_hi = f_hi / 2 if side == -1 else f_hi
                side = -1
            else:
                hi, f_hi = mid, f_mid
                f_lo = f_lo / 2 if side == 1 else f_lo
                side = 1
        pi, _ = self.soft_policy(r - hi * self.cost, v)
        return self.occupancy(pi), hi

    def entropy(self, mu: np.ndarray) -> float:
        pi = mu / np.maximum(mu.sum(1, keepdims=True), 1e-300)
        return float(-(mu * np.log(np.maximum(pi, 1e-300))).sum())

    def suboptimality(self, r: np.ndarray, mu_expert: np.ndarray, constrained: bool = True) -> float:
        """L(r): how much better than the expert the best (constrained) regularised occupancy does under r."""
        mu = self.constrained_soft_optimum(r)[0] if constrained else self.soft_optimum(r)
        value = lambda m: float((r * m).sum()) + self.tau * self.entropy(m)  # noqa: E731
        return value(mu) - value(mu_expert)


def gridworld(size: int = 5, slip: float = 0.1, budget: float = 0.15, gamma: float = 0.9, tau: float = 0.1):
    """A size x size grid, actions right, up, left, down, stay, each move slipping to a uniformly random action with
    probability `slip`; start (0, 0); reward 1 at the goal (size-1, size-1); cost 1 in the risky cells of the
    diagonal band |row - col| <= 1 outside start and goal (the short path), so the constraint trades path length
    for risk. Returns (CMDP, true reward (S, A))."""
    S, A = size * size, 5
    moves = [(0, 1), (-1, 0), (0, -1), (1, 0), (0, 0)]
    P = np.zeros((S, A, S))
    for s in range(S):
        row, col = divmod(s, size)
        for a in range(A):
            for b, (dr, dc) in enumerate(moves):
                prob = (1 - slip) * (a == b) + slip / A
                nr, nc = min(max(row + dr, 0), size - 1), min(max(col + dc, 0), size - 1)
                P[s, a, nr * size + nc] += prob
    nu = np.zeros(S)
    nu[0] = 1.0
    r = np.zeros((S, A))
    r[S - 1] = 1.0
    cost = np.zeros((S, A))
    for s in range(1, S - 1):
        row, col = divmod(s, size)
        if abs(row - col) <= 1:
            cost[s] = 1.0
    return CMDP(P, nu, cost, budget, gamma, tau), r


@dataclass(frozen=True)
class IRLParams:
    """Gradient descent on the expert's suboptimality L(r)."""

    steps: int = 300
    """Adam steps on r, >= 1."""
    lr: float = 0.05
    """Adam's step size on r (per-entry scaling: occupancies of rarely visited pairs are tiny), > 0."""

    def __post_init__(self) -> None:
        if self.steps < 1 or self.lr <= 0:
            raise ConfigError(f"irl: need steps >= 1 and lr > 0, got {self.steps}, {self.lr}")


def _irl(world: CMDP, mu_expert: np.ndarray, params: IRLParams, constrained: bool) -> np.ndarray:
    """Adam on r with the gradient mu*_r - mu_E (the multiplier warm-started from the previous step)."""
    r, m, v, lam = np.zeros_like(mu_expert), np.zeros_like(mu_expert), np.zeros_like(mu_expert), 0.0
    for t in range(1, params.steps + 1):
        if constrained:
            mu, lam = world.constrained_soft_optimum(r, lam0=lam)
        else:
            mu = world.soft_optimum(r)
        g = mu - mu_expert  # dL/dr
        m = 0.9 * m + 0.1 * g
        v = 0.999 * v + 0.001 * g**2
        r = r - params.lr * (m / (1 - 0.9**t)) / (np.sqrt(v / (1 - 0.999**t)) + 1e-8)
    return r


@IRL_METHODS.register(
    "constrained",
    params=IRLParams,
    paper=papers.CONSTRAINED_IRL,
    fidelity="reduced",
    departures=(
        "state-action rewards without a reward class or regulariser on r; Adam on L(r) from r = 0 "
        "(per-entry step sizes) with an exact inner solver (regula falsi on the multiplier)",
        "entropy regularisation only (the paper covers general strictly convex regularisers)",
    ),
)
def constrained(world: CMDP, mu_expert: np.ndarray, params: IRLParams = IRLParams()) -> np.ndarray:
    """Minimise L(r) = max_{mu feasible} [<r, mu> + tau H(mu)] - <r, mu_E> - tau H(mu_E) by Adam on the gradient
    mu*_r - mu_E, mu*_r the constrained regularised optimum (Schlaginhaufen & Kamgarpour 2023, arXiv:2306.00629)."""
    return _irl(world, mu_expert, params, constrained=True)


@IRL_METHODS.register(
    "unconstrained",
    params=IRLParams,
    paper=papers.CONSTRAINED_IRL,
    fidelity="reduced",
    departures=(
        "the baseline the paper contrasts with: the same IRL with the constraint dropped from the forward "
        "problem (maximum-entropy IRL on occupancies)",
    ),
)
def unconstrained(world: CMDP, mu_expert: np.ndarray, params: IRLParams = IRLParams()) -> np.ndarray:
    """The same gradient descent with mu*_r the unconstrained regularised optimum: the learned reward must explain
    the constraint's effect by itself."""
    return _irl(world, mu_expert, params, constrained=False)


def shaping_residual(
    world: CMDP, r_hat: np.ndarray, r_true: np.ndarray, with_cost: bool = True, weights: np.ndarray | None = None
) -> float:
    """||proj_perp(r_hat - r_true)|| / ||r_hat - r_true||: the part of the difference outside the span of potential
    shaping gamma P Phi - Phi (S directions), the constant, and (with_cost) the constraint cost c; in the norm
    weighted by `weights` (S, A) if given (e.g. the expert's state occupancy, where the data pin r down)."""
    S, A = r_true.shape
    basis = [world.gamma * world.P[:, :, k] - np.eye(S)[:, k : k + 1] for k in range(S)]  # (S, A) each
    basis.append(np.ones((S, A)))
    if with_cost:
        basis.append(world.cost)
    w = np.sqrt(np.ones((S, A)) if weights is None else weights).ravel()
    X = np.stack([b.ravel() for b in basis], axis=1) * w[:, None]  # (S A, S + 2)
    diff = (r_hat - r_true).ravel() * w
    coef, *_ = np.linalg.lstsq(X, diff, rcond=None)
    return float(np.linalg.norm(diff - X @ coef) / max(np.linalg.norm(diff), 1e-12))


def sample_occupancy(world: CMDP, pi: np.ndarray, trajectories: int, rng: np.random.Generator, horizon: int = 0):
    """The empirical normalised discounted occupancy (S, A) of `trajectories` rollouts of pi from nu, each truncated
    at `horizon` steps (default: where gamma^t < 1e-3), weights (1 - gamma) gamma^t, renormalised to sum 1: the
    expert data of the finite-sample setting."""
    S, A = pi.shape
    H = horizon or int(np.ceil(np.log(1e-3) / np.log(world.gamma)))
    mu = np.zeros((S, A))
    s = rng.choice(S, size=trajectories, p=world.nu)  # (N,)
    cum_pi, cum_p = pi.cumsum(1), world.P.cumsum(2)
    for t in range(H):
        a = np.minimum((rng.random(trajectories)[:, None] > cum_pi[s]).sum(1), A - 1)  # (N,)
        np.add.at(mu, (s, a), (1 - world.gamma) * world.gamma**t)
        s = np.minimum((rng.random(trajectories)[:, None] > cum_p[s, a]).sum(1), S - 1)
    return mu / mu.sum()


def with_slip(world: CMDP, size: int, slip: float) -> CMDP:
    """The same world with another slip probability (a new transition law)."""
    new, _ = gridworld(size, slip, world.budget, world.gamma, world.tau)
    return replace(world, P=new.P)
