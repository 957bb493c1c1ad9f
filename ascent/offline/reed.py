"""REED, Rewards Encoding Environment Dynamics (Metcalf, Sarabia, Mackraz & Theobald 2022/2024, "Rewards Encoding
Environment Dynamics Improves Preference-based Reinforcement Learning", arXiv:2211.06527; extended as "Sample-
Efficient Preference-based RL with Dynamics Aware Rewards", arXiv:2402.17975), offline.

The preference-based reward model is built on a state-action representation z_sa trained first by a self-supervised
*temporal consistency* task on every transition of the dataset (labelled or not), then fine-tuned on the preferences:
    encoders:   e_s = f_s(s), e_a = f_a(a), z_sa = g([e_s, e_a])                   (LeakyReLU MLPs)
    SSL (SimSiam's, Chen & He 2021, arXiv:2011.10566):  p = h(proj(d(z_sa))),  z' = proj(f_s(s'))  (no gradient)
                J_ssl = -mean cos(p, stopgrad(z'))       d: next-state-embedding predictor, h: predictor head
    reward:     r(s, a) = tanh(w . z_sa + b), initialised from the SSL-trained f_s, f_a, g; all fitted by the
                Bradley-Terry loss on the labelled pairs (ascent/offline/preferences.py)
then IQL on the relabelled dataset, exactly as the two-stage baseline `pref_iql` (which REED subclasses, overriding
its one `fit_reward` hook). With `ssl_steps=0` it is the same architecture without the representation (an ablation).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from ascent.classic.base import CLASSIC, ClassicContext
from ascent.classic.networks import adam
from ascent.offline.pref_iql import PrefIQL, PrefIQLParams
from ascent.offline.preferences import SegmentPairs, fit_bradley_terry
from ascent.registry import Paper

REED_PAPER = Paper(
    "REED",
    "Metcalf, Sarabia, Mackraz & Theobald",
    2022,
    "Rewards Encoding Environment Dynamics Improves Preference-based Reinforcement Learning",
    "arXiv:2211.06527",
)


@dataclass(frozen=True)
class REEDParams(PrefIQLParams):
    """REED's reward model (temporal-consistency representation, then Bradley-Terry), then IQL (module docstring).
    `reward_hidden` are the widths of the state-action trunk g."""

    ssl_steps: int = 2000
    """Adam steps of the temporal-consistency task on the dataset's transitions before the preferences, >= 0
    (0: the same network trained on preferences only)."""
    ssl_batch: int = 256
    """Transitions per self-supervised step."""
    ssl_lr: float = 3e-4
    """Adam learning rate of the self-supervised task, > 0."""
    state_embed: int = 64
    """Width of the state embedding f_s(s)."""
    action_embed: int = 64
    """Width of the action embedding f_a(a)."""
    projection: int = 32
    """Width of the space in which predicted and actual next-state embeddings are compared."""

    def __post_init__(self) -> None:
        PrefIQLParams.__post_init__(self)
        if self.ssl_steps < 0 or self.ssl_batch < 1 or not self.ssl_lr > 0:
            raise ValueError(f"ssl_steps >= 0, ssl_batch >= 1, ssl_lr > 0; got {self.ssl_steps}, {self.ssl_batch}, "
                             f"{self.ssl_lr}")  # fmt: skip
        if min(self.state_embed, self.action_embed, self.projection) < 1:
            raise ValueError("state_embed, action_embed and projection must be >= 1")


def leaky_mlp(sizes: list[int]) -> nn.Sequential:
    """Linear layers of `sizes`, each followed by LeakyReLU(0.01) (REED's encoders)."""
    layers: list[nn.Module] = []
    for n_in, n_out in zip(sizes[:-1], sizes[1:]):
        layers += [nn.Linear(n_in, n_out), nn.LeakyReLU(0.01)]
    return nn.Sequential(*layers)


def simsiam_loss(pred: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """-mean cos(pred, stopgrad(target)) over (B, P) rows (SimSiam's D, Chen & He 2021).

    >>> float(simsiam_loss(torch.tensor([[1.0, 0.0], [0.0, 2.0]]), torch.tensor([[3.0, 0.0], [1.0, 0.0]])))
    -0.5
    """
    return -F.cosine_similarity(pred, target.detach(), dim=-1).mean()


class REEDRewardModel(nn.Module):
    """f_s, f_a, g and the reward head; d, proj and h for the temporal-consistency task (module docstring)."""

    def __init__(self, obs_dim: int, action_dim: int, p: REEDParams) -> None:
        super().__init__()
        trunk = p.reward_hidden
        self.state_enc = leaky_mlp([obs_dim, p.state_embed])
        self.action_enc = leaky_mlp([action_dim, p.action_embed])
        self.trunk = leaky_mlp([p.state_embed + p.action_embed, *trunk])
        self.head = nn.Linear(trunk[-1], 1)
        self.next_state = nn.Linear(trunk[-1], p.state_embed)
        self.project = nn.Linear(p.state_embed, p.projection)
        self.predict = nn.Sequential(nn.Linear(p.projection, 2 * p.projection), nn.ReLU(),
                                     nn.Linear(2 * p.projection, p.projection))  # fmt: skip

    def z_sa(self, obs: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
        return self.trunk(torch.cat([self.state_enc(obs), self.action_enc(actions)], -1))  # (..., W)

    def forward(self, obs: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
        return torch.tanh(self.head(self.z_sa(obs, actions))).squeeze(-1)  # (...,)

    def consistency_loss(self, obs: torch.Tensor, actions: torch.Tensor, next_obs: torch.Tensor) -> torch.Tensor:
        pred = self.predict(self.project(self.next_state(self.z_sa(obs, actions))))  # (B, P)
        with torch.no_grad():
            target = self.project(self.state_enc(next_obs))  # (B, P)
        return simsiam_loss(pred, target)

    def reward_parameters(self) -> list[nn.Parameter]:
        """What the preferences train: the encoders, the trunk and the reward head."""
        mods = (self.state_enc, self.action_enc, self.trunk, self.head)
        return [q for m in mods for q in m.parameters()]


def fit_consistency(model: REEDRewardModel, obs, actions, next_obs, steps: int, batch: int, lr: float,
                    rng: np.random.Generator) -> list[float]:  # fmt: skip
    """`steps` Adam steps of the temporal-consistency loss on mini-batches of the (N, ...) transitions; the losses."""
    opt, losses = adam(list(model.parameters()), lr), []
    for _ in range(steps):
        i = torch.from_numpy(rng.integers(0, len(obs), size=batch))
        loss = model.consistency_loss(obs[i], actions[i], next_obs[i])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        losses.append(float(loss.detach()))
    return losses


class REED(PrefIQL):
    """PrefIQL whose reward model is REED's (temporal-consistency pretraining on all transitions, then preferences)."""

    name = "reed"

    def fit_reward(self, pairs: SegmentPairs, rng: np.random.Generator) -> nn.Module:
        p: Any = self.p
        model = REEDRewardModel(self.obs_dim, self.action_dim, p).to(self.ctx.device)
        ssl = fit_consistency(model, self.t_obs, self.t_actions, self.t_next_obs, p.ssl_steps, p.ssl_batch, p.ssl_lr,
                              rng)  # fmt: skip
        self.ssl_losses = ssl
        fit_bradley_terry(model, self.t_obs, self.t_actions, pairs, p.reward_steps, p.reward_batch, p.reward_lr, rng,
                          params=model.reward_parameters())  # fmt: skip
        return model

    def iteration(self, want_metrics: bool) -> dict[str, float]:
        metrics = super().iteration(want_metrics)
        if want_metrics and self.ssl_losses:
            metrics["reward_model/ssl_loss_final"] = float(np.mean(self.ssl_losses[-50:]))
        return metrics


@CLASSIC.register(
    "reed",
    params=REEDParams,
    paper=REED_PAPER,
    fidelity="reduced",
    departures=(
        "offline: one round of self-supervised training on the whole dataset, then the preferences (the paper "
        "alternates the two inside PEBBLE / PrefPPO as the replay buffer grows, and trains SAC / PPO online)",
        "IQL on the learned rewards as the policy learner (the two-stage `pref_iql` baseline, same settings)",
        "vector observations only; SimSiam's predictor without batch norm; no image augmentations",
        "synthetic preferences from a scripted teacher on the dataset's true segment returns (optionally flipped)",
    ),
)
def reed(ctx: ClassicContext, params: REEDParams = REEDParams()) -> REED:
    """REED (Metcalf et al. 2022, arXiv:2211.06527): SimSiam next-state consistency of z_sa on all transitions,
    then r(s, a) = tanh(w . z_sa) by Bradley-Terry on the preferences, then IQL. J_ssl = -cos(p, stopgrad(z'))."""
    return REED(ctx, params)


reed.action_spaces = frozenset({"continuous"})
