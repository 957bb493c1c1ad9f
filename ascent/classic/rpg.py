"""RPG (Huang, Liang, Ling, Li, Gan & Su 2023, "Reparameterized Policy Learning for Multimodal Trajectory
Optimization", ICML 2023, arXiv:2307.10710; the authors' code, github.com/haosulab/RPG, was read for the losses and
the update order): the policy is a generative model of good trajectories, a latent z ~ pi(z|s_0) drawn at an
episode's start and held, then a ~ pi(a|s, z), trained through a learned latent world model.

Objective (the paper's variational bound, per imagined step t of a z-conditioned rollout from a replayed state):

    J = E[ sum_t gamma^t ( r_t - alpha log pi(a_t|s_t, z) + beta log q(z|s_t, a_t) ) - beta log pi(z|s_0) ]

q(z|s, a) is a learned posterior ("info" network, trained by maximum likelihood on the imagined steps); its term
is a lower bound on the mutual information between z and the trajectory, so different latents are rewarded for
doing distinguishable things: the policy stays multimodal. The policy gradient is *reparameterised*: a = tanh(mu +
sigma eps), and the actor maximises a lambda-mixture over horizons i < H of
    V_i = sum_{k<i} gamma^k r^_k + sum_{k<=i} gamma^k extra_k + gamma^i Q(h_i, a_i, z)
computed by backpropagating through the model's latent transitions h_{k+1} = h_k + f(h_k, a_k) and predicted rewards
r^(h, a) (`lambda_value`). The model (encoder, dynamics, reward, twin Q) learns on replayed H-step sequences: latent
consistency |h^_{t+1} - enc'(o_{t+1})|^2 to a Polyak target encoder, reward MSE, and Q(h^_t, a_t, z) toward
r_t + gamma (1 - term) V'(o_{t+1}, z), V' the same lambda-value imagined with the target model. pi(z|s_0) is a
softmax over Q_z(s_0) / beta with Q_z regressed on the imagined value of each latent from replayed episode starts.

Exploration: an object-centric count bonus, `bonus_scale / sqrt(N(cell(o'[bonus_dims])))`, N the visits of a grid
cell of the *object's* coordinates (`bonus_dims`: on ascent/DecoyPoint-v0 the point's x, y), added to the replayed
rewards the model learns (the authors add their density bonus the same way, `as_reward`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

import numpy as np
import torch
from torch import nn

from ascent import papers
from ascent.classic.base import CLASSIC, ClassicContext
from ascent.classic.networks import SquashedGaussianPolicy, adam, mlp
from ascent.classic.rpg_parts import CountBonus, SequenceReplay


@dataclass(frozen=True)
class RPGParams:
    """RPG (Huang et al. 2023, arXiv:2307.10710): the world model, the latent policy and the bound's weights."""

    lr: float = 3e-4
    """Adam learning rate of every network and of the temperature, > 0."""
    buffer_size: int = 100_000
    """Replay capacity in transitions."""
    learning_starts: int = 1000
    """Environment steps of uniformly random actions and latents before learning starts, >= horizon."""
    batch_size: int = 128
    """Sequences (model) and start states (actor, latent policy) per update."""
    gamma: float = 0.99
    """Discount, in (0, 1]."""
    tau: float = 0.005
    """Polyak step of the target model, in (0, 1]."""
    horizon: int = 3
    """H: steps of the replayed sequences the model learns on and of the imagined rollouts the actor differentiates."""
    lam: float = 0.97
    """Weight lam^i of the i-step value V_i in the actor's lambda-mixture (the authors' 0.97), in (0, 1]."""
    n_latents: int = 6
    """K: values of the categorical latent z (1: no latent, a model-based single-mode policy)."""
    info_coef: float = 1.0
    """beta: weight of log q(z|s, a) - log pi(z|s_0), the mutual-information part of the bound, and the softmax
    temperature of pi(z|s_0), >= 0."""
    alpha_init: float = 0.1
    """Initial entropy temperature alpha of pi(a|s, z) (learned toward target_entropy), > 0."""
    target_entropy: Optional[float] = None
    """Entropy alpha aims at (None: -dim(A), the authors' automatic target)."""
    bonus_scale: float = 0.1
    """Weight of the count bonus (0: none), >= 0."""
    bonus_cell: float = 0.2
    """Edge of a count cell in the object's coordinates, > 0."""
    bonus_dims: list[int] = field(default_factory=lambda: [0, 1])
    """Observation entries that are the object's coordinates (empty: all of them)."""
    state_dim: int = 32
    """Width of the latent state h = enc(o)."""
    hidden: list[int] = field(default_factory=lambda: [64, 64])
    """Hidden widths of every network (ReLU)."""
    state_coef: float = 10.0
    """Weight of the latent-consistency loss (reward and value losses weigh 0.5 each, the authors')."""
    train_freq: int = 1
    """Environment steps between two model updates (1: one update per step, the authors' ratio; more: cheaper)."""
    actor_every: int = 2
    """Model updates per actor / posterior update (the authors' actor_delay)."""
    latent_every: int = 2
    """Model updates per update of pi(z|s_0)."""
    max_grad_norm: float = 1.0
    """Global gradient-norm clip of each update (the authors'), > 0."""

    def __post_init__(self) -> None:
        for key in (
            "buffer_size",
            "batch_size",
            "horizon",
            "n_latents",
            "state_dim",
            "train_freq",
            "actor_every",
            "latent_every",
        ):
            if getattr(self, key) <= 0:
                raise ValueError(f"{key} must be > 0, got {getattr(self, key)}")
        if self.learning_starts < self.horizon:
            raise ValueError(f"learning_starts must be >= horizon ({self.horizon}), got {self.learning_starts}")
        if not (self.lr > 0 and self.alpha_init > 0 and self.bonus_cell > 0 and self.max_grad_norm > 0):
            raise ValueError("lr, alpha_init, bonus_cell and max_grad_norm must be > 0")
        if self.info_coef < 0 or self.bonus_scale < 0 or self.state_coef < 0:
            raise ValueError("info_coef, bonus_scale and state_coef must be >= 0")
        for key in ("gamma", "tau", "lam"):
            if not 0.0 < getattr(self, key) <= 1.0:
                raise ValueError(f"{key} must be in (0, 1], got {getattr(self, key)}")
        if not self.hidden or min(self.hidden) <= 0:
            raise ValueError(f"hidden must list positive layer widths, got {self.hidden}")


def lambda_value(
    rewards: torch.Tensor, extras: torch.Tensor, q: torch.Tensor, gamma: float, lam: float
) -> torch.Tensor:
    """The actor's value of an imagined rollout: sum_i lam^i V_i / sum_i lam^i over i < H with
    V_i = sum_{k<i} gamma^k r_k + sum_{k<=i} gamma^k extra_k + gamma^i q_i; rewards, extras (H, B), q (H, B, C)
    -> (B, C) (C: the twin critics).

    >>> r, e, q = torch.tensor([[1.0]]), torch.tensor([[0.5]]), torch.tensor([[[2.0]]])
    >>> float(lambda_value(r, e, q, 0.9, 0.97))
    2.5
    """
    prefix, discount, values = torch.zeros_like(rewards[0]), 1.0, []
    for i in range(rewards.shape[0]):
        prefix = prefix + discount * extras[i]
        values.append(prefix[..., None] + discount * q[i])  # (B, C)
        prefix = prefix + discount * rewards[i]
        discount *= gamma
    w = lam ** torch.arange(rewards.shape[0], dtype=rewards.dtype)  # (H,)
    return (torch.stack(values) * w[:, None, None]).sum(0) / w.sum()


def elbo_extras(
    log_pi_a: torch.Tensor,
    log_q: torch.Tensor,
    log_pi_z: torch.Tensor,
    first: torch.Tensor,
    alpha: float,
    beta: float,
) -> torch.Tensor:
    """The bound's per-step terms besides the reward: -alpha log pi(a_t|s_t, z) + beta log q(z|s_t, a_t), and at step
    0 of a rollout that starts an episode (first = 1) also -beta log pi(z|s_0); log_pi_a, log_q (H, B), log_pi_z and
    first (B,) -> (H, B).

    >>> elbo_extras(torch.tensor([[-1.0]]), torch.tensor([[-0.5]]), torch.tensor([-2.0]), torch.tensor([1.0]), 0.2, 0.1)
    tensor([[0.3500]])
    """
    extras = -alpha * log_pi_a + beta * log_q
    extras[0] = extras[0] - beta * log_pi_z * first
    return extras


class WorldModel(nn.Module):
    """Latent model: h = enc(o); h' = h + f([h, a]); r^(h, a); twin Q(h, a, onehot z) -> (..., 2)."""

    def __init__(self, obs_dim: int, action_dim: int, n_latents: int, state_dim: int, hidden: list[int]) -> None:
        super().__init__()
        self.enc = mlp([obs_dim, *hidden, state_dim], "relu")
        self.dyn = mlp([state_dim + action_dim, *hidden, state_dim], "relu")
        self.rew = mlp([state_dim + action_dim, *hidden, 1], "relu")
        self.q1 = mlp([state_dim + action_dim + n_latents, *hidden, 1], "relu")
        self.q2 = mlp([state_dim + action_dim + n_latents, *hidden, 1], "relu")

    def step(self, h: torch.Tensor, a: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(next latent (B, S), predicted reward (B,))."""
        x = torch.cat([h, a], -1)
        return h + self.dyn(x), self.rew(x).squeeze(-1)

    def q(self, h: torch.Tensor, a: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
        x = torch.cat([h, a, z], -1)
        return torch.cat([self.q1(x), self.q2(x)], -1)  # (B, 2)


@dataclass
class Imagined:
    """A z-conditioned rollout of H steps in the model from latent states h_0 (B rows)."""

    states: torch.Tensor
    """(H + 1, B, S) h_0 .. h_H"""
    actions: torch.Tensor
    """(H, B, A)"""
    log_pi_a: torch.Tensor
    """(H, B)"""
    rewards: torch.Tensor
    """(H, B) predicted rewards"""
    q: torch.Tensor
    """(H, B, 2) Q(h_i, a_i, z)"""


class RPG:
    """Model-based, latent-conditioned actor (see the module docstring); one environment."""

    def __init__(self, ctx: ClassicContext, params: RPGParams) -> None:
        envs, p = ctx.envs, params
        if envs.discrete:
            raise ValueError("rpg needs a continuous (Box) action space")
        if any(not 0 <= d < envs.obs_dim for d in p.bonus_dims):
            raise ValueError(f"rpg: bonus_dims {p.bonus_dims} must index the {envs.obs_dim} observation entries")
        self.ctx, self.p, self.envs, self.steps = ctx, p, envs, 0
        K, S, A = p.n_latents, p.state_dim, envs.action_dim
        self.model = WorldModel(envs.obs_dim, A, K, S, p.hidden).to(ctx.device)
        self.target = WorldModel(envs.obs_dim, A, K, S, p.hidden).to(ctx.device)
        self.target.load_state_dict(self.model.state_dict())
        self.actor = SquashedGaussianPolicy(S + K, A, p.hidden, envs.low, envs.high).to(ctx.device)
        self.posterior = mlp([S + A, *p.hidden, K], "relu").to(ctx.device)  # q(z|h, a) logits
        self.latent_q = mlp([S, *p.hidden, K], "relu").to(ctx.device)  # Q_z(h_0); pi(z|s_0) = softmax(Q_z / beta)
        self.log_alpha = nn.Parameter(torch.tensor(float(np.log(p.alpha_init)), device=ctx.device))
        self.target_entropy = -float(A) if p.target_entropy is None else p.target_entropy
        self.opts = {
            "model": adam(list(self.model.parameters()), p.lr),
            "actor": adam(list(self.actor.parameters()), p.lr),
            "posterior": adam(list(self.posterior.parameters()), p.lr),
            "latent": adam(list(self.latent_q.parameters()), p.lr),
            "alpha": adam([self.log_alpha], p.lr),
        }
        self.buffer = SequenceReplay(p.buffer_size, envs.obs_dim, A)
        self.bonus = CountBonus(list(p.bonus_dims) or list(range(envs.obs_dim)), p.bonus_cell)
        self.rng = np.random.default_rng(ctx.seed)
        self.z, self.first, self.updates = 0, True, 0
        self.steps_per_iteration = 1

    # ---- acting -------------------------------------------------------------------------------------------------
    def onehot(self, z: torch.Tensor) -> torch.Tensor:
        return nn.functional.one_hot(z.long(), self.p.n_latents).float()

    def latent_logits(self, h: torch.Tensor) -> torch.Tensor:
        """log pi(z|s_0) over the K latents, (B, K)."""
        return torch.log_softmax(self.latent_q(h) / max(self.p.info_coef, 1e-3), -1)

    @torch.no_grad()
    def collect(self) -> None:
        envs, p = self.envs, self.p
        obs = envs.obs  # (1, D)
        h = self.model.enc(torch.from_numpy(obs))
        if self.first:  # a new episode: draw its latent
            if self.steps < p.learning_starts:
                self.z = int(self.rng.integers(p.n_latents))
            else:
                self.z = int(torch.distributions.Categorical(logits=self.latent_logits(h)[0]).sample())
        if self.steps < p.learning_starts:
            action = self.rng.uniform(envs.low, envs.high, size=(1, envs.action_dim)).astype(np.float32)
        else:
            action = self.actor.sample(torch.cat([h, self.onehot(torch.tensor([self.z]))], -1))[0].numpy()
        step = envs.step(action)
        done = bool(step.terminated[0] or step.truncated[0])
        self.buffer.add(obs[0], action[0], float(step.reward[0]), step.final_obs[0], bool(step.terminated[0]), done,
                        self.z, self.first)  # fmt: skip
        self.bonus.add(step.final_obs[0])
        self.first = done
        self.steps += 1

    @torch.no_grad()
    def act(self, obs: np.ndarray, deterministic: bool) -> np.ndarray:
        """Evaluation: the latent pi(z|s) prefers from the current state (the arg-max, or a sample), then the actor
        (tanh of its mean, or a sample)."""
        h = self.model.enc(torch.from_numpy(obs))
        logits = self.latent_logits(h)
        z = logits.argmax(-1) if deterministic else torch.distributions.Categorical(logits=logits).sample()
        x = torch.cat([h, self.onehot(z)], -1)
        return (self.actor.mode(x) if deterministic else self.actor.sample(x)[0]).numpy()

    # ---- learning -----------------------------------------------------------------------------------------------
    def imagine(self, model: WorldModel, h: torch.Tensor, z1h: torch.Tensor) -> Imagined:
        """H steps of the actor in `model` from h (B, S) under latents z1h (B, K), differentiable throughout."""
        states, actions, logps, rewards, qs = [h], [], [], [], []
        for _ in range(self.p.horizon):
            a, logp = self.actor.sample(torch.cat([h, z1h], -1))
            qs.append(model.q(h, a, z1h))
            h, r = model.step(h, a)
            states.append(h), actions.append(a), logps.append(logp), rewards.append(r)
        st = torch.stack
        return Imagined(st(states), st(actions), st(logps), st(rewards), st(qs))

    def value(self, im: Imagined, z1h: torch.Tensor, first: torch.Tensor, alpha: float) -> torch.Tensor:
        """The bound's lambda-value of an imagined rollout, (B, 2)."""
        H, B = im.rewards.shape
        log_q = torch.log_softmax(self.posterior(torch.cat([im.states[:-1], im.actions], -1)), -1)  # (H, B, K)
        log_q = (log_q * z1h).sum(-1)  # (H, B)
        log_pi_z = (self.latent_logits(im.states[0].detach()) * z1h).sum(-1).detach()  # (B,)
        extras = elbo_extras(im.log_pi_a, log_q, log_pi_z, first, alpha, self.p.info_coef)
        return lambda_value(im.rewards, extras, im.q, self.p.gamma, self.p.lam)

    def update_model(self) -> dict[str, float]:
        p, H = self.p, self.p.horizon
        seq = self.buffer.sample_sequences(p.batch_size, H, self.rng)
        rewards = seq.rewards + p.bonus_scale * self.bonus.bonus(seq.next_obs)  # (H, B)
        z1h = self.onehot(seq.z)  # (B, K)
        alpha = float(self.log_alpha.detach().exp())
        with torch.no_grad():
            nxt = seq.next_obs.flatten(0, 1)  # (H B, D)
            h_next = self.target.enc(nxt)
            zz = z1h.repeat(H, 1)
            v = self.value(self.imagine(self.target, h_next, zz), zz, torch.zeros(len(nxt)), alpha).min(-1).values
            y = rewards + p.gamma * (1 - seq.terminated) * v.view(H, -1)  # (H, B)
            h_target = h_next.view(H, -1, h_next.shape[-1])
        h, ls, lr, lq = self.model.enc(seq.obs[0]), 0.0, 0.0, 0.0
        norm = seq.mask.sum().clamp_min(1.0)
        for t in range(H):
            q = self.model.q(h, seq.actions[t], z1h)  # (B, 2)
            h, r = self.model.step(h, seq.actions[t])
            m = seq.mask[t]
            ls = ls + (m * (h - h_target[t]).pow(2).mean(-1)).sum() / norm
            lr = lr + (m * (r - rewards[t]).pow(2)).sum() / norm
            lq = lq + (m[:, None] * (q - y[t][:, None]).pow(2)).sum() / norm
        loss = p.state_coef * ls + 0.5 * lr + 0.5 * lq
        self.step_opt("model", self.model, loss)
        with torch.no_grad():
            torch._foreach_lerp_(list(self.target.parameters()), list(self.model.parameters()), p.tau)
        return {"loss/model_state": ls.item(), "loss/model_reward": lr.item(), "loss/value": lq.item()}

    def update_actor(self) -> dict[str, float]:
        """Reparameterised gradient of the bound through the model (whose weights this step leaves alone), then the
        posterior's likelihood and the temperature on the same imagined steps."""
        b = self.buffer.sample(self.p.batch_size, self.rng)
        h0, z1h = self.model.enc(b.obs).detach(), self.onehot(b.z)
        alpha = float(self.log_alpha.detach().exp())
        im = self.imagine(self.model, h0, z1h)
        loss = -self.value(im, z1h, b.first, alpha).min(-1).values.mean()
        params = list(self.actor.parameters())
        grads = torch.autograd.grad(loss, params)
        for param, grad in zip(params, grads):
            param.grad = grad
        nn.utils.clip_grad_norm_(params, self.p.max_grad_norm)
        self.opts["actor"].step()
        x = torch.cat([im.states[:-1], im.actions], -1).detach()
        nll = nn.functional.cross_entropy(self.posterior(x).flatten(0, 1), b.z.long().repeat(self.p.horizon))
        self.step_opt("posterior", self.posterior, nll)
        a_loss = -(self.log_alpha * (im.log_pi_a.detach() + self.target_entropy)).mean()
        self.opts["alpha"].zero_grad(set_to_none=True)
        a_loss.backward()
        self.opts["alpha"].step()
        return {"loss/policy": loss.item(), "loss/posterior_nll": nll.item(), "loss/entropy": alpha}

    def update_latent_policy(self) -> dict[str, float]:
        """Q_z(h_0) toward the imagined value of every latent from replayed episode starts (the ent_z term aside)."""
        b = self.buffer.sample(self.p.batch_size, self.rng, starts=True)
        if b is None:
            return {}
        K = self.p.n_latents
        with torch.no_grad():
            h0 = self.model.enc(b.obs)  # (B, S)
            hk = h0.repeat_interleave(K, 0)  # (B K, S)
            zk = self.onehot(torch.arange(K).repeat(len(h0)))
            v = self.value(
                self.imagine(self.model, hk, zk), zk, torch.zeros(len(hk)), float(self.log_alpha.detach().exp())
            )
            target = v.min(-1).values.view(-1, K)  # (B, K)
        loss = (self.latent_q(h0) - target).pow(2).mean()
        self.step_opt("latent", self.latent_q, loss)
        return {"loss/latent_q": loss.item()}

    def step_opt(self, name: str, module: nn.Module, loss: torch.Tensor) -> None:
        self.opts[name].zero_grad(set_to_none=True)
        loss.backward()
        nn.utils.clip_grad_norm_(module.parameters(), self.p.max_grad_norm)
        self.opts[name].step()

    def iteration(self, want_metrics: bool) -> dict[str, float]:
        self.collect()
        if self.steps <= self.p.learning_starts or self.steps % self.p.train_freq:
            return {}
        metrics = self.update_model()
        self.updates += 1
        if self.updates % self.p.actor_every == 0:
            metrics.update(self.update_actor())
        if self.updates % self.p.latent_every == 0:
            metrics.update(self.update_latent_policy())
        return metrics if want_metrics else {}

    # ---- checkpoints --------------------------------------------------------------------------------------------
    def modules(self) -> dict[str, nn.Module]:
        return {
            "model": self.model,
            "target": self.target,
            "actor": self.actor,
            "posterior": self.posterior,
            "latent_q": self.latent_q,
        }

    def state_dict(self) -> dict[str, Any]:
        return {
            "log_alpha": self.log_alpha.detach().clone(),
            "optimizers": {k: o.state_dict() for k, o in self.opts.items()},
            "buffer": self.buffer.state_dict(),
            "bonus": self.bonus.state_dict(),
            "rng": self.rng.bit_generator.state,
            "counters": (self.steps, self.z, self.first, self.updates),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        with torch.no_grad():
            self.log_alpha.copy_(state["log_alpha"])
        for k, s in state["optimizers"].items():
            self.opts[k].load_state_dict(s)
        self.buffer.load_state_dict(state["buffer"])
        self.bonus.load_state_dict(state["bonus"])
        self.rng.bit_generator.state = state["rng"]
        self.steps, self.z, self.first, self.updates = state["counters"]


def check(params: RPGParams, num_envs: int) -> None:
    """A ValueError unless one environment (the replayed sequences are one episode stream)."""
    if num_envs != 1:
        raise ValueError(f"rpg learns from one environment's step sequences: set classic.num_envs=1 (got {num_envs})")


@CLASSIC.register(
    "rpg",
    params=RPGParams,
    paper=papers.RPG,
    fidelity="reduced",
    departures=(
        "flat observations, an MLP encoder and a residual MLP latent transition (the authors: a GRU over action "
        "embeddings), trained on 3-step sequences; the bound's terms and the lambda-value mixing are the authors'",
        "a categorical latent only (K = 6; the paper also uses Gaussian latents); no latent relabelling of replayed "
        "transitions by the posterior",
        "pi(z|s_0) is softmax(Q_z / beta) with Q_z regressed on the imagined value of every latent (the authors' "
        "QPolicy regresses the sampled latent only); the actor and the targets use the minimum of the twin critics",
        "the exploration bonus is a hashed grid count over the object's coordinates (the authors' Count/RND "
        "density estimators on object state); one environment; no CEM planning at acting time",
        "evaluation picks the latent pi(z|s) prefers from the current state at every step (ascent's evaluation "
        "interface is memoryless); training holds z for the episode as the paper",
    ),
)
def rpg(ctx: ClassicContext, params: RPGParams = RPGParams()) -> RPG:
    """RPG: z ~ pi(z|s_0), a ~ pi(a|s, z), the variational bound's gradient reparameterised through a world model."""
    return RPG(ctx, params)


rpg.action_spaces = frozenset({"continuous"})
rpg.check = check
