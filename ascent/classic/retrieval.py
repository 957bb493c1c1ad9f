"""Retrieval-augmented DQN (Goyal, Friesen, Weber, Banino, Ke, Badia, Guez, Mirza, Humphreys, Konyushkova, Sifre,
Valko, Osindero, Lillicrap, Heess & Blundell 2022, "Retrieval-Augmented Reinforcement Learning", ICML 2022,
arXiv:2202.08417).

The agent's own replay buffer is the retrieval dataset. For a state s (B, D):
- the index: the last `index_size` stored transitions (s_m, a_m, r_m, s'_m), rebuilt every `refresh_interval`
  environment steps (between refreshes the index is frozen, so acting and learning see the same data);
- retrieval: the k nearest index entries to s in a fixed embedding, the (normalised) observation itself, by Euclidean
  distance; entries at distance <= 1e-6 are excluded (the query transition itself when s comes from the buffer, and
  exact duplicates), so a sampled state never reads its own action, reward and successor;
- summary: one attention head over the k neighbours, with features f_m = [s_m, onehot(a_m), r_m, s'_m - s_m]:
      u = Σ_m softmax_m(q(s) · key(f_m) / √d) value(f_m),   q, key, value linear maps to width d;
- Q(s, ·) = MLP([s, u]); the attention maps and the MLP are trained end-to-end with DQN's loss
      L = Huber(Q(s, a) - y),   y = r + γ (1 - terminated) max_a' Q⁻(s', a'),
  where the target network Q⁻ (a hard copy) retrieves from the same index for s'.
Simplifications of the paper: a fixed (not learned) retrieval embedding, one attention step instead of the paper's
recurrent retrieval process, the agent's own recent experience as the dataset. `learned_retrieval_dqn` (below) has
the learned process: n_s slots, learned query and key embeddings, top-k by the learned score, GRU slot updates.
Everything else (replay, ε-greedy, target copies, exact resume) is `ascent.classic.dqn`'s, imported.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from ascent import papers
from ascent.classic.base import CLASSIC, ClassicContext
from ascent.classic.dqn import DQN, DQNParams
from ascent.classic.networks import adam, mlp
from ascent.classic.replay import ReplayBuffer
from ascent.typed import ConfigError

SELF_DISTANCE = 1e-6
"""Index entries at most this far from the query are excluded (the query transition itself, exact duplicates)."""


@dataclass(frozen=True)
class RetrievalParams(DQNParams):
    """DQN's parameters (`ascent.classic.dqn.DQNParams`) plus the retrieval process (Goyal et al. 2022)."""

    k: int = 8
    """Neighbours retrieved per state, >= 1."""
    index_size: int = 2048
    """The index holds the last this many stored transitions, >= k."""
    refresh_interval: int = 500
    """Environment steps between two rebuilds of the index from the buffer, > 0."""
    width: int = 32
    """d, the width of the attention's query, key, value and of the summary u, > 0."""

    def __post_init__(self) -> None:
        try:
            super().__post_init__()
        except ValueError as err:
            raise ConfigError(f"retrieval_dqn: {err}") from None
        if self.k < 1 or self.index_size < self.k:
            raise ConfigError(f"retrieval_dqn: need 1 <= k <= index_size, got k={self.k}, index_size={self.index_size}")
        if self.refresh_interval <= 0 or self.width <= 0:
            raise ConfigError("retrieval_dqn: refresh_interval and width must be > 0")


def nearest(query: torch.Tensor, keys: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The k nearest rows of keys (M, D) to each query (B, D), excluding those at distance <= SELF_DISTANCE:
    indices (B, k') and a validity mask (B, k'), k' = min(k, M); invalid slots where fewer remain.

    >>> idx, ok = nearest(torch.tensor([[0.0], [1.0]]), torch.tensor([[0.0], [0.9], [3.0]]), 2)
    >>> idx.tolist(), ok.tolist()
    ([[1, 2], [1, 0]], [[True, True], [True, True]])
    """
    d = torch.cdist(query, keys)  # (B, M)
    d = d.masked_fill(d <= SELF_DISTANCE, float("inf"))
    dist, idx = d.topk(min(k, keys.shape[0]), dim=1, largest=False)  # (B, k')
    return idx, torch.isfinite(dist)


def transition_features(buffer: ReplayBuffer, positions: np.ndarray, n_actions: int) -> torch.Tensor:
    """f_m = [s_m, onehot(a_m), r_m, s'_m - s_m] for buffer rows `positions` (M,): (M, 2 D + A + 1)."""
    obs, next_obs = buffer.obs[positions], buffer.next_obs[positions]
    onehot = np.eye(n_actions, dtype=np.float32)[buffer.actions[positions]]
    return torch.from_numpy(np.concatenate([obs, onehot, buffer.rewards[positions, None], next_obs - obs], axis=1))


class RetrievalQNetwork(nn.Module):
    """Q(s, ·) = MLP([s, u(s)]), u the attention summary of the k nearest index entries: (B, D) -> (B, A).
    The index (`keys` (M, D), `features` (M, F)) is set from outside and shared with the target network."""

    def __init__(self, obs_dim: int, n_actions: int, k: int, width: int, hidden: list[int]) -> None:
        super().__init__()
        feat_dim = 2 * obs_dim + n_actions + 1
        self.k, self.width = k, width
        self.query, self.key, self.value = (
            nn.Linear(obs_dim, width),
            nn.Linear(feat_dim, width),
            nn.Linear(feat_dim, width),
        )
        self.head = mlp([obs_dim + width, *hidden, n_actions], "relu")
        self.keys = torch.zeros(0, obs_dim)  # (M, D) the index: plain attributes, not weights
        self.features = torch.zeros(0, feat_dim)  # (M, F)

    def summary(self, obs: torch.Tensor) -> torch.Tensor:
        """u (B, d): attention over the retrieved neighbours (zeros where none can be retrieved)."""
        if self.keys.shape[0] == 0:
            return obs.new_zeros(len(obs), self.width)
        with torch.no_grad():
            idx, valid = nearest(obs, self.keys, self.k)  # (B, k')
        f = self.features[idx]  # (B, k', F)
        logits = (self.key(f) @ self.query(obs)[:, :, None]).squeeze(2) / self.width**0.5  # (B, k')
        weights = F.softmax(logits.masked_fill(~valid, -1e9), dim=1) * valid  # (B, k')
        return (weights[:, :, None] * self.value(f)).sum(1)  # (B, d)

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return self.head(torch.cat([obs, self.summary(obs)], dim=1))


class RetrievalDQN(DQN):
    """DQN whose Q-network reads retrieved transitions of its own buffer (see the module docstring)."""

    def __init__(self, ctx: ClassicContext, params: RetrievalParams) -> None:
        super().__init__(ctx, params)
        envs, p = ctx.envs, params
        self.q = RetrievalQNetwork(envs.obs_dim, envs.n_actions, p.k, p.width, p.hidden).to(ctx.device)
        self.q_target = RetrievalQNetwork(envs.obs_dim, envs.n_actions, p.k, p.width, p.hidden).to(ctx.device)
        self.q_target.load_state_dict(self.q.state_dict())
        self.parameters = list(self.q.parameters())
        self.optimizer = adam(self.parameters, p.lr)
        self.refresh_count = 0

    def set_index(self, keys: torch.Tensor, features: torch.Tensor) -> None:
        for net in (self.q, self.q_target):
            net.keys, net.features = keys, features

    def refresh(self) -> None:
        """The index := the last index_size transitions of the buffer."""
        n = min(len(self.buffer), self.p.index_size)
        positions = (self.buffer.pos - n + np.arange(n)) % self.buffer.capacity
        self.set_index(
            torch.from_numpy(self.buffer.obs[positions]),
            transition_features(self.buffer, positions, self.envs.n_actions),
        )

    def collect(self) -> None:
        super().collect()
        if self.steps // self.p.refresh_interval > self.refresh_count:
            self.refresh_count = self.steps // self.p.refresh_interval
            self.refresh()

    def state_dict(self) -> dict[str, Any]:
        index = {"keys": self.q.keys.numpy().copy(), "features": self.q.features.numpy().copy()}
        return {**super().state_dict(), "refresh_count": self.refresh_count, "index": index}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        super().load_state_dict(state)
        self.refresh_count = state["refresh_count"]
        index = state["index"]
        self.set_index(torch.from_numpy(np.asarray(index["keys"])), torch.from_numpy(np.asarray(index["features"])))


@CLASSIC.register(
    "retrieval_dqn",
    params=RetrievalParams,
    paper=papers.RETRIEVAL_AUGMENTED_RL,
    fidelity="reduced",
    departures=(
        (
            "the dataset is the agent's own recent transitions; Euclidean k nearest neighbours on raw observations, "
            "no learned retrieval embedding"
        ),
        "one attention step instead of the recurrent retrieval process",
    ),
)
def retrieval_dqn(ctx: ClassicContext, params: RetrievalParams = RetrievalParams()) -> RetrievalDQN:
    """Retrieval-augmented DQN (Goyal et al. 2022, ICML 2022, arXiv:2202.08417): Q(s, ·) = MLP([s, u(s)]),
    u = Σ_m softmax(q(s)·key(f_m)/√d) value(f_m) over the k nearest stored transitions f_m = [s_m, onehot(a_m), r_m,
    s'_m - s_m] of the replay buffer (the query itself excluded); DQN's loss, end-to-end; discrete actions."""
    return RetrievalDQN(ctx, params)


retrieval_dqn.action_spaces = frozenset({"discrete"})


# --- the learned retrieval process ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class LearnedRetrievalParams(RetrievalParams):
    """`RetrievalParams` plus the learned, multi-slot, recurrent retrieval process of Goyal et al. 2022 (Sec. 2);
    `k` is now the top-k kept per slot by the *learned* score, `index_size` the retrieval batch."""

    k: int = 32
    """Entries kept per slot by the learned score, >= 1; larger than the k-NN's 8 because the top-k choice carries no
    gradient: an entry outside it cannot be learned into it (a tiny task learned at k = 4 of 8, not at 2 of 8)."""
    slots: int = 2
    """n_s, slots of the retrieval state m; each slot retrieves on its own, >= 1."""
    retrieval_steps: int = 2
    """Rounds of (query, top-k retrieval, GRU slot update) per state, >= 1."""

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.slots < 1 or self.retrieval_steps < 1:
            raise ConfigError(
                f"learned_retrieval_dqn: slots and retrieval_steps must be >= 1, got {self.slots}, "
                f"{self.retrieval_steps}"
            )


def learned_top_k(scores: torch.Tensor, excluded: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Softmax attention restricted to the k highest learned scores (B, S, M) per slot, entries `excluded` (B, M)
    masked out: weights (B, S, M), zero outside the top k; the weights are differentiable in the scores, so the
    query and key embeddings that made them are trained by the loss downstream.

    >>> w = learned_top_k(torch.tensor([[[0.0, 1.0, 2.0, 9.0]]]), torch.tensor([[False, False, False, True]]), 2)
    >>> [round(x, 4) for x in w[0, 0].tolist()]
    [0.0, 0.2689, 0.7311, 0.0]
    """
    scores = scores.masked_fill(excluded[:, None, :], float("-inf"))  # (B, S, M)
    kk = min(k, scores.shape[-1])
    top, idx = scores.topk(kk, dim=-1)  # (B, S, k)
    valid = torch.isfinite(top)
    w = F.softmax(top.masked_fill(~valid, -1e9), dim=-1) * valid  # (B, S, k)
    return torch.zeros_like(scores).scatter(-1, idx, w)


class LearnedRetrievalQNetwork(nn.Module):
    """Q(s, ·) = MLP([s, m_R(s)]) with m the n_s-slot state of a learned retrieval process (Goyal et al. 2022):
        m_0^j = init^j + W_s s                                   (B, S, d)
        for r = 1..R:  q^j = W_q [m^j, s],  key_m = E_k(f_m) (learned embedding of index entry m)
                       w^j = softmax over top-k_m of q^j · key_m / √d (the rest 0; the query entry excluded)
                       u^j = Σ_m w^j_m E_v(f_m),  m^j = GRU(u^j, m^j)
    The top-k selection uses the learned scores themselves, so what is retrieved changes as the embeddings learn;
    the index (`keys` (M, D) raw observations, used only to exclude the query itself, `features` (M, F)) is set
    from outside and shared with the target network."""

    def __init__(self, obs_dim: int, n_actions: int, p: LearnedRetrievalParams) -> None:
        super().__init__()
        feat_dim, d = 2 * obs_dim + n_actions + 1, p.width
        self.k, self.width, self.steps = p.k, d, p.retrieval_steps
        self.init = nn.Parameter(torch.randn(p.slots, d) * 0.1)  # (S, d)
        self.from_state = nn.Linear(obs_dim, d)
        self.query = nn.Linear(d + obs_dim, d)
        self.key_embed = mlp([feat_dim, d, d], "relu")  # E_k: the learned retrieval embedding
        self.value = nn.Linear(feat_dim, d)
        self.gru = nn.GRUCell(d, d)
        self.head = mlp([obs_dim + p.slots * d, *p.hidden, n_actions], "relu")
        self.keys = torch.zeros(0, obs_dim)  # (M, D) the index: plain attributes, not weights
        self.features = torch.zeros(0, feat_dim)  # (M, F)

    def retrieve(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The final slot state m_R (B, S, d) and the last round's retrieval weights (B, S, M)."""
        b, s = len(obs), self.init.shape[0]
        m = self.init[None] + self.from_state(obs)[:, None, :]  # (B, S, d)
        if self.keys.shape[0] == 0:
            return m, obs.new_zeros(b, s, 0)
        with torch.no_grad():
            excluded = torch.cdist(obs, self.keys) <= SELF_DISTANCE  # (B, M)
        keys, values = self.key_embed(self.features), self.value(self.features)  # (M, d) each
        w = obs.new_zeros(b, s, 0)
        for _ in range(self.steps):
            q = self.query(torch.cat([m, obs[:, None, :].expand(b, s, -1)], dim=2))  # (B, S, d)
            w = learned_top_k(q @ keys.T / self.width**0.5, excluded, self.k)  # (B, S, M)
            u = w @ values  # (B, S, d)
            m = self.gru(u.reshape(b * s, -1), m.reshape(b * s, -1)).reshape(b, s, -1)
        return m, w

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        m, _ = self.retrieve(obs)
        return self.head(torch.cat([obs, m.flatten(1)], dim=1))


class LearnedRetrievalDQN(RetrievalDQN):
    """`RetrievalDQN` with the learned retrieval process (`LearnedRetrievalQNetwork`) in place of fixed k-NN."""

    def __init__(self, ctx: ClassicContext, params: LearnedRetrievalParams) -> None:
        super().__init__(ctx, params)
        envs = ctx.envs
        self.q = LearnedRetrievalQNetwork(envs.obs_dim, envs.n_actions, params).to(ctx.device)
        self.q_target = LearnedRetrievalQNetwork(envs.obs_dim, envs.n_actions, params).to(ctx.device)
        self.q_target.load_state_dict(self.q.state_dict())
        self.parameters = list(self.q.parameters())
        self.optimizer = adam(self.parameters, params.lr)


@CLASSIC.register(
    "learned_retrieval_dqn",
    params=LearnedRetrievalParams,
    paper=papers.RETRIEVAL_AUGMENTED_RL,
    fidelity="reduced",
    departures=(
        "the retrieval dataset is the agent's own last index_size transitions (the paper samples a retrieval batch of "
        "trajectories from a dataset), each entry one transition [s, a, r, s' - s] instead of forward/backward "
        "trajectory summaries",
        "the retrieval rounds iterate per state (a feed-forward DQN has no time recurrence); the paper's slots "
        "recur over the agent's time steps inside R2D2, and exchange information by slot self-attention (not here)",
        "exact top-k over the index by the learned score instead of approximate nearest-neighbour search; DQN "
        "(online, one-step targets) instead of R2D2 or offline DQN",
    ),
)
def learned_retrieval_dqn(
    ctx: ClassicContext, params: LearnedRetrievalParams = LearnedRetrievalParams()
) -> LearnedRetrievalDQN:
    """Retrieval-augmented DQN with a learned retrieval process (Goyal et al. 2022, ICML 2022, arXiv:2202.08417):
    n_s slots, R rounds of query = W_q[m, s], top-k of the learned score q · E_k(f_m)/√d over the index, attention
    u = Σ softmax · E_v(f_m), slot update m = GRU(u, m); Q(s, ·) = MLP([s, m]); the embeddings, the GRU and the
    head are trained end-to-end by DQN's Huber loss (the top-k choice itself carries no gradient); discrete
    actions."""
    return LearnedRetrievalDQN(ctx, params)


learned_retrieval_dqn.action_spaces = frozenset({"discrete"})
