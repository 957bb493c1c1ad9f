"""DR-RL: an RL agent choosing the low-rank size of each attention layer, reward = fidelity - cost (Erden 2025,
"Dynamic Rank Reinforcement Learning for Adaptive Low-Rank Multi-Head Self Attention in Large Language Models",
arXiv:2512.15973; the author's code, github.com/canererden/DR_RL_Project).

The paper's MDP: one decision per attention layer (a sequential policy over the layers of the network). The state
joins the sequence's dynamics, the layer's statistics and the previous rank; the action is a rank r from a grid;
the low-rank path replaces Q and K by their rank-r truncated SVDs (batched SVD per sequence); the reward is

    R_t = alpha * cos(O_full, O_r) - beta * cost(r) - gamma * ||Delta A||_F

with O the attention output, cost(r) the FLOPs of the low-rank path and ||Delta A||_F the perturbation of moving
from the previous rank to this one (the singular-value energy between the two ranks, the matrix-perturbation bound
of the author's `perturbation.py`); ranks whose tail energy exceeds a threshold are masked (the safety guardrail).
The paper's baseline is static low rank: the same rank for every layer and input.

Here (`RankProblem`): a 4-layer single-head attention network with residual connections, d = 32, 32 tokens; each
layer's W_Q, W_K have their own spectral decay (layer sensitivity) and each input sequence lives in a subspace of
its own dimension (sequence dynamics), so the rank that suffices depends on both. `RankSelectionEnv` is the MDP in
Gymnasium's API (one step per layer); `rollout` is the same MDP batched in torch. The methods (`RANK_METHODS`):
`dr_rl` (a policy network trained by REINFORCE, as the author's `train.py`) and `uniform` (the paper's baseline: the
one rank, of the grid, with the best mean reward on the training sequences).
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

RANK_METHODS: Registry = Registry("rank method")
"""Rank-selection methods: `fn(problem, seed, params) -> RankPolicy`."""

RANKS = (1, 2, 4, 8, 12, 16, 24, 32)
"""The action grid (d = 32 is full rank)."""

RankPolicy = Callable[[torch.Tensor], torch.Tensor]
"""Maps states (B, state_dim) to rank indices (B,) (greedy at evaluation)."""


@dataclass(frozen=True)
class RewardWeights:
    alpha: float = 1.0
    """Weight of the fidelity cos(O_full, O_r)."""
    beta: float = 0.2
    """Weight of the cost r / d (the low-rank score computation's share of the full one's FLOPs)."""
    gamma: float = 0.05
    """Weight of the perturbation ||Delta A||_F / ||A||_F between the previous rank and this one."""
    safety: float = 0.9
    """Ranks whose relative tail energy ||Q - Q_r||_F / ||Q||_F exceeds this are masked (1 = no mask)."""

    def __post_init__(self) -> None:
        if min(self.alpha, self.beta, self.gamma) < 0 or not 0 < self.safety <= 1:
            raise ConfigError("reward weights must be >= 0 and safety in (0, 1]")


@dataclass(frozen=True)
class RankProblem:
    """A small attention network and a distribution of input sequences (module docstring)."""

    wq: torch.Tensor
    """(L, d, d) query projections."""
    wk: torch.Tensor
    """(L, d, d) key projections."""
    wv: torch.Tensor
    """(L, d, d) value projections."""
    dims: tuple[int, ...] = (2, 4, 8, 32)
    """Subspace dimensions an input sequence is drawn from (uniformly)."""
    tokens: int = 32
    """Tokens per sequence."""
    weights: RewardWeights = RewardWeights()

    @property
    def layers(self) -> int:
        return self.wq.shape[0]

    @property
    def d(self) -> int:
        return self.wq.shape[1]

    @property
    def state_dim(self) -> int:
        return 2 * len(RANKS) + self.layers + len(RANKS)

    def sample(self, n: int, g: torch.Generator) -> torch.Tensor:
        """(n, tokens, d) sequences: each in a random subspace of a dimension from `dims`, plus 1% noise."""
        d, out = self.d, []
        for i in torch.randint(len(self.dims), (n,), generator=g).tolist():
            k = self.dims[i]
            basis = torch.linalg.qr(torch.randn(d, k, generator=g))[0].T  # (k, d) orthonormal rows
            x = torch.randn(self.tokens, k, generator=g) @ basis * (d / k) ** 0.5
            out.append(x + 0.01 * torch.randn(self.tokens, d, generator=g))
        return torch.stack(out)


def make_problem(seed: int, layers: int = 4, d: int = 32, weights: RewardWeights = RewardWeights()) -> RankProblem:
    """Layer l's W_Q and W_K have singular values exp(-j / tau_l), tau_l from 1.5 to d (some layers nearly low
    rank, some not); W_V is a scaled random matrix."""
    if layers < 1 or d not in (32,):
        raise ConfigError(f"need layers >= 1 and d = 32 (the rank grid {RANKS}), got {layers}, {d}")
    g = torch.Generator().manual_seed(seed)
    taus = torch.logspace(np.log10(1.5), np.log10(d), layers)[torch.randperm(layers, generator=g)]

    def spectral(tau: float) -> torch.Tensor:
        u = torch.linalg.qr(torch.randn(d, d, generator=g))[0]
        v = torch.linalg.qr(torch.randn(d, d, generator=g))[0]
        s = torch.exp(-torch.arange(d) / tau)
        return u @ torch.diag(s / s.norm() * d**0.5) @ v.T * 2.0

    wq = torch.stack([spectral(float(t)) for t in taus])
    wk = torch.stack([spectral(float(t)) for t in taus])
    wv = torch.randn(layers, d, d, generator=g) / d**0.5 * 0.5
    return RankProblem(wq, wk, wv, weights=weights)


def truncate(svd: tuple[torch.Tensor, torch.Tensor, torch.Tensor], rank: torch.Tensor) -> torch.Tensor:
    """Rank-r truncation of each (n, d) matrix of a batch from its SVD (u (B, n, d), s (B, d), vh (B, d, d));
    rank (B,)."""
    u, s, vh = svd
    keep = (torch.arange(s.shape[-1])[None] < rank[:, None]).to(s.dtype)  # (B, d)
    return (u * (s * keep)[:, None, :]) @ vh


def tail_fractions(s: torch.Tensor) -> torch.Tensor:
    """||M - M_r||_F / ||M||_F for every r of the grid, from the singular values (B, d) -> (B, len(RANKS))."""
    energy = s.pow(2)
    total = energy.sum(-1, keepdim=True).clamp_min(1e-12)
    tail = torch.stack([energy[:, r:].sum(-1) for r in RANKS], -1)
    return (tail / total).sqrt()


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    a = torch.softmax(q @ k.transpose(-1, -2) / q.shape[-1] ** 0.5, dim=-1)  # (B, n, n)
    return a @ v  # (B, n, d)


@dataclass
class Step:
    """What one layer's decision saw and got (batched)."""

    state: torch.Tensor
    """(B, state_dim): tail fractions of Q and K at each grid rank, the layer one-hot, the previous rank one-hot."""
    mask: torch.Tensor
    """(B, len(RANKS)) ranks allowed by the safety guardrail."""
    fidelity: torch.Tensor | None = None
    """(B,) mean cosine similarity of the low-rank and full attention outputs, token by token."""
    cost: torch.Tensor | None = None
    """(B,) r / d."""
    perturbation: torch.Tensor | None = None
    """(B,) singular-value energy of Q between the previous and this rank, relative to ||Q||_F."""
    reward: torch.Tensor | None = None


def observe(problem: RankProblem, layer: int, x: torch.Tensor, prev: torch.Tensor):
    """The state and the guardrail mask before layer `layer` acts on x (B, n, d); prev (B,) the previous rank
    index (len(RANKS) - 1, full rank, before the first layer). Also returns Q, K, V and the SVDs of Q and K (one
    batched SVD each, used for the state, the guardrail and the truncation)."""
    q, k, v = x @ problem.wq[layer], x @ problem.wk[layer], x @ problem.wv[layer]
    svd_q, svd_k = torch.linalg.svd(q, full_matrices=False), torch.linalg.svd(k, full_matrices=False)
    tq, tk = tail_fractions(svd_q[1]), tail_fractions(svd_k[1])
    B = x.shape[0]
    onehot_layer = torch.zeros(B, problem.layers)
    onehot_layer[:, layer] = 1
    state = torch.cat([tq, tk, onehot_layer, nn.functional.one_hot(prev, len(RANKS)).float()], -1)
    mask = torch.maximum(tq, tk) <= problem.weights.safety
    mask[:, -1] = True  # full rank is always safe
    return state, mask, (q, k, v, svd_q, svd_k)


def act(problem: RankProblem, x: torch.Tensor, qkv, prev: torch.Tensor, action: torch.Tensor):
    """Apply rank RANKS[action] to the layer: returns the next input (residual), fidelity, cost, perturbation."""
    q, k, v, svd_q, svd_k = qkv
    grid = torch.tensor(RANKS)
    rank, prev_rank = grid[action], grid[prev]
    full, low = attention(q, k, v), attention(truncate(svd_q, rank), truncate(svd_k, rank), v)
    sq = svd_q[1]
    fidelity = nn.functional.cosine_similarity(full, low, dim=-1).mean(-1)  # (B,)
    energy = sq.pow(2)
    idx = torch.arange(sq.shape[-1])[None]
    lo, hi = torch.minimum(rank, prev_rank)[:, None], torch.maximum(rank, prev_rank)[:, None]
    between = (energy * ((idx >= lo) & (idx < hi))).sum(-1)
    perturbation = (between / energy.sum(-1).clamp_min(1e-12)).sqrt()
    return x + low, fidelity, rank.float() / problem.d, perturbation


def rollout(problem: RankProblem, x: torch.Tensor, choose: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]):
    """Run the low-rank network on x (B, n, d), `choose(state, mask) -> action (B,)` at every layer; returns the
    steps (with rewards) and the end-to-end fidelity cos(final low-rank output, final full-rank output) (B,)."""
    w = problem.weights
    prev = torch.full((x.shape[0],), len(RANKS) - 1)
    x_full, steps = x, []
    for layer in range(problem.layers):
        state, mask, qkv = observe(problem, layer, x, prev)
        action = choose(state, mask)
        x, fid, cost, pert = act(problem, x, qkv, prev, action)
        reward = w.alpha * fid - w.beta * cost - w.gamma * pert
        steps.append(Step(state, mask, fid, cost, pert, reward))
        q, k, v = (x_full @ m[layer] for m in (problem.wq, problem.wk, problem.wv))
        x_full = x_full + attention(q, k, v)
        prev = action
    end_to_end = nn.functional.cosine_similarity(x, x_full, dim=-1).mean(-1)
    return steps, end_to_end


class RankSelectionEnv(gym.Env):
    """The MDP in Gymnasium's API: one episode is one input sequence, one step one layer; observation the state
    vector, action an index into RANKS (a masked rank falls back to full rank, as the guardrail would),
    reward alpha * fidelity - beta * cost - gamma * perturbation. info["mask"] is the guardrail's mask."""

    def __init__(self, problem: RankProblem) -> None:
        self.problem = problem
        self.observation_space = gym.spaces.Box(0.0, 1.0, (problem.state_dim,), np.float32)
        self.action_space = gym.spaces.Discrete(len(RANKS))

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        if options and "x" in options:
            self.x = torch.as_tensor(options["x"], dtype=torch.float32)[None]
        else:
            self.x = self.problem.sample(1, torch.Generator().manual_seed(int(self.np_random.integers(2**31))))
        self.layer, self.prev = 0, torch.tensor([len(RANKS) - 1])
        return self._observe(), {"mask": self.mask[0].numpy()}

    def _observe(self) -> np.ndarray:
        state, self.mask, self.qkv = observe(self.problem, self.layer, self.x, self.prev)
        return state[0].numpy().astype(np.float32)

    def step(self, action):
        if not self.action_space.contains(action):
            raise ValueError(f"action must be a rank index in 0..{len(RANKS) - 1}, got {action!r}")
        a = torch.tensor([int(action) if bool(self.mask[0, int(action)]) else len(RANKS) - 1])
        w = self.problem.weights
        with torch.no_grad():
            self.x, fid, cost, pert = act(self.problem, self.x, self.qkv, self.prev, a)
        reward = float(w.alpha * fid - w.beta * cost - w.gamma * pert)
        self.layer, self.prev = self.layer + 1, a
        done = self.layer >= self.problem.layers
        obs = np.zeros(self.problem.state_dim, np.float32) if done else self._observe()
        return obs, reward, done, False, {"fidelity": float(fid), "rank": RANKS[int(a)]}


@dataclass(frozen=True)
class RankTrainParams:
    iterations: int = 150
    """REINFORCE updates (dr_rl) / unused (uniform)."""
    batch: int = 64
    """Training sequences per update (uniform scores each rank on 128 training sequences)."""
    lr: float = 0.01
    """Adam learning rate."""
    hidden: int = 64
    """Policy MLP width."""
    entropy: float = 0.01
    """Entropy bonus."""

    def __post_init__(self) -> None:
        if self.iterations < 1 or self.batch < 2 or not self.lr > 0 or self.hidden < 1 or self.entropy < 0:
            raise ConfigError("need iterations >= 1, batch >= 2, lr > 0, hidden >= 1, entropy >= 0")


class RankPolicyNet(nn.Module):
    """state -> masked logits over RANKS (an MLP; the paper's policy is a small Transformer encoder + MLP)."""

    def __init__(self, state_dim: int, hidden: int) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(state_dim, hidden), nn.Tanh(), nn.Linear(hidden, len(RANKS)))

    def forward(self, state: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return self.net(state).masked_fill(~mask, -1e9)


@RANK_METHODS.register(
    "dr_rl",
    params=RankTrainParams,
    paper=papers.DR_RL,
    fidelity="reduced",
    departures=(
        "a 4-layer single-head attention network (d 32, 32 tokens) with synthetic weights and inputs instead of an "
        "LLM's multi-head attention on text; no language-modelling loss trained alongside",
        "the state is the tail-energy fractions of Q and K at each grid rank, the layer one-hot and the previous "
        "rank (the paper: Conv1D sequence features and weight mean/variance/norm); an MLP policy instead of a "
        "small Transformer encoder; REINFORCE with returns-to-go and a per-layer batch-mean baseline",
        "cost is r / d (the share of the score computation's FLOPs) in the reward, not measured latency; "
        "one rank per sequence and layer, no per-segment updates inside long sequences",
    ),
)
def dr_rl(problem: RankProblem, seed: int, params: RankTrainParams = RankTrainParams()) -> RankPolicy:
    """REINFORCE over the layer sequence: maximise sum_t R_t; grad = E[sum_t (G_t - b_t) grad log pi(a_t|s_t)]."""
    torch.manual_seed(seed)
    g = torch.Generator().manual_seed(seed)
    net = RankPolicyNet(problem.state_dim, params.hidden)
    opt = torch.optim.Adam(net.parameters(), lr=params.lr)
    for _ in range(params.iterations):
        logps, ents = [], []

        def sample(state: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
            dist = torch.distributions.Categorical(logits=net(state, mask))
            a = dist.sample()
            logps.append(dist.log_prob(a))
            ents.append(dist.entropy())
            return a

        with torch.no_grad():
            x = problem.sample(params.batch, g)
        steps, _ = rollout(problem, x, sample)
        rewards = torch.stack([s.reward for s in steps], 1).detach()  # (B, L)
        returns = rewards.flip(1).cumsum(1).flip(1)  # returns-to-go
        adv = returns - returns.mean(0, keepdim=True)
        loss = -(adv * torch.stack(logps, 1)).sum(1).mean() - params.entropy * torch.stack(ents, 1).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    net.eval()
    return lambda state, mask: net(state, mask).argmax(-1)


def fixed_rank(index: int) -> RankPolicy:
    """The static policy: RANKS[index] at every layer for every input (full rank where the guardrail masks it)."""
    return lambda state, mask: torch.where(mask[:, index], torch.tensor(index), torch.tensor(len(RANKS) - 1))


@RANK_METHODS.register(
    "uniform",
    params=RankTrainParams,
    paper=papers.DR_RL,
    fidelity="reduced",
    departures=("the paper's static low-rank baseline, with the rank tuned: the grid rank of best mean reward",),
)
def uniform(problem: RankProblem, seed: int, params: RankTrainParams = RankTrainParams()) -> RankPolicy:
    """The best single rank: argmax_r of the mean episode reward of `fixed_rank(r)` on training sequences."""
    g = torch.Generator().manual_seed(seed)
    x = problem.sample(128, g)
    with torch.no_grad():
        scores = [score(problem, fixed_rank(i), x)["reward"] for i in range(len(RANKS))]
    return fixed_rank(int(np.argmax(scores)))


def score(problem: RankProblem, policy: RankPolicy, x: torch.Tensor) -> dict:
    """Mean episode reward (sum over layers), fidelity (per layer), cost (mean r / d), end-to-end fidelity, and the
    mean rank chosen per layer."""
    chosen: list[torch.Tensor] = []

    def choose(state: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        chosen.append(policy(state, mask))
        return chosen[-1]

    with torch.no_grad():
        steps, e2e = rollout(problem, x, choose)
    grid = torch.tensor(RANKS, dtype=torch.float32)
    return {
        "reward": float(torch.stack([s.reward for s in steps], 1).sum(1).mean()),
        "fidelity": float(torch.stack([s.fidelity for s in steps]).mean()),
        "cost": float(torch.stack([s.cost for s in steps]).mean()),
        "end_to_end": float(e2e.mean()),
        "ranks": [round(float(grid[a].mean()), 2) for a in chosen],
    }
