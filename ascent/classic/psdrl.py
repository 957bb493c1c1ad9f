"""PSDRL (Sasso, Conserva & Rauber 2023, "Posterior Sampling for Deep Reinforcement Learning", ICML 2023,
arXiv:2305.00477): Thompson sampling over a learned transition model, with a value function planned on the sample.

- Model: features phi(s, a) = MLP([s, onehot(a)]) (ReLU output, plus a bias feature); a linear head predicts
  y = [s' - s, r] and a second head the termination logit. The features and the mean head are trained by SGD on the
  replay buffer; the uncertainty is a Bayesian linear regression over the head on the frozen features (the paper's
  Bayesian last layer): prior W ~ N(0, I / prior_precision), noise variance noise_var, posterior
  Sigma = (prior_precision I + Phi^T Phi / noise_var)^-1, mu = Sigma Phi^T Y / noise_var (one Sigma shared by the
  output columns).
- Thompson sampling: at each episode start a model W ~ N(mu, Sigma) is drawn and followed for the whole episode.
- Continual planning: a value network V is trained on buffer states toward the sampled model's one-step lookahead
  max_a [r_W(s, a) + gamma (1 - p_done(s, a)) V_target(s + ds_W(s, a))]; the agent acts greedily on that lookahead
  with V. No epsilon: exploration comes only from the posterior sample.
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
from ascent.classic.replay import ReplayBuffer


@dataclass(frozen=True)
class PSDRLParams:
    """PSDRL (Sasso et al. 2023, arXiv:2305.00477) on flat observations and discrete actions."""

    lr: float = 1e-3
    """Adam learning rate of the model and the value network, > 0."""
    gamma: float = 0.99
    """Discount, in (0, 1]."""
    hidden: list[int] = field(default_factory=lambda: [64, 64])
    """Hidden widths of the model's feature network and of the value network."""
    features: int = 32
    """Width of the model's last feature layer (the Bayesian regression's inputs, plus a bias)."""
    batch_size: int = 64
    """Transitions per gradient step."""
    buffer_size: int = 50000
    """Replay capacity."""
    learning_starts: int = 500
    """Environment steps of uniform random actions before learning."""
    train_freq: int = 4
    """Environment steps between rounds of one model step and one value step."""
    target_tau: float = 0.01
    """Polyak rate of the value target network, in (0, 1]."""
    prior_precision: float = 1.0
    """Precision of the Gaussian prior over the last layer, > 0."""
    noise_var: float = 0.01
    """Observation noise variance of the Bayesian regression, > 0 (smaller: a sharper posterior)."""

    def __post_init__(self) -> None:
        for key in ("lr", "prior_precision", "noise_var"):
            if not getattr(self, key) > 0:
                raise ValueError(f"{key} must be > 0, got {getattr(self, key)}")
        for key in ("features", "batch_size", "buffer_size", "train_freq"):
            if getattr(self, key) <= 0:
                raise ValueError(f"{key} must be > 0, got {getattr(self, key)}")
        if not 0.0 < self.gamma <= 1.0 or not 0.0 < self.target_tau <= 1.0:
            raise ValueError(f"gamma and target_tau must be in (0, 1], got {self.gamma}, {self.target_tau}")
        if not self.hidden or min(self.hidden) <= 0:
            raise ValueError(f"hidden must list positive layer widths, got {self.hidden}")


def blr_posterior(phi: torch.Tensor, y: torch.Tensor, prior_precision: float, noise_var: float):
    """Bayesian linear regression y = phi W + noise: (mu (F, K), Sigma (F, F)) for phi (N, F), y (N, K)."""
    precision = prior_precision * torch.eye(phi.shape[1], dtype=phi.dtype) + phi.T @ phi / noise_var
    sigma = torch.linalg.inv(precision)
    sigma = 0.5 * (sigma + sigma.T)
    return sigma @ phi.T @ y / noise_var, sigma


class Model(torch.nn.Module):
    """phi(s, a) with a bias feature; `head` (F+1 -> D+1: ds, r) and `done` (F+1 -> 1 logit)."""

    def __init__(self, obs_dim: int, n_actions: int, hidden: list[int], features: int) -> None:
        super().__init__()
        self.n_actions = n_actions
        self.trunk = torch.nn.Sequential(mlp([obs_dim + n_actions, *hidden, features], "relu"), torch.nn.ReLU())
        self.head = torch.nn.Linear(features + 1, obs_dim + 1, bias=False)
        self.done = torch.nn.Linear(features + 1, 1, bias=False)

    def features(self, obs: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
        x = torch.cat([obs, F.one_hot(actions, self.n_actions).float()], dim=-1)
        h = self.trunk(x)
        return torch.cat([h, torch.ones_like(h[:, :1])], dim=-1)  # (B, F + 1)


class PSDRL:
    """Thompson sampling over a Bayesian-last-layer transition model + a value function (see the docstring)."""

    def __init__(self, ctx: ClassicContext, params: PSDRLParams) -> None:
        if not ctx.envs.discrete:
            raise ValueError("psdrl needs a discrete action space")
        self.ctx, self.p, self.envs, self.steps = ctx, params, ctx.envs, 0
        envs, p = ctx.envs, params
        self.model = Model(envs.obs_dim, envs.n_actions, p.hidden, p.features)
        self.value = mlp([envs.obs_dim, *p.hidden, 1], "relu")
        self.value_target = mlp([envs.obs_dim, *p.hidden, 1], "relu")
        self.value_target.load_state_dict(self.value.state_dict())
        self.model_opt = adam(list(self.model.parameters()), p.lr)
        self.value_opt = adam(list(self.value.parameters()), p.lr)
        self.buffer = ReplayBuffer(p.buffer_size, envs.obs_dim, (), discrete=True)
        self.rng = np.random.default_rng(ctx.seed)
        self.gen = torch.Generator().manual_seed(ctx.seed)
        self.steps_per_iteration = p.train_freq * envs.num_envs
        self.sampled = self.model.head.weight.detach().T.clone()  # (F+1, D+1): the model in use

    def lookahead(self, obs: torch.Tensor, weights: torch.Tensor, value: torch.nn.Module) -> torch.Tensor:
        """Q_W(s, a) = r_W + gamma (1 - p_done) V(s + ds_W) for every action, (B, A)."""
        B, A = obs.shape[0], self.envs.n_actions
        o = obs.repeat_interleave(A, 0)
        a = torch.arange(A).repeat(B)
        phi = self.model.features(o, a)
        y = phi @ weights  # (B A, D + 1)
        p_done = torch.sigmoid(self.model.done(phi)).squeeze(-1)
        q = y[:, -1] + self.p.gamma * (1 - p_done) * value(o + y[:, :-1]).squeeze(-1)
        return q.view(B, A)

    @torch.no_grad()
    def resample(self) -> None:
        """W ~ N(mu, Sigma) from the posterior over the head given the whole buffer's features."""
        n = len(self.buffer)
        if n < 2:
            return
        obs, act = torch.from_numpy(self.buffer.obs[:n]), torch.from_numpy(self.buffer.actions[:n])
        nxt, rew = torch.from_numpy(self.buffer.next_obs[:n]), torch.from_numpy(self.buffer.rewards[:n])
        phi = self.model.features(obs, act).double()
        y = torch.cat([nxt - obs, rew[:, None]], dim=-1).double()
        mu, sigma = blr_posterior(phi, y, self.p.prior_precision, self.p.noise_var)
        chol = torch.linalg.cholesky(sigma + 1e-9 * torch.eye(sigma.shape[0], dtype=sigma.dtype))
        z = torch.randn(mu.shape, generator=self.gen, dtype=mu.dtype)
        self.sampled = (mu + chol @ z).float()

    def iteration(self, want_metrics: bool) -> dict[str, float]:
        envs, E = self.envs, self.envs.num_envs
        for _ in range(self.p.train_freq):
            obs = envs.obs
            if self.steps < self.p.learning_starts:
                actions = self.rng.integers(0, envs.n_actions, size=E)
            else:
                with torch.no_grad():
                    actions = self.lookahead(torch.from_numpy(obs), self.sampled, self.value).argmax(1).numpy()
            step = envs.step(actions)
            self.buffer.add(obs, actions, step.reward, step.final_obs, step.terminated)
            self.steps += E
            if (step.terminated | step.truncated).any() and self.steps >= self.p.learning_starts:
                self.resample()  # Thompson sampling: a new model for the next episode
        if self.steps < self.p.learning_starts:
            return {}
        model_loss, value_loss = self.train_step()
        return {"loss/model": model_loss, "loss/value": value_loss} if want_metrics else {}

    def train_step(self) -> tuple[float, float]:
        b = self.buffer.sample(self.p.batch_size, self.rng)
        phi = self.model.features(b.obs, b.actions)
        y = torch.cat([b.next_obs - b.obs, b.rewards[:, None]], dim=-1)
        model_loss = F.mse_loss(self.model.head(phi), y) + F.binary_cross_entropy_with_logits(
            self.model.done(phi).squeeze(-1), b.terminated
        )
        self.model_opt.zero_grad(set_to_none=True)
        model_loss.backward()
        self.model_opt.step()
        with torch.no_grad():
            target = self.lookahead(b.obs, self.sampled, self.value_target).max(1).values
        value_loss = F.mse_loss(self.value(b.obs).squeeze(-1), target)
        self.value_opt.zero_grad(set_to_none=True)
        value_loss.backward()
        self.value_opt.step()
        with torch.no_grad():
            for t, s in zip(self.value_target.parameters(), self.value.parameters()):
                t.lerp_(s, self.p.target_tau)
        return model_loss.item(), value_loss.item()

    @torch.no_grad()
    def act(self, obs: np.ndarray, deterministic: bool) -> np.ndarray:
        """Greedy on the lookahead; deterministic: with the posterior mean (the trained head), else the sample."""
        weights = self.model.head.weight.T if deterministic else self.sampled
        return self.lookahead(torch.from_numpy(obs), weights, self.value).argmax(1).numpy()

    def modules(self) -> dict[str, torch.nn.Module]:
        return {"model": self.model, "value": self.value, "value_target": self.value_target}

    def state_dict(self) -> dict[str, Any]:
        return {
            "model_opt": self.model_opt.state_dict(),
            "value_opt": self.value_opt.state_dict(),
            "buffer": self.buffer.state_dict(),
            "rng": self.rng.bit_generator.state,
            "gen": self.gen.get_state(),
            "steps": self.steps,
            "sampled": self.sampled.clone(),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.model_opt.load_state_dict(state["model_opt"])
        self.value_opt.load_state_dict(state["value_opt"])
        self.buffer.load_state_dict(state["buffer"])
        self.rng.bit_generator.state = state["rng"]
        self.gen.set_state(state["gen"])
        self.steps, self.sampled = state["steps"], state["sampled"].clone()


@CLASSIC.register(
    "psdrl",
    params=PSDRLParams,
    paper=papers.PSDRL,
    fidelity="reduced",
    departures=(
        "flat observations: no autoencoder; the latent state is the observation itself and the model predicts "
        "s' - s, r and termination with an MLP (the paper: a GRU latent model over an autoencoder's codes)",
        "the value is fitted on the sampled model's one-step lookahead from buffer states (the paper's continual "
        "planning likewise uses one-step lookahead); one model step and one value step every train_freq steps",
        "the deterministic evaluation policy uses the posterior mean head instead of a sample",
    ),
)
def psdrl(ctx: ClassicContext, params: PSDRLParams = PSDRLParams()) -> PSDRL:
    """PSDRL: Thompson sampling over a Bayesian-last-layer transition model, value planned on the sample."""
    return PSDRL(ctx, params)


psdrl.action_spaces = frozenset({"discrete"})
