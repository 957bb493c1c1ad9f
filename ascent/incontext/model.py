"""The in-context policy: a causal transformer over (observation, previous action, previous reward) tokens.

The trunk is ascent's scratch language model (`ascent.policy.model.scratch_model`: a randomly initialised
Qwen2/Llama decoder with rotary positions and a causal SDPA mask) driven through `inputs_embeds`; its token
embedding table is unused. Step t of a history becomes ONE token

    x_t = E_obs[o_t] + E_act[a_{t-1}] + W_r r_{t-1} + E_step[t mod H]

(a_{-1} is a reserved "none" action, r_{-1} = 0; H the episode length), and the action head reads the trunk's
output at x_t as logits of p(a_t | x_<=t). This is Algorithm Distillation's across-episode model (Laskin et al. 2022,
arXiv:2210.14215) with one token per step instead of the paper's separate observation, action and reward tokens:
the same information reaches position t (a_{t-1}, r_{t-1} on it; earlier ones by attention), at a third of the
sequence length. The within-episode step embedding is a departure too (the paper's model infers episode
boundaries from the context); it is a 20- or 50-entry table. On the grids (`grid` = the side) a cell is embedded as
the sum of a row and a column embedding, the same information as the cell index with the geometry given, which a
model trained for minutes on a CPU (instead of the paper's hours on accelerators) cannot afford to learn.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ascent.config.schema import ModelConfig
from ascent.policy.model import scratch_model


@dataclass(frozen=True)
class TransformerParams:
    hidden_size: int = 64
    """Width of the trunk."""
    num_layers: int = 3
    """Decoder layers."""
    num_heads: int = 4
    """Attention heads."""
    intermediate_size: int = 256
    """MLP width."""
    arch: str = "llama"
    """Trunk architecture: llama or qwen2 (ascent's scratch models)."""

    def __post_init__(self) -> None:
        if self.hidden_size % self.num_heads:
            raise ValueError(f"hidden_size {self.hidden_size} must be a multiple of num_heads {self.num_heads}")
        if self.arch not in ("llama", "qwen2"):
            raise ValueError(f"arch must be llama or qwen2, got {self.arch!r}")


class InContextTransformer(torch.nn.Module):
    """Logits (B, T, A) of a_t for histories given as obs, prev_actions, prev_rewards, steps, each (B, T)."""

    def __init__(
        self, num_obs: int, num_actions: int, horizon: int, context: int, p: TransformerParams, grid: int = 0
    ) -> None:
        super().__init__()
        cfg = ModelConfig(
            source="scratch",
            arch=p.arch,  # type: ignore[arg-type]
            hidden_size=p.hidden_size,
            num_layers=p.num_layers,
            num_heads=p.num_heads,
            num_kv_heads=p.num_heads,
            intermediate_size=p.intermediate_size,
            max_position_embeddings=max(context, 16),
        )
        self.trunk = scratch_model(cfg, vocab_size=2, bos=0, eos=0, pad=0).model  # the decoder, no LM head
        d = p.hidden_size
        self.num_actions, self.horizon, self.context = num_actions, horizon, context
        self.grid = grid
        self.obs_emb = torch.nn.Embedding(num_obs if not grid else 2 * grid, d)  # grid: row and column tables
        self.act_emb = torch.nn.Embedding(num_actions + 1, d)  # index num_actions: "no previous action"
        self.rew_emb = torch.nn.Linear(1, d)
        self.step_emb = torch.nn.Embedding(horizon, d)
        self.head = torch.nn.Linear(d, num_actions)
        for emb in (self.obs_emb, self.act_emb, self.step_emb):
            torch.nn.init.normal_(emb.weight, std=0.02)

    def forward(
        self, obs: torch.Tensor, prev_actions: torch.Tensor, prev_rewards: torch.Tensor, steps: torch.Tensor
    ) -> torch.Tensor:
        if self.grid:  # a cell index o = row * size + col, embedded as E[row] + E[size + col]
            obs_x = self.obs_emb(obs // self.grid) + self.obs_emb(self.grid + obs % self.grid)
        else:
            obs_x = self.obs_emb(obs)
        x = (
            obs_x + self.act_emb(prev_actions) + self.rew_emb(prev_rewards.unsqueeze(-1)) + self.step_emb(steps)
        )  # (B, T, d)
        h = self.trunk(inputs_embeds=x, use_cache=False).last_hidden_state  # (B, T, d), causal
        return self.head(h)  # (B, T, A)
