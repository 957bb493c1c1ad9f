"""COREP (Zhang, Li, Yang & Lu 2024, "Tackling Non-Stationarity in Reinforcement Learning via Causal-Origin
Representation", ICML 2024, arXiv:2306.02747): PPO whose policy also sees a *causal-origin representation* of the
state, learned by a dual graph-attention encoder with a guided update.

Read from the paper and the authors' code (github.com/PKU-RL/COREP: graph.py, models/encoder.py, vae.py,
learner.py); written here in plain torch.

- State -> graph: node features X = relu(W s) reshaped to (N, F); edges from the nodes' cosine similarity,
  A = gumbel_softmax(sigmoid(cos(x_i, x_j)) - tau_adj, temperature, hard) row-wise, no self edges (row i picks
  one node j: an edge i -> j).
- Dual GAT (Velickovic et al. 2018): a *core* (stable) and a *general* (flexible) two-layer GAT over that graph;
  the representation is h(s) = mean_nodes(GAT_core) + mean_nodes(GAT_general).
- VAE (the authors build on VariBAD): q(z | s) = N(mu(h), diag exp(logvar(h))); decoders p(s' | z, s, a) and
  p(r | z, s, a, s'); loss = state MSE + reward MSE + kl_weight KL(q || N(0, I))
  + graph_coef mean|A_core - A_general| + sparsity_coef (mean|A_core| + mean|A_general|)
  + mag_coef (mean|A_core - A_core^T| + mean|A_general - A_general^T|), with A = sigmoid(-cos(y_i, y_j) / tau_sim)
  off the diagonal on each GAT's output nodes y (the authors' `sigmoid_adjacency_matrix`).
- Policy: PPO on [s, mu, logvar] (the encoder's output detached: the RL loss does not reach the encoder).
- Guided update: after each PPO update the iteration's mean value loss (the TD error) joins a buffer; when the mean
  of its most recent `td_recent` share lies within mean +- confidence * std of the whole buffer (no sign of the
  environment having changed) the core GAT is frozen for the next VAE update (with probability 1 - freeze_eps);
  otherwise it learns. The general GAT always learns.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from ascent import papers
from ascent.classic.base import CLASSIC, ClassicContext
from ascent.classic.networks import CategoricalPolicy, GaussianPolicy, adam, mlp
from ascent.classic.ppo import PPO, PPOParams, check
from ascent.classic.storage import Rollout


@dataclass(frozen=True)
class COREPParams(PPOParams):
    """COREP (Zhang et al. 2024, arXiv:2306.02747): PPO's parameters, plus the graph encoder, its VAE and the
    guided update (defaults: the authors' cartpole_swingup config where it applies)."""

    num_nodes: int = 4
    """Nodes of the state's graph, >= 2."""
    node_dim: int = 16
    """Feature width of each node."""
    gat_hidden: int = 32
    """Width (per head) of each GAT's first layer."""
    heads: int = 1
    """Attention heads of each GAT's first layer (concatenated)."""
    embed_dim: int = 16
    """Width of each GAT's output nodes (the representation h(s) before the latent heads)."""
    latent_dim: int = 4
    """Dimension of z; the policy sees [s, mu, logvar]."""
    decoder_hidden: int = 64
    """Hidden width of the state and reward decoders (two layers each)."""
    adj_threshold: float = 0.8
    """tau_adj: subtracted from sigmoid(cosine similarity) before the Gumbel softmax that draws the edges."""
    adj_temperature: float = 0.8
    """Temperature of that Gumbel softmax, > 0."""
    sim_threshold: float = 0.7
    """tau_sim of the graph losses' soft adjacency sigmoid(-cos / tau_sim), > 0."""
    vae_lr: float = 1e-3
    """Adam learning rate of the encoder and decoders, > 0."""
    vae_epochs: int = 1
    """Passes of the VAE over each rollout (mini-batches of batch_size), >= 1."""
    kl_weight: float = 0.1
    """Weight of KL(q(z|s) || N(0, I)), >= 0."""
    graph_coef: float = 0.1
    """Weight of mean|A_core - A_general|, >= 0."""
    sparsity_coef: float = 1e-3
    """Weight of mean|A_core| + mean|A_general|, >= 0."""
    mag_coef: float = 1e-3
    """Weight of the asymmetry mean|A - A^T| of both graphs, >= 0."""
    vae_max_grad_norm: float = 1.0
    """Clip the encoder's and decoders' gradient norm to this, > 0."""
    guided: bool = True
    """The guided update: freeze the core GAT while the TD error is steady. False: both GATs always learn."""
    td_buffer: int = 20000
    """Iterations of TD error (mean value loss) kept for the guided update's statistics, >= 2."""
    td_recent: float = 0.1
    """Share of the buffer (the newest) whose mean is tested against the whole buffer, in (0, 1]."""
    confidence: float = 1.96
    """Half-width of the steady band in buffer standard deviations, > 0."""
    freeze_eps: float = 0.05
    """Chance of updating the core GAT even when the TD error is steady, in [0, 1]."""

    def __post_init__(self) -> None:
        super().__post_init__()
        for key in ("node_dim", "gat_hidden", "heads", "embed_dim", "latent_dim", "decoder_hidden", "vae_epochs"):
            if getattr(self, key) <= 0:
                raise ValueError(f"{key} must be > 0, got {getattr(self, key)}")
        if self.num_nodes < 2 or self.td_buffer < 2:
            raise ValueError(f"num_nodes and td_buffer must be >= 2, got {self.num_nodes}, {self.td_buffer}")
        for key in ("adj_temperature", "sim_threshold", "vae_lr", "vae_max_grad_norm", "confidence"):
            if not getattr(self, key) > 0:
                raise ValueError(f"{key} must be > 0, got {getattr(self, key)}")
        for key in ("kl_weight", "graph_coef", "sparsity_coef", "mag_coef"):
            if getattr(self, key) < 0:
                raise ValueError(f"{key} must be >= 0, got {getattr(self, key)}")
        if not 0 < self.td_recent <= 1 or not 0 <= self.freeze_eps <= 1:
            raise ValueError(
                f"need 0 < td_recent <= 1 and 0 <= freeze_eps <= 1, got {self.td_recent}, {self.freeze_eps}"
            )


class GraphAttention(nn.Module):
    """One graph-attention layer (Velickovic et al. 2018; torch_geometric's GATConv with self-loops, no dropout),
    dense over a batch of small graphs:

        x'_i = || or mean over heads k of  sum_{j in N(i) + {i}} alpha^k_ij W^k x_j   (+ bias),
        alpha^k_ij = softmax_j LeakyReLU_0.2(a^k_dst . W^k x_i + a^k_src . W^k x_j),

    where N(i) = {j : edges[b, j, i] = 1} (an edge j -> i: node i aggregates from j, GATConv's direction)."""

    def __init__(self, in_dim: int, out_dim: int, heads: int = 1, concat: bool = True) -> None:
        super().__init__()
        self.heads, self.out_dim, self.concat = heads, out_dim, concat
        self.lin = nn.Linear(in_dim, heads * out_dim, bias=False)
        self.att_src = nn.Parameter(torch.empty(heads, out_dim))
        self.att_dst = nn.Parameter(torch.empty(heads, out_dim))
        self.bias = nn.Parameter(torch.zeros(heads * out_dim if concat else out_dim))
        nn.init.xavier_uniform_(self.lin.weight)
        nn.init.xavier_uniform_(self.att_src)
        nn.init.xavier_uniform_(self.att_dst)

    def forward(self, x: torch.Tensor, edges: torch.Tensor) -> torch.Tensor:
        B, N, _ = x.shape  # x (B, N, F), edges (B, N, N)
        h = self.lin(x).view(B, N, self.heads, self.out_dim)  # (B, N, H, C)
        score_src = (h * self.att_src).sum(-1)  # (B, N, H)
        score_dst = (h * self.att_dst).sum(-1)
        e = F.leaky_relu(score_dst[:, :, None] + score_src[:, None], 0.2)  # (B, N_i, N_j, H)
        neighbour = (edges.transpose(1, 2) > 0) | torch.eye(N, dtype=torch.bool)  # (B, N_i, N_j)
        e = e.masked_fill(~neighbour[..., None], float("-inf"))
        alpha = torch.softmax(e, dim=2)  # over j
        out = torch.einsum("bijh,bjhc->bihc", alpha, h)  # (B, N, H, C)
        out = out.reshape(B, N, -1) if self.concat else out.mean(2)
        return out + self.bias


class GAT(nn.Module):
    """Two graph-attention layers with an ELU between (the authors' `GAT`: heads concatenated, then one head)."""

    def __init__(self, in_dim: int, hidden: int, out_dim: int, heads: int) -> None:
        super().__init__()
        self.gat1 = GraphAttention(in_dim, hidden, heads)
        self.gat2 = GraphAttention(hidden * heads, out_dim, 1)

    def forward(self, x: torch.Tensor, edges: torch.Tensor) -> torch.Tensor:
        return self.gat2(F.elu(self.gat1(x, edges)), edges)  # (B, N, out_dim)


def cosine_matrix(x: torch.Tensor) -> torch.Tensor:
    """(B, N, F) -> (B, N, N) cosine similarities of the nodes (1e-8 guards a zero node)."""
    norm = x.norm(dim=-1, keepdim=True)
    return x @ x.transpose(-2, -1) / (norm @ norm.transpose(-2, -1) + 1e-8)


def gumbel_edges(nodes: torch.Tensor, threshold: float, temperature: float) -> torch.Tensor:
    """(B, N, N) hard 0/1 edges: row i one-hot at argmax_j ((sigmoid(cos_ij) - threshold + g_ij) / temperature),
    g_ij ~ Gumbel(0, 1), i.e. j drawn with chance softmax_j(sigmoid(cos_ij) - threshold) (the temperature matters
    only to the straight-through gradient, which is not taken), the diagonal zeroed (a row that draws itself has no
    edge). The authors' code draws the graph this way in training and evaluation alike and passes it to the GATs
    as an edge list, so no gradient flows through it; here it is a mask."""
    with torch.no_grad():
        logits = torch.sigmoid(cosine_matrix(nodes)) - threshold
        u = torch.rand(logits.shape).clamp(1e-20, 1.0 - 1e-7)
        gumbel = -torch.log(-torch.log(u))  # (B, N, N) Gumbel(0, 1)
        edges = F.one_hot(((logits + gumbel) / temperature).argmax(-1), logits.shape[-1]).float()
        return edges * (1 - torch.eye(nodes.shape[-2]))


def soft_adjacency(nodes: torch.Tensor, sim_threshold: float) -> torch.Tensor:
    """The graph losses' adjacency of a GAT's output nodes: sigmoid(-cos_ij / sim_threshold) off the diagonal, 0 on
    it (the authors' `sigmoid_adjacency_matrix`)."""
    return torch.sigmoid(cosine_matrix(nodes) / -sim_threshold) * (1 - torch.eye(nodes.shape[-2]))


def graph_losses(core: torch.Tensor, general: torch.Tensor, sim_threshold: float) -> dict[str, torch.Tensor]:
    """{"graph": mean|A_c - A_g|, "sparsity": mean|A_c| + mean|A_g|, "mag": mean|A_c - A_c^T| + mean|A_g - A_g^T|},
    each averaged over the batch, for the two GATs' output nodes (B, N, C)."""
    a_c, a_g = soft_adjacency(core, sim_threshold), soft_adjacency(general, sim_threshold)

    def m(x: torch.Tensor) -> torch.Tensor:
        return x.abs().mean(dim=(-2, -1)).mean()

    return {
        "graph": m(a_c - a_g),
        "sparsity": m(a_c) + m(a_g),
        "mag": m(a_c - a_c.transpose(-2, -1)) + m(a_g - a_g.transpose(-2, -1)),
    }


class CausalOriginEncoder(nn.Module):
    """s -> graph -> core and general GATs -> h(s) -> (mu, logvar) of q(z | s); see the module docstring."""

    def __init__(self, obs_dim: int, p: COREPParams) -> None:
        super().__init__()
        self.p = p
        self.nodes = nn.Linear(obs_dim, p.num_nodes * p.node_dim)
        self.core = GAT(p.node_dim, p.gat_hidden, p.embed_dim, p.heads)
        self.general = GAT(p.node_dim, p.gat_hidden, p.embed_dim, p.heads)
        self.mu = nn.Linear(p.embed_dim, p.latent_dim)
        self.logvar = nn.Linear(p.embed_dim, p.latent_dim)

    def forward(
        self, obs: torch.Tensor, freeze_core: bool = False
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """(mu (B, L), logvar (B, L), core nodes (B, N, C), general nodes (B, N, C)); `freeze_core` keeps the
        core GAT out of the graph (no gradient reaches it)."""
        x = torch.relu(self.nodes(obs)).view(obs.shape[0], self.p.num_nodes, self.p.node_dim)  # (B, N, F)
        edges = gumbel_edges(x, self.p.adj_threshold, self.p.adj_temperature)
        if freeze_core:
            with torch.no_grad():
                core = self.core(x, edges)
        else:
            core = self.core(x, edges)
        general = self.general(x, edges)
        h = core.mean(1) + general.mean(1)  # (B, C)
        return self.mu(h), self.logvar(h), core, general


def kl_standard_normal(mu: torch.Tensor, logvar: torch.Tensor) -> torch.Tensor:
    """KL(N(mu, diag exp(logvar)) || N(0, I)) per row, (B,): -1/2 sum(1 + logvar - mu^2 - exp(logvar))."""
    return -0.5 * (1 + logvar - mu.pow(2) - logvar.exp()).sum(-1)


def steady_td(history: list[float], recent: float, confidence: float) -> bool:
    """The guided update's test (the authors' learner.py): the mean of the newest `recent` share of `history`
    (at least one value) lies strictly inside mean +- confidence * std of all of it. False before 2 values."""
    if len(history) < 2:
        return False
    x = np.asarray(history, dtype=np.float64)
    mean, std = x.mean(), x.std()
    newest = x[-max(1, int(len(x) * recent)) :].mean()
    return bool(mean - confidence * std < newest < mean + confidence * std)


class COREP(PPO):
    """PPO on [s, mu(s), logvar(s)] with the dual-GAT VAE encoder and the guided update (module docstring)."""

    def __init__(self, ctx: ClassicContext, params: COREPParams) -> None:
        super().__init__(ctx, params)
        envs, p = ctx.envs, params
        self.act_dim = envs.n_actions if envs.discrete else envs.action_dim
        d = envs.obs_dim + 2 * p.latent_dim  # the policy's input
        if envs.discrete:
            self.actor = CategoricalPolicy(d, envs.n_actions, p.hidden, p.activation, p.ortho_init)
        else:
            self.actor = GaussianPolicy(d, envs.action_dim, p.hidden, p.activation, p.ortho_init, p.log_std_init)
        self.critic = mlp([d, *p.hidden, 1], p.activation, 1.0 if p.ortho_init else None)
        self.optimizer = adam([*self.actor.parameters(), *self.critic.parameters()], p.lr, p.adam_eps)
        action_shape = () if envs.discrete else (envs.action_dim,)
        self.rollout = Rollout.empty(p.n_steps, envs.num_envs, d, action_shape, envs.discrete)
        self.encoder = CausalOriginEncoder(envs.obs_dim, p)
        dz, ds, da = p.latent_dim, envs.obs_dim, self.act_dim
        self.state_decoder = mlp([dz + ds + da, p.decoder_hidden, p.decoder_hidden, ds], "relu")
        self.reward_decoder = mlp([dz + 2 * ds + da, p.decoder_hidden, p.decoder_hidden, 1], "relu")
        vae = [*self.encoder.parameters(), *self.state_decoder.parameters(), *self.reward_decoder.parameters()]
        self.vae_optimizer = adam(vae, p.vae_lr)
        self.next_obs = torch.zeros(p.n_steps, envs.num_envs, envs.obs_dim)  # (T, E, D): s' of each transition
        self.env_rewards = torch.zeros(p.n_steps, envs.num_envs)  # (T, E): r without the time-limit bootstrap
        self.td_history: deque[float] = deque(maxlen=p.td_buffer)
        self.freeze = False
        self.rng = np.random.default_rng(ctx.seed + 4242)

    def policy_input(self, obs: torch.Tensor) -> torch.Tensor:
        """(B, D) -> (B, D + 2L): the state and its causal-origin latent (mu, logvar), no gradient."""
        with torch.no_grad():
            mu, logvar, _, _ = self.encoder(obs)
        return torch.cat([obs, mu, logvar], dim=-1)

    @torch.no_grad()
    def collect(self) -> None:
        """n_steps vector steps; the rollout keeps the policy's input [s, mu, logvar] and s' for the VAE."""
        ro, gamma = self.rollout, self.p.gamma
        for t in range(self.p.n_steps):
            x = self.policy_input(torch.from_numpy(self.envs.obs))  # (E, D + 2L)
            action, logp = self.actor.sample(x)
            ro.obs[t], ro.actions[t], ro.log_probs[t], ro.values[t] = x, action, logp, self.value(x)
            step = self.envs.step(action.numpy())
            self.next_obs[t] = torch.from_numpy(step.final_obs)
            reward = torch.from_numpy(step.reward)
            self.env_rewards[t] = reward
            cut = step.truncated & ~step.terminated
            if cut.any():
                reward[cut] += gamma * self.value(self.policy_input(torch.from_numpy(step.final_obs[cut])))
            ro.rewards[t], ro.dones[t] = reward, torch.from_numpy(step.terminated | step.truncated)
        self.steps += self.p.n_steps * self.envs.num_envs

    def one_hot(self, actions: torch.Tensor) -> torch.Tensor:
        return F.one_hot(actions.long(), self.act_dim).float() if self.envs.discrete else actions

    def vae_loss(
        self, obs: torch.Tensor, actions: torch.Tensor, rewards: torch.Tensor, next_obs: torch.Tensor
    ) -> tuple[torch.Tensor, dict[str, float]]:
        """(loss, metrics) of one mini-batch of transitions (B, ...): the ELBO terms and the graph losses."""
        p = self.p
        mu, logvar, core, general = self.encoder(obs, self.freeze and p.guided)
        z = mu + torch.randn_like(mu) * (0.5 * logvar).exp()  # (B, L)
        a = self.one_hot(actions)
        state_loss = (self.state_decoder(torch.cat([z, obs, a], -1)) - next_obs).pow(2).mean(-1).mean()
        r_hat = self.reward_decoder(torch.cat([z, obs, a, next_obs], -1)).squeeze(-1)
        reward_loss = (r_hat - rewards).pow(2).mean()
        kl = kl_standard_normal(mu, logvar).mean()
        g = graph_losses(core, general, p.sim_threshold)
        loss = state_loss + reward_loss + p.kl_weight * kl
        loss = loss + p.graph_coef * g["graph"] + p.sparsity_coef * g["sparsity"] + p.mag_coef * g["mag"]
        metrics = {"vae/state": state_loss.item(), "vae/reward": reward_loss.item(), "vae/kl": kl.item()}
        return loss, metrics | {f"vae/{k}": v.item() for k, v in g.items()}

    def update_vae(self) -> dict[str, float]:
        """vae_epochs over the rollout's transitions in mini-batches; the core GAT learns unless frozen."""
        ro, n = self.rollout, self.rollout.rewards.numel()
        obs = ro.obs[..., : self.envs.obs_dim].flatten(0, 1)
        actions, next_obs, rewards = ro.actions.flatten(0, 1), self.next_obs.flatten(0, 1), self.env_rewards.flatten()
        params = self.vae_optimizer.param_groups[0]["params"]
        sums: dict[str, float] = {}
        count = 0
        for _ in range(self.p.vae_epochs):
            for idx in torch.randperm(n).split(self.p.batch_size):
                loss, m = self.vae_loss(obs[idx], actions[idx], rewards[idx], next_obs[idx])
                self.vae_optimizer.zero_grad(set_to_none=True)
                loss.backward()
                torch.nn.utils.clip_grad_norm_(params, self.p.vae_max_grad_norm)
                self.vae_optimizer.step()
                for k, v in m.items():
                    sums[k] = sums.get(k, 0.0) + v
                count += 1
        return {k: v / count for k, v in sums.items()}

    def guide(self, td: float) -> None:
        """Record the iteration's TD error; freeze the core GAT for the next VAE update while it is steady."""
        self.td_history.append(td)
        steady = steady_td(list(self.td_history), self.p.td_recent, self.p.confidence)
        self.freeze = steady and self.rng.random() > self.p.freeze_eps

    def iteration(self, want_metrics: bool) -> dict[str, float]:
        self.collect()
        lr, clip = self.schedules()
        for group in self.optimizer.param_groups:
            group["lr"] = lr
        with torch.no_grad():
            last = self.value(self.policy_input(torch.from_numpy(self.envs.obs)))
        adv, ret = self.rollout.advantages(last, self.p.gamma, self.p.gae_lambda)  # (T, E) each
        metrics = self.update(adv.flatten(), ret.flatten(), clip)
        frozen = float(self.freeze and self.p.guided)
        metrics |= self.update_vae()
        self.guide(metrics["loss/value"])
        if not want_metrics:
            return {}
        return {**metrics, "train/lr": lr, "train/clip": clip, "train/core_frozen": frozen}

    @torch.no_grad()
    def act(self, obs: np.ndarray, deterministic: bool) -> np.ndarray:
        x = self.policy_input(torch.from_numpy(obs))
        return (self.actor.mode(x) if deterministic else self.actor.sample(x)[0]).numpy()

    def modules(self) -> dict[str, nn.Module]:
        return {
            "actor": self.actor,
            "critic": self.critic,
            "encoder": self.encoder,
            "state_decoder": self.state_decoder,
            "reward_decoder": self.reward_decoder,
        }

    def state_dict(self) -> dict[str, Any]:
        return {
            **super().state_dict(),
            "vae_optimizer": self.vae_optimizer.state_dict(),
            "td_history": list(self.td_history),
            "freeze": self.freeze,
            "rng": self.rng.bit_generator.state,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        super().load_state_dict(state)
        self.vae_optimizer.load_state_dict(state["vae_optimizer"])
        self.td_history = deque(state["td_history"], maxlen=self.p.td_buffer)
        self.freeze = state["freeze"]
        self.rng.bit_generator.state = state["rng"]


@CLASSIC.register(
    "corep",
    params=COREPParams,
    paper=(papers.COREP, papers.GAT, papers.VARIBAD, papers.PPO),
    fidelity="reduced",
    departures=(
        "a dense graph-attention layer written in torch (GATConv's formula with self-loops) instead of "
        "torch_geometric, without the authors' attention dropout of 0.6",
        "the encoder sees the current state only (no VariBAD GRU over the trajectory with action and reward "
        "embeddings): the framework's evaluation gives `act` observations alone; q(z | s) is regularised toward "
        "N(0, I) (the authors: toward the previous step's posterior)",
        "the decoders reconstruct the transition the latent was computed at (s', r from z, s, a), not every "
        "transition of the trajectory",
        "the VAE trains on each PPO rollout (vae_epochs passes) rather than on a 10,000-trajectory buffer; the "
        "guided update's freeze applies to that VAE update (the authors' code passes it only when the RL loss "
        "reaches the encoder)",
        "ascent's reading of the guided update's TD error: the iteration's mean value loss, as in the authors' "
        "learner.py",
    ),
)
def corep(ctx: ClassicContext, params: COREPParams = COREPParams()) -> COREP:
    """COREP: PPO on [s, mu, logvar] of a dual-GAT (core + general) VAE encoder of the state; the core GAT is
    frozen while the TD error stays within mean +- confidence * std of its history (arXiv:2306.02747)."""
    return COREP(ctx, params)


corep.action_spaces = frozenset({"discrete", "continuous"})
corep.check = check

__all__ = ["COREP", "COREPParams", "GraphAttention", "corep", "gumbel_edges", "steady_td"]
