"""GoRL (Zhang, Wan, Chen, Yu, Tsang & An 2025, "GoRL: An Algorithm-Agnostic Framework for Online Reinforcement
Learning with Generative Policies", arXiv:2512.02581): a Gaussian *latent* policy pi_theta(eps|s) optimised by PPO,
and a conditional flow-matching *decoder* g_phi(s, eps) that turns the latent into the action.

Two timescales, in stages (the authors' pipeline, github.com/bennidict23/GoRL, read to learn the schedule):
- stage 0: the decoder is the identity (a = eps), so the stage is plain PPO in action space;
- inside a stage the decoder is frozen and the latent policy is trained by PPO on the latents it sampled (the
  ratio pi(eps|s) / pi_old(eps|s) is tractable whatever the decoder is), with a KL penalty toward the fixed prior
  N(0, I): L = L_PPO + kl_coef * mean_s KL(pi(.|s) || N(0, I));
- at each stage boundary the encoder is frozen and the decoder is refined by conditional flow matching on the
  stage's recent transitions (s, a executed): x_t = (1 - t) x0 + t a with x0 ~ N(0, I) (the *fixed prior*, not
  the encoder's latent), t ~ U[0, 1], loss |v_phi(x_t, t, s) - (a - x0)|^2. The decoder then maps the prior to
  the distribution the stage's policy had reached, so a fresh latent policy near N(0, I) starts the next stage
  from that behaviour and can move from there with an expressive (possibly multimodal) map under it.
Acting: eps ~ pi(.|s), a = Euler integration of dx/dt = v_phi(x, t, s) from x(0) = eps over `flow_steps` steps
(deterministic: eps = the latent mean), clipped to the action bounds when stepping the environment.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from ascent import papers
from ascent.classic.base import CLASSIC, ClassicContext
from ascent.classic.networks import GaussianPolicy, adam, mlp
from ascent.classic.ppo import PPO, PPOParams, check, ppo_loss


@dataclass(frozen=True)
class GoRLParams(PPOParams):
    """GoRL (Zhang et al. 2025, arXiv:2512.02581): PPO's parameters for the latent policy, plus the stages and the
    flow decoder."""

    stages: int = 4
    """Stages over the run (the authors run 4): the decoder is refined at the end of each but the last, every
    total_steps / stages environment steps; stage 0 uses the identity decoder (plain PPO)."""
    kl_coef: float = 1e-3
    """Weight of KL(pi(eps|s) || N(0, I)) in the latent policy's loss, >= 0."""
    reset_encoder: bool = True
    """Start each stage with a fresh latent policy (near the prior, so decoder(prior) = the last stage's behaviour),
    as the authors' pipeline trains a new encoder per stage; False keeps training the old one."""
    decoder_hidden: list[int] = field(default_factory=lambda: [64, 64, 64])
    """Hidden widths of the velocity network v_phi([x_t, s, time features])."""
    flow_steps: int = 10
    """Euler steps of the decoder's ODE from the latent (t = 0) to the action (t = 1)."""
    decoder_updates: int = 500
    """Gradient steps of flow matching at each stage boundary."""
    decoder_batch: int = 256
    """Transitions per flow-matching mini-batch."""
    decoder_lr: float = 3e-4
    """Adam learning rate of the decoder, > 0."""
    decoder_buffer: int = 1024
    """The decoder learns from the last this-many transitions of the stage: the behaviour the stage ended with (the
    authors collect fresh data with the stage's final encoder; a buffer as long as a whole stage mixed in its early,
    poor behaviour: 157 vs 695 on InvertedPendulum, one seed)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        for key in ("stages", "flow_steps", "decoder_updates", "decoder_batch", "decoder_buffer"):
            if getattr(self, key) <= 0:
                raise ValueError(f"{key} must be > 0, got {getattr(self, key)}")
        if self.kl_coef < 0 or not self.decoder_lr > 0:
            raise ValueError(f"kl_coef must be >= 0 and decoder_lr > 0, got {self.kl_coef}, {self.decoder_lr}")
        if not self.decoder_hidden or min(self.decoder_hidden) <= 0:
            raise ValueError(f"decoder_hidden must list positive layer widths, got {self.decoder_hidden}")


def kl_to_standard_normal(mean: torch.Tensor, log_std: torch.Tensor) -> torch.Tensor:
    """KL(N(mean, diag(exp(log_std))^2) || N(0, I)) per row, (B,): sum_i (sigma_i^2 + mu_i^2 - 1) / 2 - log sigma_i."""
    log_std = log_std.expand_as(mean)
    return (0.5 * ((2 * log_std).exp() + mean.pow(2) - 1.0) - log_std).sum(-1)


def time_features(t: torch.Tensor) -> torch.Tensor:
    """(B,) flow times in [0, 1] -> (B, 5): t and sin/cos of 2 pi t and 4 pi t."""
    w = torch.tensor([2 * math.pi, 4 * math.pi])
    return torch.cat([t[:, None], torch.sin(t[:, None] * w), torch.cos(t[:, None] * w)], dim=-1)


class FlowDecoder(torch.nn.Module):
    """g_phi(s, eps): the action reached by integrating v_phi(x, t, s) from x(0) = eps to t = 1 (Euler)."""

    def __init__(self, obs_dim: int, action_dim: int, hidden: list[int], flow_steps: int) -> None:
        super().__init__()
        self.velocity = mlp([action_dim + obs_dim + 5, *hidden, action_dim], "relu")
        self.flow_steps = flow_steps

    def v(self, x: torch.Tensor, t: torch.Tensor, obs: torch.Tensor) -> torch.Tensor:
        return self.velocity(torch.cat([x, obs, time_features(t)], dim=-1))

    def forward(self, obs: torch.Tensor, eps: torch.Tensor) -> torch.Tensor:
        x, dt = eps, 1.0 / self.flow_steps
        for k in range(self.flow_steps):
            x = x + dt * self.v(x, torch.full((x.shape[0],), k * dt), obs)
        return x


def flow_matching_loss(
    decoder: FlowDecoder, obs: torch.Tensor, actions: torch.Tensor, x0: torch.Tensor, t: torch.Tensor
) -> torch.Tensor:
    """Conditional flow matching on the straight path x_t = (1 - t) x0 + t a: mean_B |v(x_t, t, s) - (a - x0)|^2
    summed over action dimensions."""
    x_t = (1 - t[:, None]) * x0 + t[:, None] * actions
    return (decoder.v(x_t, t, obs) - (actions - x0)).pow(2).sum(-1).mean()


class GoRL(PPO):
    """PPO on the latent, a flow decoder under it, refined at stage boundaries (see the module docstring)."""

    def __init__(self, ctx: ClassicContext, params: GoRLParams) -> None:
        if ctx.envs.discrete:
            raise ValueError("gorl needs a continuous (Box) action space")
        super().__init__(ctx, params)
        envs, p = ctx.envs, params
        self.decoder = FlowDecoder(envs.obs_dim, envs.action_dim, p.decoder_hidden, p.flow_steps).to(ctx.device)
        self.decoder_optimizer = adam(list(self.decoder.parameters()), p.decoder_lr)
        self.low = torch.as_tensor(envs.low, dtype=torch.float32)
        self.high = torch.as_tensor(envs.high, dtype=torch.float32)
        self.stage, self.decoded = 0, False  # decoded: False while the decoder is the identity (stage 0)
        self.buf_obs = np.zeros((p.decoder_buffer, envs.obs_dim), np.float32)
        self.buf_act = np.zeros((p.decoder_buffer, envs.action_dim), np.float32)
        self.buf_len, self.buf_pos = 0, 0

    def decode(self, obs: torch.Tensor, eps: torch.Tensor) -> torch.Tensor:
        return self.decoder(obs, eps) if self.decoded else eps

    @torch.no_grad()
    def collect(self) -> None:
        """n_steps vector steps: eps ~ pi(.|s) is the PPO "action", the environment gets clip(g(s, eps))."""
        ro, gamma = self.rollout, self.p.gamma
        for t in range(self.p.n_steps):
            obs = torch.from_numpy(self.envs.obs)  # (E, D)
            eps, logp = self.actor.sample(obs)
            action = torch.maximum(torch.minimum(self.decode(obs, eps), self.high), self.low)
            ro.obs[t], ro.actions[t], ro.log_probs[t], ro.values[t] = obs, eps, logp, self.value(obs)
            self.remember(obs.numpy(), action.numpy())
            step = self.envs.step(action.numpy())
            reward = torch.from_numpy(step.reward)
            cut = step.truncated & ~step.terminated
            if cut.any():
                reward[cut] += gamma * self.value(torch.from_numpy(step.final_obs[cut]))
            ro.rewards[t], ro.dones[t] = reward, torch.from_numpy(step.terminated | step.truncated)
        self.steps += self.p.n_steps * self.envs.num_envs

    def remember(self, obs: np.ndarray, actions: np.ndarray) -> None:
        for o, a in zip(obs, actions):
            self.buf_obs[self.buf_pos], self.buf_act[self.buf_pos] = o, a
            self.buf_pos = (self.buf_pos + 1) % len(self.buf_obs)
            self.buf_len = min(self.buf_len + 1, len(self.buf_obs))

    def update(self, adv: torch.Tensor, ret: torch.Tensor, clip: float) -> dict[str, float]:
        """PPO's epochs on the latents, with kl_coef * KL(pi(.|s) || N(0, I)) added to each mini-batch's loss."""
        ro, n = self.rollout, adv.numel()
        obs, latents = ro.obs.flatten(0, 1), ro.actions.flatten(0, 1)
        old_logp, parameters = ro.log_probs.flatten(), self.optimizer.param_groups[0]["params"]
        sums: dict[str, float] = {}
        count = 0
        for _ in range(self.p.n_epochs):
            for idx in torch.randperm(n).split(self.p.batch_size):
                logp, entropy = self.actor.log_prob_entropy(obs[idx], latents[idx])
                loss, m = ppo_loss(logp, old_logp[idx], adv[idx], self.value(obs[idx]), ret[idx], entropy, clip, self.p)
                kl = kl_to_standard_normal(self.actor.net(obs[idx]), self.actor.log_std).mean()
                loss = loss + self.p.kl_coef * kl
                self.optimizer.zero_grad(set_to_none=True)
                loss.backward()
                m["loss/grad_norm"] = float(torch.nn.utils.clip_grad_norm_(parameters, self.p.max_grad_norm))
                m["loss/kl_prior"] = kl.item()
                self.optimizer.step()
                for k, v in m.items():
                    sums[k] = sums.get(k, 0.0) + v
                count += 1
        return {k: v / count for k, v in sums.items()}

    def iteration(self, want_metrics: bool) -> dict[str, float]:
        metrics = super().iteration(want_metrics)
        boundary = (self.stage + 1) * self.ctx.total_steps / self.p.stages
        if self.stage + 1 < self.p.stages and self.steps >= boundary:
            fm = self.refine_decoder()
            self.stage += 1
            if want_metrics:
                metrics["loss/flow_matching"] = fm
        return {**metrics, "train/stage": float(self.stage)} if want_metrics else {}

    def refine_decoder(self) -> float:
        """Flow matching from the fixed prior to the stage's recent actions; then (reset_encoder) a fresh latent
        policy and optimizer. Returns the mean loss of the last 50 updates."""
        p, n = self.p, self.buf_len
        obs, actions = torch.from_numpy(self.buf_obs[:n]), torch.from_numpy(self.buf_act[:n])
        losses = []
        for _ in range(p.decoder_updates):
            idx = torch.randint(0, n, (min(p.decoder_batch, n),))
            x0, t = torch.randn(len(idx), actions.shape[1]), torch.rand(len(idx))
            loss = flow_matching_loss(self.decoder, obs[idx], actions[idx], x0, t)
            self.decoder_optimizer.zero_grad(set_to_none=True)
            loss.backward()
            self.decoder_optimizer.step()
            losses.append(loss.item())
        self.decoded = True
        if p.reset_encoder:
            envs = self.envs
            fresh = GaussianPolicy(envs.obs_dim, envs.action_dim, p.hidden, p.activation, p.ortho_init, p.log_std_init)
            self.actor.load_state_dict(fresh.state_dict())
            self.optimizer = adam([*self.actor.parameters(), *self.critic.parameters()], p.lr, p.adam_eps)
        self.buf_len = self.buf_pos = 0
        return float(np.mean(losses[-50:]))

    @torch.no_grad()
    def act(self, obs: np.ndarray, deterministic: bool) -> np.ndarray:
        x = torch.from_numpy(obs)
        eps = self.actor.mode(x) if deterministic else self.actor.sample(x)[0]
        return torch.maximum(torch.minimum(self.decode(x, eps), self.high), self.low).numpy()

    def modules(self) -> dict[str, torch.nn.Module]:
        return {"actor": self.actor, "critic": self.critic, "decoder": self.decoder}

    def state_dict(self) -> dict[str, Any]:
        return {
            **super().state_dict(),
            "decoder_optimizer": self.decoder_optimizer.state_dict(),
            "stage": self.stage,
            "decoded": self.decoded,
            "buffer": (self.buf_obs.copy(), self.buf_act.copy(), self.buf_len, self.buf_pos),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        super().load_state_dict(state)
        self.decoder_optimizer.load_state_dict(state["decoder_optimizer"])
        self.stage, self.decoded = state["stage"], state["decoded"]
        obs, act, self.buf_len, self.buf_pos = state["buffer"]
        self.buf_obs[:], self.buf_act[:] = obs, act


@CLASSIC.register(
    "gorl",
    params=GoRLParams,
    paper=(papers.GORL, papers.PPO),
    fidelity="reduced",
    departures=(
        "the regulariser is the paper's KL(pi(eps|s) || N(0, I)); the authors' code penalises mean(loc^2) + "
        "mean(scale^2) instead",
        "the decoder learns from the stage's last `decoder_buffer` training transitions (the same environment steps "
        "PPO learns from), not from a separate data-collection run, so GoRL and PPO compare at equal env steps",
        "the critic is kept across stages (the authors start each stage's PPO run afresh); one PPO configuration "
        "for every stage (the authors widen the clip range and gradient clip after stage 0)",
        "a small MLP velocity field with 5 time features and 10 Euler steps; no validation split or best-checkpoint "
        "selection of the decoder",
    ),
)
def gorl(ctx: ClassicContext, params: GoRLParams = GoRLParams()) -> GoRL:
    """GoRL: PPO on a Gaussian latent policy + a flow-matching decoder latent -> action, two timescales."""
    return GoRL(ctx, params)


gorl.action_spaces = frozenset({"continuous"})
gorl.check = check
