"""The attention model (Kool, van Hoof & Welling 2019, "Attention, Learn to Solve Routing Problems!",
arXiv:1803.08475) in its POMO configuration (Kwon et al. 2020, "POMO: Policy Optimization with Multiple Optima for
Reinforcement Learning", arXiv:2010.16011).

Encoder (Kool et al., section 3.1): a linear embedding of each node (TSP: (x, y); CVRP: customers (x, y, demand),
the depot (x, y) by its own linear map), then L layers of `h = Norm(h + MHA(h)); h = Norm(h + FF(h))`.

Decoder (section 3.2), one step for all (B, S) partial solutions at once: a context query, a masked multi-head
glimpse over the node embeddings, then single-head compatibilities clipped with C * tanh (C = 10) and masked to
-inf: `p(a) = softmax(C tanh(q_g . k_a / sqrt(d)))`. The context is

- TSP: [h_first, h_current] (a learned placeholder before the first step), as POMO uses it;
- CVRP: [h_current, remaining load];

plus the mean node embedding when `graph_context` (Kool's AM; POMO drops it, and so does RL4CO's POMO default).

Departures: POMO's defaults here (6 layers, instance norm, no graph context); the keys, values and logit keys are
computed once per instance and shared by its S solutions (B, H, S, N) instead of repeated S times (RL4CO repeats
the instance S times); same arithmetic, less memory and time.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal, Optional

import torch
import torch.nn.functional as F
from torch import nn

from ascent.co.envs import RouteState
from ascent.papers import ATTENTION_MODEL, POMO
from ascent.registry import Registry

CO_POLICIES: Registry = Registry("co policy")
"""Routing policies: name -> factory(problem, params) -> module with `encode` and `log_probs`."""


@dataclass(frozen=True)
class AttentionModelParams:
    """Size and shape of the attention model."""

    embed_dim: int = 128
    """d, the node embedding width (Kool et al.: 128)."""
    layers: int = 6
    """Encoder layers (Kool's AM: 3; POMO: 6)."""
    heads: int = 8
    """Attention heads in the encoder and the decoder's glimpse."""
    ff_hidden: int = 512
    """Hidden width of each encoder layer's feed-forward block."""
    norm: Literal["instance", "batch"] = "instance"
    """Normalisation in the encoder: 'instance' (POMO) or 'batch' (Kool's AM)."""
    tanh_clip: float = 10.0
    """C in C * tanh(.) on the logits (Kool et al. 2019, Bello et al. 2016)."""
    graph_context: bool = False
    """Add the mean node embedding to the decoder's query (Kool's AM: true; POMO: false)."""

    def __post_init__(self) -> None:
        if self.embed_dim <= 0 or self.layers < 0 or self.heads <= 0 or self.ff_hidden <= 0:
            raise ValueError("embed_dim, heads and ff_hidden must be positive, layers >= 0")
        if self.embed_dim % self.heads:
            raise ValueError(f"embed_dim {self.embed_dim} must be a multiple of heads {self.heads}")
        if self.tanh_clip <= 0:
            raise ValueError(f"tanh_clip must be positive, got {self.tanh_clip}")


class Norm(nn.Module):
    """Instance norm over the nodes of each instance, or batch norm over all nodes of the batch, per feature."""

    def __init__(self, d: int, kind: str) -> None:
        super().__init__()
        self.norm = nn.InstanceNorm1d(d, affine=True) if kind == "instance" else nn.BatchNorm1d(d, affine=True)
        self.kind = kind

    def forward(self, h: torch.Tensor) -> torch.Tensor:  # (B, N, d)
        if self.kind == "instance":
            return self.norm(h.transpose(1, 2)).transpose(1, 2)
        return self.norm(h.reshape(-1, h.shape[-1])).view_as(h)


class EncoderLayer(nn.Module):
    """`h = Norm(h + MHA(h)); h = Norm(h + FF(h))` (Kool et al. 2019, equations 2-4)."""

    def __init__(self, p: AttentionModelParams) -> None:
        super().__init__()
        self.heads = p.heads
        self.qkv = nn.Linear(p.embed_dim, 3 * p.embed_dim, bias=False)
        self.out = nn.Linear(p.embed_dim, p.embed_dim)
        self.norm1, self.norm2 = Norm(p.embed_dim, p.norm), Norm(p.embed_dim, p.norm)
        self.ff = nn.Sequential(nn.Linear(p.embed_dim, p.ff_hidden), nn.ReLU(), nn.Linear(p.ff_hidden, p.embed_dim))

    def forward(self, h: torch.Tensor) -> torch.Tensor:  # (B, N, d)
        B, N, d = h.shape
        q, k, v = self.qkv(h).view(B, N, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)  # (B, H, N, dk)
        att = F.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(B, N, d)
        h = self.norm1(h + self.out(att))
        return self.norm2(h + self.ff(h))


@dataclass
class Encoded:
    """What the decoder needs of each instance, computed once per instance (shared by its S solutions)."""

    nodes: torch.Tensor
    """(B, N, d) node embeddings."""
    graph: torch.Tensor
    """(B, d) projected mean embedding (zeros without graph context)."""
    keys: torch.Tensor
    """(B, H, N, dk) glimpse keys."""
    values: torch.Tensor
    """(B, H, N, dk) glimpse values."""
    logit_keys: torch.Tensor
    """(B, N, d) keys of the final single-head compatibility, with the glimpse's output projection folded in:
    `(W_o g) . k = g . (W_o^T k)`, so a step multiplies by no (d, d) matrix."""
    query_current: torch.Tensor
    """(B, N, d) the current node's share of the context query, `W_c[:, current part] h_i`, for every node i."""
    query_first: Optional[torch.Tensor]
    """TSP: (B, N, d) the first node's share; CVRP: None."""
    query_load: Optional[torch.Tensor]
    """CVRP: (d,) the query's weight on the remaining load; TSP: None."""
    query_placeholder: Optional[torch.Tensor]
    """TSP: (d,) the query of the learned placeholder context (before the first node); CVRP: None."""


class Decoder(nn.Module):
    """The decoder's parameters (Kool et al. 2019, section 3.2): node projections, context and glimpse; one per
    agent of a population (Poppy shares the encoder and clones this)."""

    def __init__(self, problem: str, p: AttentionModelParams) -> None:
        super().__init__()
        d = p.embed_dim
        self.problem, self.p = problem, p
        self.project_nodes = nn.Linear(d, 3 * d, bias=False)  # glimpse keys, values, logit keys
        self.project_graph = nn.Linear(d, d, bias=False) if p.graph_context else None
        ctx = d + 1 if problem == "cvrp" else 2 * d
        self.project_context = nn.Linear(ctx, d, bias=False)
        self.project_glimpse = nn.Linear(d, d, bias=False)
        self.placeholder = nn.Parameter(torch.empty(2 * d).uniform_(-1, 1)) if problem == "tsp" else None

    def project(self, h: torch.Tensor) -> Encoded:
        """Node embeddings (B, N, d) -> this decoder's per-instance keys, values and query shares. The context
        projection is linear in its parts, `W_c [h_first; h_current] = W_first h_first + W_current h_current`, so
        each part is projected once per node here and gathered per step (as POMO's code does for h_first)."""
        B, N, d = h.shape
        H = self.p.heads
        k, v, lk = self.project_nodes(h).chunk(3, dim=-1)
        split = lambda t: t.view(B, N, H, d // H).transpose(1, 2)  # noqa: E731  (B, H, N, dk)
        graph = self.project_graph(h.mean(1)) if self.project_graph is not None else h.new_zeros(B, d)
        W = self.project_context.weight  # (d, ctx)
        logit_keys = lk @ self.project_glimpse.weight  # (B, N, d): W_o folded into the keys
        if self.problem == "cvrp":
            return Encoded(h, graph, split(k), split(v), logit_keys, h @ W[:, :d].T, None, W[:, d], None)
        first, current = h @ W[:, :d].T, h @ W[:, d:].T
        return Encoded(h, graph, split(k), split(v), logit_keys, current, first, None, W @ self.placeholder)

    def query(self, enc: Encoded, state: RouteState) -> torch.Tensor:
        """(B, S, d) the context query of each partial solution: Kool et al.'s `W_c h_(c)` (+ the graph part)."""
        B, S = state.current.shape
        d = enc.nodes.shape[-1]
        gather = lambda t, idx: t.gather(1, idx.clamp(min=0).unsqueeze(-1).expand(B, S, d))  # noqa: E731
        q = gather(enc.query_current, state.current) + enc.graph.unsqueeze(1)
        if self.problem == "cvrp":
            return q + state.load.unsqueeze(-1) * enc.query_load
        q = q + gather(enc.query_first, state.first)
        before = state.current < 0  # no node yet: the placeholder's query
        if before.any():
            q = torch.where(before.unsqueeze(-1), enc.query_placeholder + enc.graph.unsqueeze(1), q)
        return q

    def log_probs(
        self,
        enc: Encoded,
        state: RouteState,
        query_shift: Optional[torch.Tensor] = None,
        glimpse_shift: Optional[torch.Tensor] = None,
    ) -> torch.Tensor:
        """(B, S, N) log-probabilities of the next action (-inf where masked). `query_shift` and `glimpse_shift`,
        (B, S, d) each, are added to the context query and to the glimpse (a latent-conditioned decoder,
        `ascent.co.compass`)."""
        q = self.query(enc, state)  # (B, S, d)
        if query_shift is not None:
            q = q + query_shift
        B, S, d = q.shape
        H = self.p.heads
        qh = q.view(B, S, H, d // H).transpose(1, 2)  # (B, H, S, dk)
        # the masked glimpse as plain matmuls: with a few dozen nodes they beat the fused CPU attention kernel
        compat = (qh @ enc.keys.transpose(-1, -2)) / math.sqrt(d // H)  # (B, H, S, N)
        attn = compat.masked_fill(~state.mask.unsqueeze(1), float("-inf")).softmax(dim=-1)
        g = (attn @ enc.values).transpose(1, 2).reshape(B, S, d)  # (B, S, d), W_o folded into the logit keys
        if glimpse_shift is not None:
            g = g + glimpse_shift
        logits = torch.einsum("bsd,bnd->bsn", g, enc.logit_keys) / math.sqrt(d)
        logits = self.p.tanh_clip * torch.tanh(logits)
        return logits.masked_fill(~state.mask, float("-inf")).log_softmax(dim=-1)


class Encoder(nn.Module):
    """Node embeddings and L attention layers (Kool et al. 2019, section 3.1)."""

    def __init__(self, problem: str, p: AttentionModelParams) -> None:
        super().__init__()
        self.problem = problem
        self.embed = nn.Linear(3 if problem == "cvrp" else 2, p.embed_dim)
        self.embed_depot = nn.Linear(2, p.embed_dim) if problem == "cvrp" else None
        self.layers = nn.ModuleList(EncoderLayer(p) for _ in range(p.layers))

    def forward(self, locs: torch.Tensor, demand: torch.Tensor | None = None) -> torch.Tensor:
        """Coordinates (B, N, 2) and, for CVRP, normalised demands (B, N) -> node embeddings (B, N, d)."""
        if self.problem == "cvrp":
            customers = self.embed(torch.cat([locs, demand[..., None]], -1)[:, 1:])
            h = torch.cat([self.embed_depot(locs[:, :1]), customers], 1)
        else:
            h = self.embed(locs)
        for layer in self.layers:
            h = layer(h)
        return h


class AttentionModel(nn.Module):
    """Encoder-decoder policy over routing instances; `encode` once, then `log_probs` per step."""

    agents = 1
    """Policies in the model (a population has several; see `ascent.co.population`)."""

    def __init__(self, problem: str, p: AttentionModelParams = AttentionModelParams()) -> None:
        super().__init__()
        self.problem, self.p = problem, p
        self.encoder = Encoder(problem, p)
        self.decoder = Decoder(problem, p)

    def encode(self, locs: torch.Tensor, demand: torch.Tensor | None = None) -> Encoded:
        """Coordinates (B, N, 2) and, for CVRP, normalised demands (B, N) -> the decoder's per-instance tensors."""
        return self.decoder.project(self.encoder(locs, demand))

    def log_probs(self, enc: Encoded, state: RouteState) -> torch.Tensor:
        """(B, S, N) log-probabilities of the next action (-inf where masked)."""
        return self.decoder.log_probs(enc, state)


@CO_POLICIES.register(
    "attention_model",
    params=AttentionModelParams,
    paper=(ATTENTION_MODEL, POMO),
    fidelity="faithful",
    departures=(
        "defaults are POMO's (6 layers, instance norm, no graph context); Kool's AM is layers=3, norm=batch, "
        "graph_context=true",
        "each instance's keys and values are shared by its S solutions instead of repeated S times (same arithmetic)",
        "encoder attention projections have no bias (Kool's and POMO's code); RL4CO's have one (+2,304 parameters)",
    ),
)
def attention_model(problem: str, params: AttentionModelParams = AttentionModelParams()) -> AttentionModel:
    """The attention model (Kool et al. 2019, arXiv:1803.08475) with POMO's defaults (Kwon et al. 2020,
    arXiv:2010.16011): 6 encoder layers, instance norm, no graph context; `layers=3, norm=batch, graph_context=true`
    gives Kool's AM."""
    return AttentionModel(problem, params)
