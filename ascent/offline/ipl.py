"""IPL, Inverse Preference Learning (Hejna & Sadigh 2023, "Inverse Preference Learning: Preference-based RL without
a Reward Function", NeurIPS 2023, arXiv:2305.15363), its IQL form (IPL-IQL).

No reward model: for a fixed policy the Q-function determines the reward through the inverse Bellman operator, so
the preference likelihood is written with the *implied* reward r_Q(s, a) = Q(s, a) - gamma V(s') and Q is fitted to
the preferences directly. One gradient step on P labelled segment pairs (ascent/offline/preferences.py) plus B
unlabelled transitions of the dataset:
    V:      J(V) = mean L2_tau(min_j Q'_j(s, a) - V(s))                      (IQL's expectile, over all transitions)
    Q:      r_i = Q_i(s, a) - gamma (1 - terminated) clip(V(s'), +-1 / (c (1 - gamma)))   (V after this step's update)
            J(Q_i) = BCE(sigmoid(sum_t r_i(sigma_1) - sum_t r_i(sigma_2)), y) + c mean r_i^2      (c = chi2_coeff)
    policy: J(pi) = -mean min(exp(beta (min_j Q'_j(s, a) - V(s))), max_weight) log pi(a|s)        (IQL's AWR)
then Polyak averaging of the target critics. The chi^2 term (a convex regulariser on the implied reward, over the
labelled and the unlabelled transitions) makes the optimum unique and keeps Q bounded; the clip of V(s') is the
bound it implies (the authors' `target_clipping`). As in the authors' code (github.com/jhejna/inverse-preference-
learning, `research/algs/ipl_iql.py`): each critic has its own preference loss, the chi^2 and value losses average
over every transition of the batch, the advantage uses the target critics' min.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from torch import nn

from ascent.classic.base import CLASSIC, ClassicContext
from ascent.classic.networks import TwinQ, adam
from ascent.offline.base import Batch, OfflineAlgorithm, check_common, cosine_lr
from ascent.offline.iql import awr_weights, expectile_loss
from ascent.offline.networks import GaussianActor, ValueNet
from ascent.offline.pref_iql import make_preferences
from ascent.offline.preferences import PreferenceFields, preference_accuracy, preference_loss
from ascent.registry import Paper

IPL_PAPER = Paper(
    "IPL",
    "Hejna & Sadigh",
    2023,
    "Inverse Preference Learning: Preference-based RL without a Reward Function (NeurIPS 2023)",
    "arXiv:2305.15363",
)


@dataclass(frozen=True)
class IPLParams(PreferenceFields):
    """IPL-IQL (Hejna & Sadigh 2023, arXiv:2305.15363); defaults are the paper's offline settings."""

    lr: float = 3e-4
    """Adam learning rate of the policy, critics and value network, > 0."""
    batch_size: int = 256
    """Unlabelled transitions of the dataset per gradient step (value, chi^2 and policy losses)."""
    pref_batch: int = 8
    """Labelled segment pairs per gradient step (their 2 x pref_batch x segment_len transitions join every loss)."""
    gamma: float = 0.99
    """Discount, in (0, 1)."""
    tau: float = 0.005
    """Polyak step of the target critics, in (0, 1]."""
    hidden: list[int] = field(default_factory=lambda: [256, 256])
    """Hidden widths of the policy, the value network and each critic (ReLU)."""
    expectile: float = 0.7
    """The expectile tau of V's regression, in (0, 1)."""
    chi2_coeff: float = 0.5
    """c: weight of the chi^2 regulariser c mean r_Q^2 on the implied reward, > 0."""
    target_clipping: bool = True
    """Clip V(s') in the implied reward to +-1 / (c (1 - gamma)), the range the chi^2 regulariser allows."""
    beta: float = 3.0
    """Inverse temperature of the advantage weights exp(beta A) (the authors' temperature 0.33), >= 0."""
    max_weight: float = 100.0
    """Advantage weights are clipped to at most this, > 0."""
    cosine_policy_lr: bool = True
    """Decay the policy's learning rate to 0 by a cosine over classic.total_steps gradient steps."""
    normalize_obs: bool = True
    """Standardise observations by the dataset's mean and std (+1e-3), in training and when acting."""

    def __post_init__(self) -> None:
        check_common(self)
        self.check_preferences()
        if not 0.0 < self.gamma < 1.0 or not 0.0 < self.tau <= 1.0 or not 0.0 < self.expectile < 1.0:
            raise ValueError(f"gamma must be in (0, 1), tau in (0, 1], expectile in (0, 1); got {self.gamma}, "
                             f"{self.tau}, {self.expectile}")  # fmt: skip
        if self.pref_batch < 1 or not self.chi2_coeff > 0 or self.beta < 0 or not self.max_weight > 0:
            raise ValueError(f"pref_batch >= 1, chi2_coeff > 0, beta >= 0, max_weight > 0; got {self.pref_batch}, "
                             f"{self.chi2_coeff}, {self.beta}, {self.max_weight}")  # fmt: skip


def implied_reward(q: torch.Tensor, next_v: torch.Tensor, gamma: float, terminated: torch.Tensor) -> torch.Tensor:
    """r_Q = Q(s, a) - gamma (1 - terminated) V(s') (the inverse Bellman operator of a fixed policy's V).

    >>> implied_reward(torch.tensor([[2.0, 1.0]]), torch.tensor([1.0, 4.0]), 0.5, torch.tensor([0.0, 1.0])).tolist()
    [[1.5, 1.0]]
    """
    return q - gamma * (1.0 - terminated) * next_v


def ipl_critic_loss(
    reward: torch.Tensor, n_pairs: int, segment_len: int, label: torch.Tensor, chi2_coeff: float
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(preference loss, chi^2 loss, logits) from implied rewards (E, N): the first 2 x n_pairs x segment_len
    entries are the pairs' transitions laid out (pair, side, time); the rest unlabelled. Each critic e has its own
    logits sum r_e(sigma_1) - sum r_e(sigma_2); the chi^2 term averages over all E x N entries.

    >>> r = torch.tensor([[1.0, 1.0, 0.0, 0.0, 2.0]])  # one pair of 2-step segments, one unlabelled transition
    >>> pref, chi2, logits = ipl_critic_loss(r, 1, 2, torch.tensor([1.0]), 0.5)
    >>> logits.tolist(), round(float(chi2), 6)  # 0.5 * (1 + 1 + 0 + 0 + 4) / 5
    ([[2.0]], 0.6)
    """
    E = reward.shape[0]
    fb = reward[:, : 2 * n_pairs * segment_len].reshape(E, n_pairs, 2, segment_len)
    logits = fb[:, :, 0].sum(-1) - fb[:, :, 1].sum(-1)  # (E, P)
    pref = preference_loss(logits, label.expand(E, -1))
    return pref, chi2_coeff * reward.pow(2).mean(), logits


class IPL(OfflineAlgorithm):
    """IPL-IQL (see the module docstring); continuous actions. Learns from the teacher's labels only."""

    name = "ipl"

    def __init__(self, ctx: ClassicContext, params: IPLParams) -> None:
        super().__init__(ctx, params)
        p, D, A = params, self.obs_dim, self.action_dim
        self.pairs, held = make_preferences(self, p, np.random.default_rng([ctx.seed, 1]))
        self.held = held if p.eval_pairs else None
        self.t_rewards = torch.zeros_like(self.t_rewards)  # never read: IPL has no reward
        self.pair_idx = torch.from_numpy(self.pairs.idx)
        self.pair_label = torch.from_numpy(self.pairs.label).to(ctx.device)
        self.actor = GaussianActor(D, A, p.hidden, self.low, self.high)
        self.critic, self.critic_target = TwinQ(D, A, p.hidden), TwinQ(D, A, p.hidden)
        self.critic_target.load_state_dict(self.critic.state_dict())
        self.value = ValueNet(D, p.hidden)
        for m in self.modules().values():
            m.to(ctx.device)
        self.actor_opt = adam(list(self.actor.parameters()), p.lr)
        self.critic_opt = adam(list(self.critic.parameters()), p.lr)
        self.value_opt = adam(list(self.value.parameters()), p.lr)

    def iteration(self, want_metrics: bool) -> dict[str, float]:
        """One gradient step on `pref_batch` labelled pairs and `batch_size` unlabelled transitions."""
        b = self.rng.integers(0, len(self.pairs), size=self.p.pref_batch)
        free = torch.from_numpy(self.rng.integers(0, len(self.data), self.p.batch_size))
        idx = torch.cat([self.pair_idx[b].reshape(-1), free])  # (2 P H + B,): the pairs' transitions first
        batch = Batch(self.t_obs[idx], self.t_actions[idx], self.t_rewards[idx], self.t_next_obs[idx],
                      self.t_terminated[idx])  # fmt: skip
        metrics = self.update(batch, want_metrics, self.pair_label[b])
        self.steps += 1
        return {k: float(v) for k, v in metrics.items()} if want_metrics else {}

    def update(self, b: Batch, want_metrics: bool, label: torch.Tensor | None = None) -> dict[str, Any]:
        p = self.p
        with torch.no_grad():
            target_q = self.critic_target(b.obs, b.actions).min(dim=0).values  # (N,)
        v = self.value(b.obs)
        adv = target_q - v
        v_loss = expectile_loss(adv, p.expectile)
        self.value_opt.zero_grad(set_to_none=True)
        v_loss.backward()
        self.value_opt.step()
        with torch.no_grad():
            next_v = self.value(b.next_obs)  # (N,)
            if p.target_clipping:
                bound = 1.0 / (p.chi2_coeff * (1.0 - p.gamma))
                next_v = next_v.clamp(-bound, bound)
        reward = implied_reward(self.critic(b.obs, b.actions), next_v, p.gamma, b.terminated)  # (2, N)
        pref, chi2, logits = ipl_critic_loss(reward, p.pref_batch, p.segment_len, label, p.chi2_coeff)
        self.critic_opt.zero_grad(set_to_none=True)
        (pref + chi2).backward()
        self.critic_opt.step()
        weights = awr_weights(adv, p.beta, p.max_weight)
        pi_loss = -(weights * self.actor.log_prob(b.obs, b.actions)).mean()
        if p.cosine_policy_lr:
            for group in self.actor_opt.param_groups:
                group["lr"] = p.lr * cosine_lr(self.steps, self.ctx.total_steps)
        self.actor_opt.zero_grad(set_to_none=True)
        pi_loss.backward()
        self.actor_opt.step()
        with torch.no_grad():
            torch._foreach_lerp_(list(self.critic_target.parameters()), list(self.critic.parameters()), p.tau)
        if not want_metrics:
            return {}
        return {
            "loss/preference": pref.detach(),
            "loss/chi2": chi2.detach(),
            "loss/v": v_loss.detach(),
            "loss/policy": pi_loss.detach(),
            "train/implied_reward": reward.detach().mean(),
            "train/pref_batch_accuracy": ((logits.detach() > 0).float() == (label > 0.5).float()).float().mean(),
            "train/adv_weight": weights.mean(),
            **({"reward_model/heldout_accuracy": self.heldout_accuracy()} if self.held is not None else {}),
        }

    @torch.no_grad()
    def heldout_accuracy(self) -> float:
        """Accuracy of the implied reward's preferences (critic mean) on the held-out, unflipped pairs."""
        idx = torch.from_numpy(self.held.idx)  # (K, 2, H)
        nxt = self.value(self.t_next_obs[idx])
        if self.p.target_clipping:
            bound = 1.0 / (self.p.chi2_coeff * (1.0 - self.p.gamma))
            nxt = nxt.clamp(-bound, bound)
        r = implied_reward(self.critic(self.t_obs[idx], self.t_actions[idx]).mean(0), nxt, self.p.gamma,
                           self.t_terminated[idx])  # fmt: skip
        return preference_accuracy(r[:, 0].sum(-1) - r[:, 1].sum(-1), self.held.returns)

    def policy(self, obs: torch.Tensor, deterministic: bool) -> torch.Tensor:
        return self.actor.mean(obs) if deterministic else self.actor.sample(obs)

    def modules(self) -> dict[str, nn.Module]:
        return {"actor": self.actor, "critic": self.critic, "critic_target": self.critic_target, "value": self.value}

    def optimizers(self) -> list[torch.optim.Optimizer]:
        return [self.actor_opt, self.critic_opt, self.value_opt]


@CLASSIC.register(
    "ipl",
    params=IPLParams,
    paper=IPL_PAPER,
    fidelity="faithful",
    departures=(
        "synthetic preferences from a scripted teacher on the dataset's true segment returns (optionally flipped), "
        "made at construction from the run's dataset, instead of the Preference Transformer's human-labelled "
        "queries; the dataset's other transitions are the unlabelled data",
        "twin critics with torch's default initialisation, no dropout or layer norm; segment length and the number "
        "of pairs per step are parameters (the paper's offline runs use the query datasets' segment length)",
    ),
)
def ipl(ctx: ClassicContext, params: IPLParams = IPLParams()) -> IPL:
    """IPL-IQL (Hejna & Sadigh 2023, arXiv:2305.15363): Q fitted to preferences through r = Q - gamma V(s').

    Q: BCE(sigmoid(sum r(sigma_1) - sum r(sigma_2)), y) + c mean r^2; V: expectile of min Q'; policy: IQL's AWR.
    """
    return IPL(ctx, params)


ipl.action_spaces = frozenset({"continuous"})
