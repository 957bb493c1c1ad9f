"""HDPO: hindsight differentiable policy optimization for inventory control (Alvo, Russo, Kanoria & Lee 2023,
"Deep reinforcement learning for inventory networks: toward reliable policy optimization" / "Neural inventory
control in networks via hindsight differentiable policy optimization", arXiv:2306.11246; the authors' code,
github.com/MatiasAlvo/Neural_inventory_control).

The problem (`InventoryProblem`): K stores, each with lost sales, a lead time of L periods, holding cost h_k per
unit left at the end of a period and lost-sales penalty p_k per unit of unmet demand; demand d_{t,k} is drawn
from a per-store normal clipped at 0. Each period: the order placed L periods ago arrives, demand is served from
stock (sales = min(stock, demand), the rest is lost), costs are charged, and a new order q_{t,k} >= 0 is placed.

`simulate` runs a policy on a batch of demand paths as tensor operations only (min via `torch.minimum`, the
pipeline a shifted tensor), so the total cost is differentiable in the policy's parameters (`InventoryEnv` steps
the same dynamics in Gymnasium's API). HDPO (`hdpo`) samples demand paths, simulates them and descends the
pathwise gradient of the mean cost; the baselines, the ones the paper itself uses, are REINFORCE (`reinforce`:
a Gaussian policy around the same network's order, score-function gradient with a batch-mean baseline, the same
demand paths and Adam steps) and the best base-stock policy
(`base_stock`: order up to S_k - inventory position, S_k grid-searched per store on the training paths).

The policy network (`StorePolicy`) is the paper's symmetry-aware idea on a star graph: one small network shared by
every store (weight duplication across sibling locations) over the store's own state (stock, pipeline, h, p, mean
demand), plus one round of message passing (the mean of every store's embedding, the network's state summary).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from ascent import papers
from ascent.registry import Registry
from ascent.typed import ConfigError

INVENTORY_METHODS: Registry = Registry("inventory method")
"""Inventory policy optimisers: `fn(problem, seed, params) -> policy`, a policy maps (stock (B, K), pipeline
(B, K, L)) to orders (B, K) >= 0."""

Policy = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


@dataclass(frozen=True)
class InventoryProblem:
    """K lost-sales stores with lead time L (module docstring)."""

    mean: torch.Tensor
    """(K,) mean demand per period."""
    std: torch.Tensor
    """(K,) demand standard deviation (before clipping at 0)."""
    holding: torch.Tensor
    """(K,) holding cost per unit per period, > 0."""
    penalty: torch.Tensor
    """(K,) lost-sales penalty per unit, > 0."""
    lead: int = 2
    """Lead time L >= 1 (an order placed now arrives L periods later)."""
    horizon: int = 40
    """Periods per simulated path."""
    warmup: int = 10
    """Periods at the start whose cost is not counted (the start state's transient)."""

    def __post_init__(self) -> None:
        K = self.mean.shape[0]
        for name in ("std", "holding", "penalty"):
            if tuple(getattr(self, name).shape) != (K,):
                raise ConfigError(f"InventoryProblem.{name} must be ({K},), got {tuple(getattr(self, name).shape)}")
        if (self.holding <= 0).any() or (self.penalty <= 0).any() or (self.mean < 0).any() or (self.std < 0).any():
            raise ConfigError("holding and penalty costs must be > 0, demand mean and std >= 0")
        if self.lead < 1 or self.horizon <= self.warmup or self.warmup < 0:
            raise ConfigError(
                f"need lead >= 1 and 0 <= warmup < horizon, got {self.lead}, {self.warmup}, {self.horizon}"
            )

    @property
    def stores(self) -> int:
        return self.mean.shape[0]

    def demand(self, paths: int, g: torch.Generator) -> torch.Tensor:
        """(paths, horizon, K) demand, normal clipped at 0."""
        z = torch.randn(paths, self.horizon, self.stores, generator=g)
        return (self.mean + self.std * z).clamp_min(0)


def make_problem(seed: int, stores: int = 4, lead: int = 2) -> InventoryProblem:
    """Random stores: mean demand in [2, 8], std 30-60% of the mean, holding 1, penalty in [4, 19]."""
    g = torch.Generator().manual_seed(seed)
    mean = 2 + 6 * torch.rand(stores, generator=g)
    std = mean * (0.3 + 0.3 * torch.rand(stores, generator=g))
    penalty = 4 + 15 * torch.rand(stores, generator=g)
    return InventoryProblem(mean, std, torch.ones(stores), penalty, lead)


def simulate(problem: InventoryProblem, policy: Policy, demand: torch.Tensor, record: bool = False):
    """Mean cost per period and store after the warm-up, (B,), differentiable in the policy's orders.

    demand (B, T, K). With `record`, also returns the orders (B, T, K) the policy placed."""
    B, T, K = demand.shape
    stock = problem.mean.expand(B, K).clone()  # (B, K) start: one period of mean demand on hand
    pipeline = problem.mean.expand(B, K).unsqueeze(-1).repeat(1, 1, problem.lead)  # (B, K, L)
    total, orders = torch.zeros(B), []
    for t in range(T):
        q = policy(stock, pipeline)  # (B, K) >= 0, decided before the arrival (it sees the pipeline)
        orders.append(q)
        stock = stock + pipeline[:, :, 0]
        sales = torch.minimum(stock, demand[:, t])
        lost = demand[:, t] - sales
        stock = stock - sales
        if t >= problem.warmup:
            total = total + (problem.holding * stock + problem.penalty * lost).sum(-1)
        pipeline = torch.cat([pipeline[:, :, 1:], q.unsqueeze(-1)], dim=-1)
    cost = total / ((T - problem.warmup) * K)
    return (cost, torch.stack(orders, 1)) if record else cost


class InventoryEnv(gym.Env):
    """The same dynamics one period at a time (Gymnasium API), for agents that interact instead of differentiating:
    observation [stock (K), pipeline (K * L)], action the orders (K,) >= 0, reward minus the period's cost summed
    over stores (0 during the warm-up); the episode is truncated after `horizon` periods. `options={"demand": d}`
    (horizon, K) replays a given demand path (then the return equals -simulate(...) * (horizon - warmup) * K)."""

    def __init__(self, problem: InventoryProblem) -> None:
        self.problem = problem
        K, L = problem.stores, problem.lead
        self.observation_space = gym.spaces.Box(0.0, np.inf, (K * (1 + L),), np.float32)
        self.action_space = gym.spaces.Box(0.0, np.inf, (K,), np.float32)

    def _obs(self) -> np.ndarray:
        return torch.cat([self.stock, self.pipeline.flatten()]).numpy().astype(np.float32)

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        p = self.problem
        if options and "demand" in options:
            self.demand = torch.as_tensor(options["demand"], dtype=torch.float32)
        else:
            g = torch.Generator().manual_seed(int(self.np_random.integers(2**31)))
            self.demand = p.demand(1, g)[0]
        if tuple(self.demand.shape) != (p.horizon, p.stores):
            raise ValueError(
                f"demand must be (horizon, stores) = {(p.horizon, p.stores)}, got {tuple(self.demand.shape)}"
            )
        self.t, self.stock = 0, p.mean.clone()
        self.pipeline = p.mean[:, None].repeat(1, p.lead)
        return self._obs(), {}

    def step(self, action):
        p = self.problem
        q = torch.as_tensor(np.asarray(action, dtype=np.float32)).reshape(-1)
        if q.shape[0] != p.stores or not torch.isfinite(q).all() or (q < 0).any():
            raise ValueError(f"action must be {p.stores} finite orders >= 0, got {np.asarray(action).tolist()}")
        stock = self.stock + self.pipeline[:, 0]
        sales = torch.minimum(stock, self.demand[self.t])
        lost = self.demand[self.t] - sales
        self.stock = stock - sales
        cost = float((p.holding * self.stock + p.penalty * lost).sum()) if self.t >= p.warmup else 0.0
        self.pipeline = torch.cat([self.pipeline[:, 1:], q[:, None]], -1)
        self.t += 1
        return self._obs(), -cost, False, self.t >= p.horizon, {"lost": lost.numpy()}


class StorePolicy(nn.Module):
    """Symmetry-aware store network: phi(store features) shared by every store, the mean of the embeddings as
    the message, rho([own embedding, message]) -> softplus order. Size-invariant in K."""

    def __init__(self, problem: InventoryProblem, hidden: int = 32) -> None:
        super().__init__()
        self.problem = problem
        n_in = 4 + problem.lead  # stock, pipeline (L), holding, penalty, mean demand
        self.phi = nn.Sequential(nn.Linear(n_in, hidden), nn.ELU(), nn.Linear(hidden, hidden), nn.ELU())
        self.rho = nn.Sequential(nn.Linear(2 * hidden, hidden), nn.ELU(), nn.Linear(hidden, 1))

    def features(self, stock: torch.Tensor, pipeline: torch.Tensor) -> torch.Tensor:
        p, scale = self.problem, self.problem.mean.clamp_min(1e-3)  # normalise quantities by mean demand
        B = stock.shape[0]
        static = torch.stack([p.holding, p.penalty / 10, p.mean / 5], -1).expand(B, -1, -1)  # (B, K, 3)
        return torch.cat([(stock / scale)[..., None], pipeline / scale[:, None], static], -1)  # (B, K, 4 + L)

    def forward(self, stock: torch.Tensor, pipeline: torch.Tensor) -> torch.Tensor:
        h = self.phi(self.features(stock, pipeline))  # (B, K, H)
        msg = h.mean(1, keepdim=True).expand_as(h)  # (B, K, H) the star graph's one message round
        out = self.rho(torch.cat([h, msg], -1)).squeeze(-1)  # (B, K)
        return nn.functional.softplus(out) * self.problem.mean.clamp_min(1e-3)


@dataclass(frozen=True)
class InventoryTrainParams:
    steps: int = 150
    """Adam steps (each one batch of fresh demand paths)."""
    paths: int = 64
    """Demand paths per step."""
    lr: float = 3e-3
    """Adam learning rate."""
    hidden: int = 32
    """Width of the store network."""
    sigma: float = 0.3
    """REINFORCE only: the Gaussian exploration noise on each order, in units of the store's mean demand."""

    def __post_init__(self) -> None:
        if self.steps < 1 or self.paths < 2 or not self.lr > 0 or self.hidden < 1 or not self.sigma > 0:
            raise ValueError("need steps >= 1, paths >= 2, lr > 0, hidden >= 1 and sigma > 0")


@INVENTORY_METHODS.register(
    "hdpo",
    params=InventoryTrainParams,
    paper=papers.HDPO,
    fidelity="reduced",
    departures=(
        "stores order from an unconstrained supplier (no warehouse, no allocation); the star-graph message is the "
        "mean store embedding, so the network is the paper's symmetry-aware idea without the warehouse node",
        "synthetic clipped-normal demand instead of the paper's benchmark and real retailer time series",
    ),
)
def hdpo(problem: InventoryProblem, seed: int, params: InventoryTrainParams = InventoryTrainParams()) -> Policy:
    """Pathwise gradient: minimise mean_b simulate(policy, d_b) by backpropagating through the simulator."""
    torch.manual_seed(seed)
    g, net = torch.Generator().manual_seed(seed), StorePolicy(problem, params.hidden)
    opt = torch.optim.Adam(net.parameters(), lr=params.lr)
    for _ in range(params.steps):
        opt.zero_grad()
        simulate(problem, net, problem.demand(params.paths, g)).mean().backward()
        opt.step()
    return net.eval()


@INVENTORY_METHODS.register(
    "reinforce",
    params=InventoryTrainParams,
    paper=papers.HDPO,
    fidelity="reduced",
    departures=(
        "the paper's REINFORCE baseline with a batch-mean baseline over whole paths (no learned value function), "
        "the same network, demand paths and Adam budget as hdpo",
    ),
)
def reinforce(problem: InventoryProblem, seed: int, params: InventoryTrainParams = InventoryTrainParams()) -> Policy:
    """Score function: orders q ~ N(net(s), (sigma * mean)^2) clipped at 0; gradient of
    mean_b (C_b - mean C) * sum_t log pi(q_bt | s_bt), the simulator not differentiated."""
    torch.manual_seed(seed)
    g, net = torch.Generator().manual_seed(seed), StorePolicy(problem, params.hidden)
    opt = torch.optim.Adam(net.parameters(), lr=params.lr)
    scale = params.sigma * problem.mean.clamp_min(1e-3)
    for _ in range(params.steps):
        logps: list[torch.Tensor] = []

        def noisy(stock: torch.Tensor, pipeline: torch.Tensor) -> torch.Tensor:
            mu = net(stock, pipeline)
            q = (mu + scale * torch.randn(mu.shape, generator=g)).detach()
            logps.append(torch.distributions.Normal(mu, scale).log_prob(q).sum(-1))  # (B,)
            return q.clamp_min(0)

        cost = simulate(problem, noisy, problem.demand(params.paths, g)).detach()  # (B,)
        opt.zero_grad()
        ((cost - cost.mean()) * torch.stack(logps, 1).sum(1)).mean().backward()
        opt.step()
    return net.eval()


@INVENTORY_METHODS.register(
    "base_stock",
    paper=papers.HDPO,
    fidelity="reduced",
    departures=(
        "S_k searched per store on a grid of 41 levels (mean * (L + 1) + z * std * sqrt(L + 1), z in [-1, 3])",
    ),
)
def base_stock(problem: InventoryProblem, seed: int, params=None) -> Policy:
    """Best base-stock policy: q_k = max(0, S_k - stock_k - sum pipeline_k), S_k grid-searched per store on 256
    training paths (stores are independent, so each store's level is searched on its own cost)."""
    g = torch.Generator().manual_seed(seed)
    demand, L = problem.demand(256, g), problem.lead
    zs = torch.linspace(-1, 3, 41)
    best = torch.zeros(problem.stores)
    for k in range(problem.stores):
        sub = InventoryProblem(
            problem.mean[k : k + 1],
            problem.std[k : k + 1],
            problem.holding[k : k + 1],
            problem.penalty[k : k + 1],
            L,
            problem.horizon,
            problem.warmup,
        )
        levels = problem.mean[k] * (L + 1) + zs * problem.std[k] * (L + 1) ** 0.5
        costs = [simulate(sub, order_up_to(torch.tensor([s])), demand[:, :, k : k + 1]).mean() for s in levels]
        best[k] = levels[int(torch.stack(costs).argmin())]
    return order_up_to(best)


def order_up_to(levels: torch.Tensor) -> Policy:
    """The base-stock policy with order-up-to levels (K,)."""
    return lambda stock, pipeline: (levels - stock - pipeline.sum(-1)).clamp_min(0)
