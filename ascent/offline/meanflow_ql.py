"""MeanFlowQL: a one-step mean-flow policy trained with Q-learning (Wang, Li, Chen, Shi, Bai, Yu & Fu 2025, "One-Step
Generative Policies with Q-Learning: A Reformulation of MeanFlow", AAAI 2026, arXiv:2511.13035; the authors' code:
github.com/HiccupRL/MeanFlowQL, agents/meanflowql.py, read to learn it, not copied).

MeanFlow (Geng et al. 2025, arXiv:2505.13447) learns the *average* velocity u(z_t, r, t) = 1/(t - r) int_r^t v(z_s) ds
of a flow path z_t = (1 - t) a + t e (a: data action, e ~ N(0, I), v = e - a), which satisfies the MeanFlow identity
    u(z_t, r, t) = v(z_t, t) - (t - r) d/dt u(z_t, r, t)       (d/dt: the total derivative along the path).
MeanFlowQL fixes r = 0 and reformulates the network as the residual g(s, z_t, t) = z_t - u(z_t, 0, t), so that one
evaluation at t = 1 maps noise straight to an action: a = g(s, e, 1). Substituting u = z - g into the identity gives
the regression target (stop-gradient)
    g_tgt = z_t + (t - 1) v - t dg/dt,   dg/dt = (dg/dz) v + dg/dt    (one Jacobian-vector product),
clipped to [-5, 5]; the error is weighted adaptively, w = 1 / (|g - g_tgt|^2 + c)^(1 - gamma_a) (detached). One
gradient step:
    critic:  mean (Q_i(s, a) - y)^2,  y = r + gamma (1 - terminated) mean_j Q'_j(s', a'),  a' the best by Q' of
             max(1, N // 2) one-step candidates g(s', e_k, 1)   (value-guided candidate sampling)
    policy:  alpha_k * L_meanflow + (-Q(s, clip(g(s, e, 1)))) / mean|Q| + w_b * mean relu(|g(s, e, 1)| - 1)
with alpha_k cosine-decayed from alpha to alpha / 10 over the run and the bound loss keeping one-step actions inside
[-1, 1] (the paper's fix for out-of-bound actions that clipping alone leaves to the Bellman target). Acting draws N
candidates in one batched call and keeps the best by Q' (the paper's best-of-N). Actions live in [-1, 1]^A inside.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable

import torch
from torch import nn
from torch.func import jvp

from ascent.classic.base import CLASSIC, ClassicContext
from ascent.classic.networks import adam
from ascent.offline.base import Batch, OfflineAlgorithm, check_common, check_hidden
from ascent.offline.flow_nets import ActionScale, FlowField, TwinCritic, clip_grads_, step_with
from ascent.registry import Paper

MEANFLOW_QL = Paper(
    "MeanFlowQL",
    "Wang, Li, Chen, Shi, Bai, Yu & Fu",
    2025,
    "One-Step Generative Policies with Q-Learning: A Reformulation of MeanFlow (AAAI 2026)",
    "arXiv:2511.13035",
)


@dataclass(frozen=True)
class MeanFlowQLParams:
    """MeanFlowQL (Wang et al. 2025, arXiv:2511.13035); defaults from the authors' config where it is one value."""

    lr: float = 3e-4
    """Adam learning rate of the critics and the policy's peak rate, > 0."""
    lr_min_ratio: float = 0.1
    """The policy's learning rate: 5% linear warm-up, then cosine decay to lr * lr_min_ratio; in [0, 1]."""
    batch_size: int = 256
    """Transitions per gradient step."""
    gamma: float = 0.99
    """Discount, in (0, 1]."""
    tau: float = 0.005
    """Polyak step of the target critics, in (0, 1]."""
    hidden: list[int] = field(default_factory=lambda: [256, 256])
    """Hidden widths of each critic (ReLU, LayerNorm with layer_norm)."""
    actor_hidden: list[int] = field(default_factory=lambda: [256, 256, 256])
    """Hidden widths of the mean-flow network g(s, z, t) (an MLP; the authors use a small DiT)."""
    layer_norm: bool = True
    """LayerNorm in the critics' hidden layers (the authors' setting)."""
    alpha: float = 10.0
    """Weight of the mean-flow (behaviour) loss against the Q term, > 0; cosine-decayed to alpha / 10."""
    num_candidates: int = 5
    """N: one-step candidates per state when acting (the best by Q' is taken); the Bellman target uses N // 2."""
    adaptive_gamma: float = 0.8
    """gamma_a of the adaptive loss weight 1 / (err^2 + c)^(1 - gamma_a), in [0, 1] (1: plain squared error)."""
    adaptive_c: float = 1e-4
    """c of the adaptive loss weight, > 0."""
    target_clip: float = 5.0
    """The mean-flow target g_tgt is clipped to [-target_clip, target_clip], > 0."""
    bound_weight: float = 1.0
    """Weight of the bound loss mean relu(|g(s, e, 1)| - 1), >= 0."""
    normalize_q: bool = True
    """Divide the policy's Q term by mean |Q| (detached), so alpha does not depend on the reward scale."""
    grad_clip: float = 1.0
    """Global gradient-norm clip of each of critic and policy, > 0."""
    normalize_obs: bool = True
    """Standardise observations by the dataset's mean and std (+1e-3), in training and when acting."""

    def __post_init__(self) -> None:
        check_common(self)
        check_hidden(self.actor_hidden)
        if not 0.0 < self.tau <= 1.0 or not 0.0 <= self.lr_min_ratio <= 1.0:
            raise ValueError(f"tau must be in (0, 1] and lr_min_ratio in [0, 1], got {self.tau}, {self.lr_min_ratio}")
        if not self.alpha > 0 or self.num_candidates < 1 or self.bound_weight < 0:
            raise ValueError("alpha must be > 0, num_candidates >= 1 and bound_weight >= 0")
        if not 0.0 <= self.adaptive_gamma <= 1.0 or not self.adaptive_c > 0:
            raise ValueError(f"adaptive_gamma must be in [0, 1] and adaptive_c > 0, got {self.adaptive_gamma}")
        if not self.target_clip > 0 or not self.grad_clip > 0:
            raise ValueError("target_clip and grad_clip must be > 0")


def meanflow_target(g: Callable[[torch.Tensor, torch.Tensor], torch.Tensor], z: torch.Tensor, t: torch.Tensor,
                    v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:  # fmt: skip
    """(g(z, t), z + (t - 1) v - t dg/dt) with dg/dt = (dg/dz) v + dg/dt by one forward-mode JVP along (v, 1):
    the residual MeanFlow identity's target for r = 0. z, v (B, A); t (B, 1).

    The exact residual map of a single data action a* is g(z, t) = z - (z - a*) / t; it is its own target:
    >>> a = torch.tensor([[0.5]]); z = torch.tensor([[1.2]]); t = torch.tensor([[0.4]]); e = (z - (1 - t) * a) / t
    >>> g, tgt = meanflow_target(lambda z, t: z - (z - a) / t, z, t, e - a)
    >>> round(float(g), 5), round(float(tgt), 5)
    (-0.55, -0.55)
    """
    out, dgdt = jvp(g, (z, t), (v, torch.ones_like(t)))
    return out, z + (t - 1.0) * v - t * dgdt


def adaptive_l2(err: torch.Tensor, gamma: float, c: float) -> torch.Tensor:
    """mean_b w_b d_b, d_b = mean_k err_bk^2, w_b = 1 / (d_b + c)^(1 - gamma) detached and clipped to [1e-6, 1e6]
    (MeanFlow's adaptive loss, as the authors weight it). err (B, A).

    >>> round(float(adaptive_l2(torch.tensor([[3.0], [0.0]]), gamma=0.5, c=0.0)), 4)  # (9 / 3 + 0) / 2
    1.5
    >>> float(adaptive_l2(torch.tensor([[2.0]]), gamma=1.0, c=1.0))  # gamma = 1: the plain squared error
    4.0
    """
    d = err.pow(2).mean(-1)
    w = (d.detach() + c).clamp_min(1e-12).pow(-(1.0 - gamma)).clamp(1e-6, 1e6)
    return (w * d).mean()


def bound_loss(a: torch.Tensor) -> torch.Tensor:
    """mean relu(a - 1) + mean relu(-1 - a): how far one-step actions leave [-1, 1].

    >>> float(bound_loss(torch.tensor([[1.5, -3.0], [0.2, 0.0]])))  # 0.5 / 4 + 2 / 4
    0.625
    """
    return torch.relu(a - 1.0).mean() + torch.relu(-1.0 - a).mean()


def warmup_cosine(step: int, total: int, min_ratio: float, warmup: float = 0.05) -> float:
    """The policy's learning-rate factor: linear from 0 over the first `warmup` of the run, then cosine from 1 to
    `min_ratio` (the authors' offline schedule).

    >>> warmup_cosine(5, 200, 0.1), warmup_cosine(10, 200, 0.1), warmup_cosine(200, 200, 0.1)
    (0.5, 1.0, 0.1)
    """
    w = int(total * warmup)
    if step < w:
        return step / w
    progress = min(max(step - w, 0) / max(total - w, 1), 1.0)
    return min_ratio + (1.0 - min_ratio) * 0.5 * (1.0 + math.cos(math.pi * progress))


def best_of(obs: torch.Tensor, n: int, generate: Callable, critic: nn.Module) -> torch.Tensor:
    """For each state, n candidates generate(obs, e_k) (clipped to [-1, 1]) from one batched call; the one with the
    highest mean critic value. obs (B, D) -> (B, A)."""
    B = obs.shape[0]
    rep = obs.repeat(n, 1)  # (n B, D), candidate k of state b at row k B + b
    cand = generate(rep).clamp(-1.0, 1.0)  # (n B, A)
    q = critic(rep, cand).mean(0).view(n, B)
    best = q.argmax(0)  # (B,)
    return cand.view(n, B, -1)[best, torch.arange(B)]


class MeanFlowQL(OfflineAlgorithm):
    """MeanFlowQL (see the module docstring); continuous actions."""

    name = "meanflow_ql"

    def __init__(self, ctx: ClassicContext, params: MeanFlowQLParams) -> None:
        super().__init__(ctx, params)
        p, D, A = params, self.obs_dim, self.action_dim
        self.flow = FlowField(D, A, p.actor_hidden)
        self.critic = TwinCritic(D, A, p.hidden, p.layer_norm)
        self.critic_target = TwinCritic(D, A, p.hidden, p.layer_norm)
        self.critic_target.load_state_dict(self.critic.state_dict())
        self.bounds = ActionScale(self.low, self.high)
        for m in self.modules().values():
            m.to(ctx.device)
        self.actor_params, self.critic_params = list(self.flow.parameters()), list(self.critic.parameters())
        self.actor_opt, self.critic_opt = adam(self.actor_params, p.lr), adam(self.critic_params, p.lr)

    def one_step(self, obs: torch.Tensor, noise: torch.Tensor | None = None) -> torch.Tensor:
        """g(s, e, 1): the one-step action in [-1, 1]-units (not clipped); e ~ N(0, I) when not given."""
        noise = torch.randn(obs.shape[0], self.action_dim, device=obs.device) if noise is None else noise
        return self.flow(obs, noise, torch.ones(obs.shape[0], 1, device=obs.device))

    def update(self, b: Batch, want_metrics: bool) -> dict[str, Any]:
        p, B = self.p, b.obs.shape[0]
        a = self.bounds.to_unit(b.actions)
        with torch.no_grad():
            next_a = best_of(b.next_obs, max(1, p.num_candidates // 2), self.one_step, self.critic_target)
            y = b.rewards + p.gamma * (1.0 - b.terminated) * self.critic_target(b.next_obs, next_a).mean(0)
        q = self.critic(b.obs, a)  # (2, B)
        c_loss = (q - y).pow(2).mean()
        c_grads = list(torch.autograd.grad(c_loss, self.critic_params))
        clip_grads_(c_grads, p.grad_clip)
        step_with(self.critic_opt, self.critic_params, tuple(c_grads))

        t = torch.rand(B, 1, device=a.device)
        e = torch.randn_like(a)
        z, v = (1.0 - t) * a + t * e, e - a
        with torch.no_grad():
            _, g_tgt = meanflow_target(lambda z_, t_: self.flow(b.obs, z_, t_), z, t, v)
            g_tgt = g_tgt.clamp(-p.target_clip, p.target_clip)
        flow_loss = adaptive_l2(self.flow(b.obs, z, t) - g_tgt, p.adaptive_gamma, p.adaptive_c)
        act = self.one_step(b.obs)
        q_pi = self.critic(b.obs, act.clamp(-1.0, 1.0)).mean(0)
        q_loss = -q_pi.mean() / (q_pi.abs().mean().detach() if p.normalize_q else 1.0)
        total = self.ctx.total_steps
        alpha = p.alpha * warmup_cosine(self.steps, total, 0.1, warmup=0.0)
        b_loss = bound_loss(act)
        pi_loss = alpha * flow_loss + q_loss + p.bound_weight * b_loss
        grads = list(torch.autograd.grad(pi_loss, self.actor_params))  # through the critic, not into its weights
        clip_grads_(grads, p.grad_clip)
        for group in self.actor_opt.param_groups:
            group["lr"] = p.lr * warmup_cosine(self.steps, total, p.lr_min_ratio)
        step_with(self.actor_opt, self.actor_params, tuple(grads))
        with torch.no_grad():
            torch._foreach_lerp_(list(self.critic_target.parameters()), self.critic_params, p.tau)
        return {
            "loss/value": c_loss.detach(),
            "loss/policy": pi_loss.detach(),
            "loss/meanflow": flow_loss.detach(),
            "loss/bound": b_loss.detach(),
            "train/q": q.detach().mean(),
        }

    def policy(self, obs: torch.Tensor, deterministic: bool) -> torch.Tensor:
        """Best of N one-step candidates by Q' (both modes: the paper's evaluation draws the noise too)."""
        return self.bounds.to_env(best_of(obs, self.p.num_candidates, self.one_step, self.critic_target))

    def modules(self) -> dict[str, nn.Module]:
        return {"flow": self.flow, "critic": self.critic, "critic_target": self.critic_target}

    def optimizers(self) -> list[torch.optim.Optimizer]:
        return [self.actor_opt, self.critic_opt]


@CLASSIC.register(
    "meanflow_ql",
    params=MeanFlowQLParams,
    paper=MEANFLOW_QL,
    fidelity="reduced",
    departures=(
        "the mean-flow network is a ReLU MLP on [s, z, t], not the authors' small DiT",
        "alpha follows the authors' cosine schedule (alpha to alpha / 10), not their loss-history 'dynamic alpha'",
        "the policy's Q term is divided by mean |Q| by default (normalize_q), so one alpha serves any reward scale",
        "no separate mean-flow pre-training phase and no consistency loss (its weight is 0 in the authors' config)",
        "critic and policy are stepped one after the other on the same batch (the authors sum the losses in one step;"
        " the gradients do not mix, the policy's step sees the critic after its update)",
        "acting and the Bellman target use the best-of-N candidates in both deterministic and stochastic modes",
    ),
)
def meanflow_ql(ctx: ClassicContext, params: MeanFlowQLParams = MeanFlowQLParams()) -> MeanFlowQL:
    """MeanFlowQL from classic.dataset (Wang et al. 2025, arXiv:2511.13035): a one-step residual mean-flow policy
    a = g(s, e, 1) trained by the MeanFlow identity (target z + (t - 1) v - t dg/dt) plus Q maximisation; twin
    critics with best-of-N one-step candidates in the target and when acting."""
    return MeanFlowQL(ctx, params)


meanflow_ql.action_spaces = frozenset({"continuous"})
