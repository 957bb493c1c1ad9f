"""FAN, Flow-Anchored Noise-conditioned Q-learning (Lee, Kim, Balachandar, Mustafaoglu & Pingali 2026, "Towards
Efficient and Expressive Offline RL via Flow-Anchored Noise-conditioned Q-Learning", ICML 2026, arXiv:2605.01663;
the authors' code: github.com/brianlsy98/FAN, agents/fan.py, read to learn it, not copied).

Four networks: a behaviour flow v(s, x_t, t) trained by flow matching on the data's actions; a one-step policy
mu(s, eps) mapping noise to an action; a noise-conditioned critic Q(s, a, n) (twin) and an action-value Z(s, a)
(twin) that summarises Q's distribution over the noise. Actions live in [-1, 1]^A inside.

- Flow anchoring (behaviour regularisation with ONE flow evaluation, no ODE solve): with a = mu(s, eps) and a point
  x_t = (1 - t) eps + t a on the straight line from the noise to it, the policy's displacement must match the
  behaviour flow's velocity there:  A(s, eps, t) = |a - eps - v(s, x_t, t)|^2   (FQL, Park et al. 2025,
  arXiv:2502.02538, instead distils a 10-step Euler solve of the flow).
- Noise-conditioned critic (a distributional critic from ONE Gaussian sample): the noise eps that draws the next
  action a' = mu(s', eps) also conditions Q, so Q(s, a, eps) is one sample of the return's distribution:
      Q: mean (Q_i(s, a, eps) - y)^2,  y = r + gamma (1 - terminated) (agg_j Z_j(s', a') - alpha2 A(s', eps, t'))
      Z: expectile regression (tau) of Z_i(s, a) on mean_j Q'_j(s, a, n), n ~ N(0, I) fresh (target critic)
- Policy: flow matching mean |v(s, x_t, t) - (a - x_0)|^2 (x_t = (1 - t) x_0 + t a_data) for v, and for mu
      alpha1 mean A(s, eps, t) - Q(s, mu, n) / mean|Q| - Z(s, mu) / mean|Z|   (v frozen in A's term).
Acting: a = clip(mu(s, eps), -1, 1) with eps ~ N(0, I): one network call.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

import torch
from torch import nn

from ascent.classic.base import CLASSIC, ClassicContext
from ascent.classic.networks import adam
from ascent.offline.base import Batch, OfflineAlgorithm, check_common, check_hidden
from ascent.offline.flow_nets import ActionScale, FlowField, NoiseActor, TwinCritic, step_with
from ascent.registry import Paper

FAN_PAPER = Paper(
    "FAN",
    "Lee, Kim, Balachandar, Mustafaoglu & Pingali",
    2026,
    "Towards Efficient and Expressive Offline RL via Flow-Anchored Noise-conditioned Q-Learning (ICML 2026)",
    "arXiv:2605.01663",
)


@dataclass(frozen=True)
class FANParams:
    """FAN (Lee et al. 2026, arXiv:2605.01663); defaults from the authors' agent config unless said."""

    lr: float = 3e-4
    """Adam learning rate of every network, > 0."""
    batch_size: int = 256
    """Transitions per gradient step."""
    gamma: float = 0.99
    """Discount, in (0, 1] (the authors' D4RL scripts: 0.99)."""
    tau: float = 0.005
    """Polyak step of the target noise-conditioned critic, in (0, 1]."""
    hidden: list[int] = field(default_factory=lambda: [256, 256])
    """Hidden widths of each critic (Q and Z)."""
    actor_hidden: list[int] = field(default_factory=lambda: [256, 256])
    """Hidden widths of the behaviour flow and of the one-step policy."""
    layer_norm: bool = True
    """LayerNorm in the critics' hidden layers (the authors' setting)."""
    alpha1: float = 10.0
    """Weight of flow anchoring in the policy's loss, >= 0 (tuned per environment in the paper)."""
    alpha2: float = 1.0
    """Weight of flow anchoring subtracted in the Bellman target, >= 0 (tuned per environment in the paper)."""
    expectile: float = 0.9
    """tau of Z's expectile regression on the noise-conditioned Q, in (0, 1)."""
    z_agg: Literal["mean", "min"] = "mean"
    """How the two Z(s', a') are combined in the target (the authors' default mean; min on antmaze)."""
    normalize_value: bool = True
    """Divide the policy's Q and Z terms by their mean |.| (detached), so alpha1 does not depend on reward scale."""
    normalize_obs: bool = True
    """Standardise observations by the dataset's mean and std (+1e-3), in training and when acting."""

    def __post_init__(self) -> None:
        check_common(self)
        check_hidden(self.actor_hidden)
        if not 0.0 < self.tau <= 1.0 or not 0.0 < self.expectile < 1.0:
            raise ValueError(f"tau must be in (0, 1] and expectile in (0, 1), got {self.tau}, {self.expectile}")
        if self.alpha1 < 0 or self.alpha2 < 0:
            raise ValueError(f"alpha1 and alpha2 must be >= 0, got {self.alpha1}, {self.alpha2}")
        if self.z_agg not in ("mean", "min"):
            raise ValueError(f"z_agg must be mean or min, got {self.z_agg!r}")


def anchor_error(action: torch.Tensor, eps: torch.Tensor, velocity: torch.Tensor) -> torch.Tensor:
    """|a - eps - v|^2 summed over action dims, (B,): flow anchoring's error, v the behaviour flow's velocity at
    a point of the straight line from eps to a. All (B, A).

    >>> anchor_error(torch.tensor([[1.0, 0.0]]), torch.tensor([[0.5, 0.5]]), torch.tensor([[0.0, 0.0]])).tolist()
    [0.5]
    """
    return (action - eps - velocity).pow(2).sum(-1)


def expectile_loss_all(diff: torch.Tensor, expectile: float) -> torch.Tensor:
    """mean |tau - 1(u < 0)| u^2 over every element of diff (any shape).

    >>> float(expectile_loss_all(torch.tensor([[1.0], [-1.0]]), 0.9))
    0.5
    """
    return (torch.where(diff < 0, 1.0 - expectile, expectile) * diff.pow(2)).mean()


class FAN(OfflineAlgorithm):
    """FAN (see the module docstring); continuous actions."""

    name = "fan"

    def __init__(self, ctx: ClassicContext, params: FANParams) -> None:
        super().__init__(ctx, params)
        p, D, A = params, self.obs_dim, self.action_dim
        self.bc_flow = FlowField(D, A, p.actor_hidden)
        self.actor = NoiseActor(D, A, p.actor_hidden)
        self.critic = TwinCritic(D, 2 * A, p.hidden, p.layer_norm)  # Q(s, a, n)
        self.critic_target = TwinCritic(D, 2 * A, p.hidden, p.layer_norm)
        self.critic_target.load_state_dict(self.critic.state_dict())
        self.critic_z = TwinCritic(D, A, p.hidden, p.layer_norm)  # Z(s, a)
        self.bounds = ActionScale(self.low, self.high)
        for m in self.modules().values():
            m.to(ctx.device)
        self.flow_params, self.actor_params = list(self.bc_flow.parameters()), list(self.actor.parameters())
        self.value_params = list(self.critic.parameters()) + list(self.critic_z.parameters())
        self.flow_opt, self.actor_opt = adam(self.flow_params, p.lr), adam(self.actor_params, p.lr)
        self.value_opt = adam(self.value_params, p.lr)

    def anchoring(self, obs: torch.Tensor, action: torch.Tensor, eps: torch.Tensor) -> torch.Tensor:
        """A(s, eps, t) (B,) at one t ~ U(0, 1) per row: one evaluation of the behaviour flow."""
        t = torch.rand(obs.shape[0], 1, device=obs.device)
        return anchor_error(action, eps, self.bc_flow(obs, (1.0 - t) * eps + t * action, t))

    def update(self, b: Batch, want_metrics: bool) -> dict[str, Any]:
        p = self.p
        a = self.bounds.to_unit(b.actions)
        with torch.no_grad():
            eps = torch.randn_like(a)
            next_a = self.actor(b.next_obs, eps).clamp(-1.0, 1.0)
            br = self.anchoring(b.next_obs, next_a, eps)
            next_zs = self.critic_z(b.next_obs, next_a)
            next_z = next_zs.min(0).values if p.z_agg == "min" else next_zs.mean(0)
            y = b.rewards + p.gamma * (1.0 - b.terminated) * (next_z - p.alpha2 * br)
            target_z = self.critic_target(b.obs, a, torch.randn_like(a)).mean(0)
        q = self.critic(b.obs, a, eps)  # (2, B)
        z = self.critic_z(b.obs, a)
        q_loss, z_loss = (q - y).pow(2).mean(), expectile_loss_all(target_z - z, p.expectile)
        v_grads = torch.autograd.grad(q_loss + z_loss, self.value_params)
        step_with(self.value_opt, self.value_params, v_grads)

        x0, t = torch.randn_like(a), torch.rand(a.shape[0], 1, device=a.device)
        flow_loss = (self.bc_flow(b.obs, (1.0 - t) * x0 + t * a, t) - (a - x0)).pow(2).mean()
        step_with(self.flow_opt, self.flow_params, torch.autograd.grad(flow_loss, self.flow_params))

        eps = torch.randn_like(a)
        mu = self.actor(b.obs, eps)
        anchor = self.anchoring(b.obs, mu, eps).mean() / mu.shape[1]  # the authors' mean over batch and dims
        a_pi = mu.clamp(-1.0, 1.0)
        qv = self.critic(b.obs, a_pi, torch.randn_like(a)).mean(0)
        zv = self.critic_z(b.obs, a_pi).mean(0)
        norm_q = qv.abs().mean().detach() if p.normalize_value else 1.0
        norm_z = zv.abs().mean().detach() if p.normalize_value else 1.0
        pi_loss = p.alpha1 * anchor - qv.mean() / norm_q - zv.mean() / norm_z
        # the flow's weights were stepped above; the anchoring term reaches only mu (through a and x_t)
        step_with(self.actor_opt, self.actor_params, torch.autograd.grad(pi_loss, self.actor_params))
        with torch.no_grad():
            torch._foreach_lerp_(list(self.critic_target.parameters()), list(self.critic.parameters()), p.tau)
        return {
            "loss/value": q_loss.detach(),
            "loss/z": z_loss.detach(),
            "loss/flow": flow_loss.detach(),
            "loss/anchor": anchor.detach(),
            "loss/policy": pi_loss.detach(),
            "train/q": q.detach().mean(),
        }

    def policy(self, obs: torch.Tensor, deterministic: bool) -> torch.Tensor:
        """clip(mu(s, eps), -1, 1), eps ~ N(0, I) in both modes (the paper's evaluation samples the noise)."""
        eps = torch.randn(obs.shape[0], self.action_dim, device=obs.device)
        return self.bounds.to_env(self.actor(obs, eps).clamp(-1.0, 1.0))

    def flow_policy(self, obs: torch.Tensor, steps: int = 10) -> torch.Tensor:
        """The behaviour flow's action by `steps` Euler steps from noise (what a flow policy without FAN's one-step
        map costs per action; the wall-time comparison uses it). obs (B, D) -> env-scale actions (B, A)."""
        x = torch.randn(obs.shape[0], self.action_dim, device=obs.device)
        for i in range(steps):
            t = torch.full((obs.shape[0], 1), i / steps, device=obs.device)
            x = x + self.bc_flow(obs, x, t) / steps
        return self.bounds.to_env(x.clamp(-1.0, 1.0))

    def modules(self) -> dict[str, nn.Module]:
        return {
            "bc_flow": self.bc_flow,
            "actor": self.actor,
            "critic": self.critic,
            "critic_target": self.critic_target,
            "critic_z": self.critic_z,
        }

    def optimizers(self) -> list[torch.optim.Optimizer]:
        return [self.flow_opt, self.actor_opt, self.value_opt]


@CLASSIC.register(
    "fan",
    params=FANParams,
    paper=FAN_PAPER,
    fidelity="reduced",
    departures=(
        "the policy's Q and Z terms are divided by their mean |.| by default (normalize_value; the authors' default"
        " is off, with alpha1 and alpha2 tuned per environment instead); alpha1 10, alpha2 1 are not tuned here",
        "one Adam per network group stepped in turn (values, behaviour flow, policy) on the same batch; the authors"
        " sum the losses into one step (their gradients do not mix either)",
        "ReLU MLPs (the authors' MLPs use GELU) of 256x256 by default (theirs 4x512)",
    ),
)
def fan(ctx: ClassicContext, params: FANParams = FANParams()) -> FAN:
    """FAN from classic.dataset (Lee et al. 2026, arXiv:2605.01663): a one-step noise-to-action policy anchored to
    a behaviour flow by one flow evaluation, and a critic conditioned on the single noise sample that draws the next
    action, summarised by an expectile Z."""
    return FAN(ctx, params)


fan.action_spaces = frozenset({"continuous"})
