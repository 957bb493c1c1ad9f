"""CQL, conservative Q-learning (Kumar, Zhou, Tucker & Levine 2020, "Conservative Q-Learning for Offline
Reinforcement Learning", arXiv:2006.04779): the CQL(H) regulariser, for continuous actions (on SAC) and for
discrete ones (on double DQN).

CQL(H) adds to each critic's TD loss  alpha (log sum_a exp Q(s, a) - Q(s, a_data)),  pushing Q down on every action
and up on the data's, so the learned Q lower-bounds the policy's value on out-of-distribution actions.

Continuous (`cql`, the paper's SAC variant; its importance-sampled estimate, Appendix F, as in CORL):
    log sum_a exp Q(s, a) ~ log mean over 3N samples of exp(Q(s, a_k) - log mu(a_k)), a_k from three proposals:
    N uniform actions (log mu = -sum log(high - low)), N from pi(.|s) and N from pi(.|s'), both evaluated at s
    (log mu = log pi, detached); up to the constant log 3N, which does not change the gradient.
    critic: (Q_i(s, a) - y)^2 + alpha (logsumexp_k - Q_i(s, a)),  y = r + gamma (1 - term) min_j Q'_j(s', a' ~ pi(s'))
    actor:  SAC's  alpha_ent log pi(a~|s) - min_j Q_j(s, a~),  the temperature alpha_ent learned toward -dim(A).
Discrete (`discrete_cql`, the paper's QR-DQN/DQN variant as in d3rlpy's DiscreteCQL, on double DQN):
    Huber(Q(s, a) - y) + alpha (logsumexp_a' Q(s, a') - Q(s, a)),  y = r + gamma (1 - term) Q'(s', argmax_a' Q(s', a')),
    the target network copied every target_update_interval gradient steps.
Not built: the Lagrangian variant that tunes alpha to a target gap, max-backup targets.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from ascent.classic.base import CLASSIC, ClassicContext
from ascent.classic.networks import QNetwork, SquashedGaussianPolicy, TwinQ, adam
from ascent.offline.base import Batch, OfflineAlgorithm, check_common
from ascent.registry import Paper

CQL_PAPER = Paper(
    "CQL",
    "Kumar, Zhou, Tucker & Levine",
    2020,
    "Conservative Q-Learning for Offline Reinforcement Learning",
    "arXiv:2006.04779",
    section="baselines",
)


@dataclass(frozen=True)
class CQLParams:
    """CQL(H) on SAC (Kumar et al. 2020, arXiv:2006.04779); defaults are the paper's Gym-MuJoCo settings."""

    actor_lr: float = 1e-4
    """Adam learning rate of the policy and of the entropy temperature, > 0."""
    lr: float = 3e-4
    """Adam learning rate of the critics, > 0."""
    batch_size: int = 256
    """Transitions per gradient step."""
    gamma: float = 0.99
    """Discount, in (0, 1]."""
    tau: float = 0.005
    """Polyak step of the target critics, in (0, 1]."""
    hidden: list[int] = field(default_factory=lambda: [256, 256])
    """Hidden widths of the policy and of each critic (ReLU)."""
    alpha: float = 5.0
    """Weight of the conservative term (the paper's alpha; fixed, no Lagrangian), >= 0 (0: plain offline SAC)."""
    n_actions: int = 10
    """Sampled actions per proposal (uniform, pi(.|s), pi(.|s')) in the log-sum-exp estimate, >= 1."""
    temperature: float = 1.0
    """Temperature T of the log-sum-exp: T log sum exp(Q / T), > 0."""
    backup_entropy: bool = False
    """Subtract alpha_ent log pi(a'|s') in the TD target (SAC's soft backup; off in the paper's MuJoCo runs)."""
    normalize_obs: bool = True
    """Standardise observations by the dataset's mean and std (+1e-3), in training and when acting."""

    def __post_init__(self) -> None:
        check_common(self)
        if not self.actor_lr > 0 or not 0.0 < self.tau <= 1.0:
            raise ValueError(f"actor_lr must be > 0 and tau in (0, 1], got {self.actor_lr}, {self.tau}")
        if self.alpha < 0 or self.n_actions < 1 or not self.temperature > 0:
            raise ValueError("alpha must be >= 0, n_actions >= 1 and temperature > 0")


def conservative_gap(q_samples: torch.Tensor, log_density: torch.Tensor, q_data: torch.Tensor, temperature: float):
    """mean over the batch of  T logsumexp_k((Q(s, a_k) - log mu(a_k)) / T) - Q(s, a_data);
    q_samples, log_density (B, K), q_data (B,).

    >>> q = torch.tensor([[0.0, 1.0986123]]); d = torch.zeros(1, 2)  # exp: 1 and 3
    >>> round(float(conservative_gap(q, d, torch.tensor([1.0]), 1.0)), 4)  # log(1 + 3) - 1
    0.3863
    """
    lse = torch.logsumexp((q_samples - log_density) / temperature, dim=1) * temperature  # (B,)
    return (lse - q_data).mean()


def discrete_cql_gap(q_all: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
    """mean (logsumexp_a Q(s, a) - Q(s, a_data)); q_all (B, n), actions (B,) long.

    >>> round(float(discrete_cql_gap(torch.tensor([[1.0, 1.0]]), torch.tensor([0]))), 4)  # log 2
    0.6931
    """
    return (torch.logsumexp(q_all, dim=1) - q_all.gather(1, actions[:, None]).squeeze(1)).mean()


class CQL(OfflineAlgorithm):
    """CQL(H) on SAC, continuous actions (see the module docstring)."""

    name = "cql"

    def __init__(self, ctx: ClassicContext, params: CQLParams) -> None:
        super().__init__(ctx, params)
        p, D, A = params, self.obs_dim, self.action_dim
        self.actor = SquashedGaussianPolicy(D, A, p.hidden, self.low, self.high)
        self.critic, self.critic_target = TwinQ(D, A, p.hidden), TwinQ(D, A, p.hidden)
        self.critic_target.load_state_dict(self.critic.state_dict())
        for m in self.modules().values():
            m.to(ctx.device)
        self.log_alpha = nn.Parameter(torch.zeros((), device=ctx.device))
        self.target_entropy = -float(A)
        self.actor_params = list(self.actor.parameters())
        self.actor_opt = adam(self.actor_params, p.actor_lr)
        self.alpha_opt = adam([self.log_alpha], p.actor_lr)
        self.critic_opt = adam(list(self.critic.parameters()), p.lr)
        self.uniform_log_density = -float(np.log(self.high - self.low).sum())

    def sampled_q(self, b: Batch) -> tuple[torch.Tensor, torch.Tensor]:
        """(Q (2, B, 3N), log mu (B, 3N)) at s for N uniform actions and N from pi(.|s) and from pi(.|s')."""
        B, N, D, A = b.obs.shape[0], self.p.n_actions, self.obs_dim, self.action_dim
        low, high = torch.as_tensor(self.low), torch.as_tensor(self.high)
        uniform = low + (high - low) * torch.rand(B, N, A)  # (B, N, A)
        with torch.no_grad():
            obs_rep = b.obs[:, None].expand(B, N, D).reshape(B * N, D)
            next_rep = b.next_obs[:, None].expand(B, N, D).reshape(B * N, D)
            a_cur, logp_cur = self.actor.sample(obs_rep)  # (B N, A), (B N,)
            a_next, logp_next = self.actor.sample(next_rep)
        actions = torch.cat([uniform.reshape(B * N, A), a_cur, a_next])  # (3 B N, A)
        q = self.critic(torch.cat([obs_rep] * 3), actions).reshape(2, 3, B, N)  # (2, 3, B, N)
        q = q.permute(0, 2, 1, 3).reshape(2, B, 3 * N)
        log_mu = torch.cat(
            [torch.full((B, N), self.uniform_log_density), logp_cur.reshape(B, N), logp_next.reshape(B, N)], dim=1
        )  # (B, 3N)
        return q, log_mu

    def update(self, b: Batch, want_metrics: bool) -> dict[str, Any]:
        p = self.p
        actions_pi, log_prob = self.actor.sample(b.obs)
        alpha = self.log_alpha.detach().exp()
        alpha_loss = -(self.log_alpha * (log_prob + self.target_entropy).detach()).mean()
        self.alpha_opt.zero_grad(set_to_none=True)
        alpha_loss.backward()
        self.alpha_opt.step()
        pi_loss = (alpha * log_prob - self.critic(b.obs, actions_pi).min(dim=0).values).mean()
        grads = torch.autograd.grad(pi_loss, self.actor_params)  # through the critics, not into their weights
        for param, grad in zip(self.actor_params, grads):
            param.grad = grad
        self.actor_opt.step()
        with torch.no_grad():
            next_a, next_logp = self.actor.sample(b.next_obs)
            next_q = self.critic_target(b.next_obs, next_a).min(dim=0).values
            if p.backup_entropy:
                next_q = next_q - alpha * next_logp
            y = b.rewards + p.gamma * (1.0 - b.terminated) * next_q
        q = self.critic(b.obs, b.actions)  # (2, B)
        td = (q - y).pow(2).mean(dim=1).sum()
        q_samples, log_mu = self.sampled_q(b)
        gap = sum(conservative_gap(q_samples[i], log_mu, q[i], p.temperature) for i in range(2))
        c_loss = td + p.alpha * gap
        self.critic_opt.zero_grad(set_to_none=True)
        c_loss.backward()
        self.critic_opt.step()
        with torch.no_grad():
            torch._foreach_lerp_(list(self.critic_target.parameters()), list(self.critic.parameters()), p.tau)
        return {
            "loss/value": td.detach(),
            "loss/cql_gap": gap.detach(),
            "loss/policy": pi_loss.detach(),
            "loss/entropy": alpha,
        }

    def policy(self, obs: torch.Tensor, deterministic: bool) -> torch.Tensor:
        return self.actor.mode(obs) if deterministic else self.actor.sample(obs)[0]

    def modules(self) -> dict[str, nn.Module]:
        return {"actor": self.actor, "critic": self.critic, "critic_target": self.critic_target}

    def optimizers(self) -> list[torch.optim.Optimizer]:
        return [self.actor_opt, self.alpha_opt, self.critic_opt]

    def extra_state(self) -> dict[str, Any]:
        return {"log_alpha": self.log_alpha.detach().clone()}

    def load_extra_state(self, state: dict[str, Any]) -> None:
        with torch.no_grad():
            self.log_alpha.copy_(state["log_alpha"])


@dataclass(frozen=True)
class DiscreteCQLParams:
    """CQL(H) on double DQN for discrete actions (Kumar et al. 2020, arXiv:2006.04779; d3rlpy's DiscreteCQL);
    the defaults suit small control tasks (d3rlpy's, for Atari: lr 6.25e-5, batch 32, target every 8000)."""

    lr: float = 3e-4
    """Adam learning rate, > 0."""
    batch_size: int = 256
    """Transitions per gradient step."""
    gamma: float = 0.99
    """Discount, in (0, 1]."""
    hidden: list[int] = field(default_factory=lambda: [256, 256])
    """Hidden widths of the Q-network (ReLU)."""
    alpha: float = 1.0
    """Weight of the conservative term, >= 0 (0: offline double DQN)."""
    target_update_interval: int = 1000
    """Gradient steps between copies of the Q-network into the target network, >= 1."""
    normalize_obs: bool = True
    """Standardise observations by the dataset's mean and std (+1e-3), in training and when acting."""

    def __post_init__(self) -> None:
        check_common(self)
        if self.alpha < 0 or self.target_update_interval < 1:
            raise ValueError("alpha must be >= 0 and target_update_interval >= 1")


class DiscreteCQL(OfflineAlgorithm):
    """CQL(H) on double DQN (see the module docstring)."""

    name = "discrete_cql"

    def __init__(self, ctx: ClassicContext, params: DiscreteCQLParams) -> None:
        super().__init__(ctx, params)
        n = self.data.n_actions
        self.q, self.q_target = QNetwork(self.obs_dim, n, params.hidden), QNetwork(self.obs_dim, n, params.hidden)
        self.q_target.load_state_dict(self.q.state_dict())
        self.q.to(ctx.device), self.q_target.to(ctx.device)
        self.opt = adam(list(self.q.parameters()), params.lr)

    def update(self, b: Batch, want_metrics: bool) -> dict[str, Any]:
        p = self.p
        with torch.no_grad():
            greedy = self.q(b.next_obs).argmax(-1, keepdim=True)  # (B, 1)
            y = b.rewards + p.gamma * (1.0 - b.terminated) * self.q_target(b.next_obs).gather(1, greedy).squeeze(1)
        q_all = self.q(b.obs)  # (B, n)
        td = F.smooth_l1_loss(q_all.gather(1, b.actions[:, None]).squeeze(1), y)
        gap = discrete_cql_gap(q_all, b.actions)
        loss = td + p.alpha * gap
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        self.opt.step()
        if (self.steps + 1) % p.target_update_interval == 0:
            self.q_target.load_state_dict(self.q.state_dict())
        return {"loss/value": td.detach(), "loss/cql_gap": gap.detach()}

    def policy(self, obs: torch.Tensor, deterministic: bool) -> torch.Tensor:
        return self.q(obs).argmax(-1)

    def modules(self) -> dict[str, nn.Module]:
        return {"q": self.q, "q_target": self.q_target}

    def optimizers(self) -> list[torch.optim.Optimizer]:
        return [self.opt]


@CLASSIC.register(
    "cql",
    params=CQLParams,
    paper=CQL_PAPER,
    fidelity="faithful",
    departures=(
        "a fixed alpha only: the Lagrangian variant (alpha tuned to a target action gap) is not built",
        "no behaviour-cloning warm-up of the policy and torch's default initialisation (CORL: orthogonal, 3 layers)",
    ),
)
def cql(ctx: ClassicContext, params: CQLParams = CQLParams()) -> CQL:
    """CQL(H) on SAC from classic.dataset (Kumar et al. 2020, arXiv:2006.04779), continuous actions.

    Critic: (Q(s, a) - y)^2 + alpha (T logsumexp_k((Q(s, a_k) - log mu(a_k)) / T) - Q(s, a)), a_k uniform and from
    pi(s), pi(s'); actor and temperature as SAC's.
    """
    return CQL(ctx, params)


@CLASSIC.register(
    "discrete_cql",
    params=DiscreteCQLParams,
    paper=CQL_PAPER,
    fidelity="faithful",
    departures=(
        "the CQL(H) term on double DQN with a Huber TD loss (d3rlpy's DiscreteCQL), not on the paper's QR-DQN: "
        "small control tasks need no distributional critic",
    ),
)
def discrete_cql(ctx: ClassicContext, params: DiscreteCQLParams = DiscreteCQLParams()) -> DiscreteCQL:
    """CQL(H) on double DQN from classic.dataset (Kumar et al. 2020, arXiv:2006.04779), discrete actions.

    Huber(Q(s, a) - r - gamma (1 - term) Q'(s', argmax Q(s', .))) + alpha (logsumexp Q(s, .) - Q(s, a)).
    """
    return DiscreteCQL(ctx, params)


cql.action_spaces = frozenset({"continuous"})
discrete_cql.action_spaces = frozenset({"discrete"})
