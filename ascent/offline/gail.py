"""GAIL, generative adversarial imitation learning (Ho & Ermon 2016, "Generative Adversarial Imitation Learning",
arXiv:1606.03476), on the classic track: PPO (`ascent.classic.ppo`) learning from a discriminator's reward instead
of the environment's, against expert demonstrations from `classic.dataset` (e.g. `ascent collect RUN --policy
run-checkpoint --level expert`).

A discriminator D(s, a) = sigmoid(f(s, a)) tells expert pairs (label 1) from the policy's (label 0):
    J(D) = -mean_expert log D(s, a) - mean_policy log(1 - D(s, a))
and the policy maximises the return of r(s, a) = -log(1 - D(s, a)) = softplus(f(s, a)) (the cost log D of the
paper's policy-as-generator convention, with the labels swapped so the reward is positive: expert-like pairs
earn more). One iteration: a PPO rollout whose rewards are r under the current D (PPO's `reward` hook), PPO's
epochs on it, then `disc_epochs` passes of D over the rollout against as many expert pairs, sampled uniformly
from the first `demo_episodes` episodes of the dataset. The environment's own reward is never seen by the learner
(it is still reported as episode/return).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from ascent import papers
from ascent.classic.base import CLASSIC, ClassicContext
from ascent.classic.networks import adam, mlp
from ascent.classic.ppo import PPO, PPOParams, check
from ascent.offline.dataset import DatasetError, flatten, read_episodes


@dataclass(frozen=True)
class GAILParams(PPOParams):
    """GAIL (Ho & Ermon 2016, arXiv:1606.03476): PPO's parameters (above) and the discriminator's."""

    demo_episodes: int = 0
    """Expert episodes of classic.dataset used, the first ones (0: all of them), >= 0."""
    disc_hidden: list[int] = field(default_factory=lambda: [64, 64])
    """Hidden widths of the discriminator (tanh)."""
    disc_lr: float = 3e-4
    """Adam learning rate of the discriminator, > 0."""
    disc_epochs: int = 1
    """Passes of the discriminator over each rollout (mini-batches of disc_batch_size policy + expert pairs), >= 1."""
    disc_batch_size: int = 256
    """Policy pairs per discriminator mini-batch (as many expert pairs beside them), >= 1."""

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.demo_episodes < 0 or self.disc_epochs < 1 or self.disc_batch_size < 1 or not self.disc_lr > 0:
            raise ValueError("demo_episodes must be >= 0, disc_epochs and disc_batch_size >= 1, disc_lr > 0")
        if not self.disc_hidden or min(self.disc_hidden) <= 0:
            raise ValueError(f"disc_hidden must list positive layer widths, got {self.disc_hidden}")


def discriminator_loss(expert_logits: torch.Tensor, policy_logits: torch.Tensor) -> torch.Tensor:
    """-mean log sigmoid(f_expert) - mean log(1 - sigmoid(f_policy)).

    >>> round(float(discriminator_loss(torch.tensor([0.0]), torch.tensor([0.0]))), 4)  # 2 log 2
    1.3863
    """
    expert = F.binary_cross_entropy_with_logits(expert_logits, torch.ones_like(expert_logits))
    return expert + F.binary_cross_entropy_with_logits(policy_logits, torch.zeros_like(policy_logits))


def gail_reward(logits: torch.Tensor) -> torch.Tensor:
    """-log(1 - sigmoid(f)) = softplus(f), computed stably.

    >>> [round(float(r), 4) for r in gail_reward(torch.tensor([0.0, 2.0]))]  # log 2, -log(1 - 0.8808)
    [0.6931, 2.1269]
    """
    return F.softplus(logits)


class GAIL(PPO):
    """PPO on the discriminator's reward (see the module docstring)."""

    def __init__(self, ctx: ClassicContext, params: GAILParams) -> None:
        super().__init__(ctx, params)
        envs = ctx.envs
        self.in_dim = envs.obs_dim + (envs.n_actions if envs.discrete else envs.action_dim)
        self.disc = mlp([self.in_dim, *params.disc_hidden, 1], "tanh").to(ctx.device)
        self.disc_opt = adam(list(self.disc.parameters()), params.disc_lr)
        self.expert_obs, self.expert_actions = demonstrations(ctx, params.demo_episodes)
        self.rng = np.random.default_rng(ctx.seed)

    def features(self, obs: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
        """[s, a] with discrete actions one-hot: (B, D + A)."""
        if self.envs.discrete:
            actions = F.one_hot(actions.long().reshape(-1), self.envs.n_actions).float()
        return torch.cat([obs, actions.reshape(obs.shape[0], -1).float()], dim=-1)

    @torch.no_grad()
    def reward(self, obs: torch.Tensor, action: torch.Tensor, step: Any) -> torch.Tensor:
        return gail_reward(self.disc(self.features(obs, action)).squeeze(-1))  # (E,)

    def iteration(self, want_metrics: bool) -> dict[str, float]:
        metrics = super().iteration(want_metrics)
        d = self.update_discriminator()
        return {**metrics, **d} if want_metrics else {}

    def update_discriminator(self) -> dict[str, float]:
        """disc_epochs passes over the rollout's pairs against as many expert pairs."""
        ro = self.rollout
        obs, actions = ro.obs.flatten(0, 1), ro.actions.flatten(0, 1)
        n, B = obs.shape[0], self.p.disc_batch_size
        for _ in range(self.p.disc_epochs):
            for idx in torch.randperm(n).split(B):
                e = torch.from_numpy(self.rng.integers(0, len(self.expert_obs), size=len(idx)))
                expert = self.disc(self.features(self.expert_obs[e], self.expert_actions[e])).squeeze(-1)
                policy = self.disc(self.features(obs[idx], actions[idx])).squeeze(-1)
                loss = discriminator_loss(expert, policy)
                self.disc_opt.zero_grad(set_to_none=True)
                loss.backward()
                self.disc_opt.step()
        with torch.no_grad():
            acc = 0.5 * ((expert > 0).float().mean() + (policy < 0).float().mean())
        return {"loss/discriminator": float(loss.detach()), "train/disc_accuracy": float(acc)}

    def modules(self) -> dict[str, torch.nn.Module]:
        return {**super().modules(), "discriminator": self.disc}

    def state_dict(self) -> dict[str, Any]:
        return {
            **super().state_dict(),
            "disc_optimizer": self.disc_opt.state_dict(),
            "rng": self.rng.bit_generator.state,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        super().load_state_dict(state)
        self.disc_opt.load_state_dict(state["disc_optimizer"])
        self.rng.bit_generator.state = state["rng"]


def demonstrations(ctx: ClassicContext, episodes: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(observations (N, D), actions (N,) or (N, A)) of the first `episodes` episodes of classic.dataset."""
    if not ctx.dataset:
        raise DatasetError(
            "classic.dataset: gail imitates expert demonstrations; set classic.dataset=DIR (a Minari dataset, e.g. "
            "`ascent collect RUN --policy run-checkpoint --level expert`)"
        )
    eps, _, folder = read_episodes(ctx.dataset)
    if eps[0].observations.shape[1] != ctx.envs.obs_dim:
        raise DatasetError(f"{folder}: field 'observations': size {eps[0].observations.shape[1]}, the env's is "
                           f"{ctx.envs.obs_dim}")  # fmt: skip
    chosen = eps[:episodes] if episodes else eps
    data = flatten(chosen, ctx.envs.discrete)
    return torch.from_numpy(data["obs"]), torch.from_numpy(data["actions"])


@CLASSIC.register(
    "gail",
    params=GAILParams,
    paper=papers.GAIL,
    fidelity="faithful",
    departures=(
        "PPO (clipped surrogate, GAE) instead of the paper's TRPO for the policy step: the classic track's policy "
        "optimiser; the paper's argument needs only a policy-gradient step on the discriminator's cost",
        "no causal-entropy term (the paper's lambda H(pi), 0 in most of its experiments); PPO's ent_coef plays "
        "that role when set",
        "rewards come from the discriminator before this iteration's update (it is updated after PPO's epochs)",
    ),
)
def gail(ctx: ClassicContext, params: GAILParams = GAILParams()) -> GAIL:
    """GAIL (Ho & Ermon 2016, arXiv:1606.03476): PPO on r = -log(1 - D(s, a)), D trained on classic.dataset's demos.

    D: -mean_expert log D - mean_policy log(1 - D); the policy: PPO on softplus(f(s, a)).
    """
    return GAIL(ctx, params)


gail.action_spaces = frozenset({"discrete", "continuous"})
gail.check = check
