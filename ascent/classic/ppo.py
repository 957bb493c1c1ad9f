"""PPO for Gymnasium environments, discrete and continuous actions (Schulman et al. 2017, "Proximal policy
optimization algorithms", arXiv:1707.06347), with the details of Stable-Baselines3's implementation.

One iteration: a rollout of n_steps vector steps, GAE(gamma, lambda) advantages (`ascent.algorithms.gae`), then
n_epochs passes over shuffled mini-batches of
    L = L_clip + vf_coef * (V(s) - R)^2 - ent_coef * H[pi(.|s)],
L_clip being ascent's registered `ppo_clip` loss (the one the language-model side trains with) on one
"token" per transition: max(-A rho, -A clip(rho, 1 - eps, 1 + eps)), rho = pi(a|s) / pi_old(a|s), A normalised
per mini-batch. Separate actor and critic networks share one Adam; learning rate and clip range may decay
linearly to 0 over the run.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import torch
import torch.nn.functional as F

from ascent import papers
from ascent.algorithms.losses import ppo_clip
from ascent.algorithms.types import LossInput
from ascent.classic.base import CLASSIC, ClassicContext
from ascent.classic.networks import CategoricalPolicy, GaussianPolicy, adam, mlp
from ascent.classic.storage import Rollout
from ascent.config.schema import AlgorithmConfig


@dataclass(frozen=True)
class PPOParams:
    """PPO (Schulman et al. 2017, arXiv:1707.06347); defaults are Stable-Baselines3's."""

    n_steps: int = 2048
    """Vector steps per rollout (a rollout holds n_steps * num_envs transitions)."""
    batch_size: int = 64
    """Transitions per mini-batch (the last one of an epoch may be smaller)."""
    n_epochs: int = 10
    """Passes over each rollout."""
    gamma: float = 0.99
    """Discount, in (0, 1]."""
    gae_lambda: float = 0.95
    """GAE lambda (Schulman et al. 2016, arXiv:1506.02438), in [0, 1]."""
    lr: float = 3e-4
    """Adam learning rate (actor and critic), > 0."""
    lr_schedule: Literal["constant", "linear"] = "constant"
    """linear: lr * (1 - env steps / total steps), updated before each rollout's epochs."""
    clip: float = 0.2
    """Clip range eps of the ratio, > 0."""
    clip_schedule: Literal["constant", "linear"] = "constant"
    """linear: clip * (1 - env steps / total steps)."""
    ent_coef: float = 0.0
    """Entropy bonus weight, >= 0."""
    vf_coef: float = 0.5
    """Value loss weight (the loss is the plain mean squared error, as in Stable-Baselines3), >= 0."""
    max_grad_norm: float = 0.5
    """Clip the global gradient norm to this, > 0."""
    normalize_advantage: bool = True
    """Normalise advantages per mini-batch (mean 0, std 1)."""
    hidden: list[int] = field(default_factory=lambda: [64, 64])
    """Hidden layer widths of both the actor and the (separate) critic."""
    activation: Literal["tanh", "relu"] = "tanh"
    """Hidden activation."""
    ortho_init: bool = True
    """Orthogonal init (gain sqrt 2; policy head 0.01, value head 1), zero biases; False: torch's default."""
    log_std_init: float = 0.0
    """Initial log standard deviation of the Gaussian policy (continuous actions)."""
    adam_eps: float = 1e-5
    """Adam's epsilon."""

    def __post_init__(self) -> None:
        for key in ("n_steps", "batch_size", "n_epochs"):
            if getattr(self, key) <= 0:
                raise ValueError(f"{key} must be > 0, got {getattr(self, key)}")
        if not 0.0 < self.gamma <= 1.0 or not 0.0 <= self.gae_lambda <= 1.0:
            raise ValueError(f"gamma must be in (0, 1] and gae_lambda in [0, 1], got {self.gamma}, {self.gae_lambda}")
        for key in ("lr", "clip", "max_grad_norm", "adam_eps"):
            if not getattr(self, key) > 0:
                raise ValueError(f"{key} must be > 0, got {getattr(self, key)}")
        if self.ent_coef < 0 or self.vf_coef < 0:
            raise ValueError(f"ent_coef and vf_coef must be >= 0, got {self.ent_coef}, {self.vf_coef}")
        if not self.hidden or min(self.hidden) <= 0:
            raise ValueError(f"hidden must list positive layer widths, got {self.hidden}")


def ppo_loss(
    new_logp: torch.Tensor,
    old_logp: torch.Tensor,
    advantages: torch.Tensor,
    values: torch.Tensor,
    returns: torch.Tensor,
    entropy: torch.Tensor,
    clip: float,
    params: PPOParams,
) -> tuple[torch.Tensor, dict[str, float]]:
    """(loss, metrics) of one mini-batch, every input (B,): the registered `ppo_clip` surrogate on (B, 1)
    "tokens" + vf_coef * MSE(V, R) - ent_coef * mean entropy."""
    adv = advantages
    if params.normalize_advantage and adv.numel() > 1:
        adv = (adv - adv.mean()) / (adv.std() + 1e-8)
    ones = torch.ones_like(adv[:, None])  # (B, 1): every transition is one "token"
    inp = LossInput(
        new_logp[:, None], old_logp[:, None], adv[:, None], ones, float(adv.numel()), float(adv.numel()), 1.0
    )
    cfg = AlgorithmConfig(clip_low=clip, clip_high=clip, kl_coef=0.0, loss_agg="token-mean")
    policy_loss, metrics = ppo_clip(inp, cfg)
    value_loss = F.mse_loss(values, returns)
    entropy_mean = entropy.mean()
    loss = policy_loss + params.vf_coef * value_loss - params.ent_coef * entropy_mean
    metrics.update({"loss/value": value_loss.item(), "loss/entropy": entropy_mean.item()})
    return loss, metrics


class PPO:
    """PPO on a VecEnv: `iteration` = collect a rollout + learn from it (see the module docstring)."""

    def __init__(self, ctx: ClassicContext, params: PPOParams) -> None:
        self.ctx, self.p, self.envs, self.steps = ctx, params, ctx.envs, 0
        envs, p = ctx.envs, params
        check(params, envs.num_envs)
        if envs.discrete:
            self.actor = CategoricalPolicy(envs.obs_dim, envs.n_actions, p.hidden, p.activation, p.ortho_init)
        else:
            self.actor = GaussianPolicy(
                envs.obs_dim, envs.action_dim, p.hidden, p.activation, p.ortho_init, p.log_std_init
            )
        self.critic = mlp([envs.obs_dim, *p.hidden, 1], p.activation, 1.0 if p.ortho_init else None)
        self.actor.to(ctx.device), self.critic.to(ctx.device)
        parameters = [*self.actor.parameters(), *self.critic.parameters()]
        self.optimizer = adam(parameters, p.lr, p.adam_eps)
        action_shape = () if envs.discrete else (envs.action_dim,)
        self.steps_per_iteration = p.n_steps * envs.num_envs
        self.rollout = Rollout.empty(p.n_steps, envs.num_envs, envs.obs_dim, action_shape, envs.discrete)

    def value(self, obs: torch.Tensor) -> torch.Tensor:
        return self.critic(obs).squeeze(-1)  # (B,)

    @torch.no_grad()
    def collect(self) -> None:
        """n_steps vector steps into `self.rollout`; truncated episodes bootstrap through their reward."""
        ro, gamma = self.rollout, self.p.gamma
        for t in range(self.p.n_steps):
            obs = torch.from_numpy(self.envs.obs)  # (E, D)
            action, logp = self.actor.sample(obs)
            ro.obs[t], ro.actions[t], ro.log_probs[t], ro.values[t] = obs, action, logp, self.value(obs)
            step = self.envs.step(action.numpy())
            reward = self.reward(obs, action, step)
            cut = step.truncated & ~step.terminated
            if cut.any():
                reward[cut] += gamma * self.value(torch.from_numpy(step.final_obs[cut]))
            ro.rewards[t], ro.dones[t] = reward, torch.from_numpy(step.terminated | step.truncated)
        self.steps += self.p.n_steps * self.envs.num_envs

    def reward(self, obs: torch.Tensor, action: torch.Tensor, step: Any) -> torch.Tensor:
        """The reward PPO learns from for one vector step, (E,): the environment's (a subclass may learn its own:
        GAIL's discriminator reward, ascent.offline.gail)."""
        return torch.from_numpy(step.reward)

    def schedules(self) -> tuple[float, float]:
        """(lr, clip) for the coming epochs: linear ones decay with the share of the run done."""
        left = max(0.0, 1.0 - self.steps / self.ctx.total_steps)
        lr = self.p.lr * (left if self.p.lr_schedule == "linear" else 1.0)
        clip = self.p.clip * (left if self.p.clip_schedule == "linear" else 1.0)
        return lr, clip

    def iteration(self, want_metrics: bool) -> dict[str, float]:
        self.collect()
        lr, clip = self.schedules()
        for group in self.optimizer.param_groups:
            group["lr"] = lr
        with torch.no_grad():
            last = self.value(torch.from_numpy(self.envs.obs))
        adv, ret = self.rollout.advantages(last, self.p.gamma, self.p.gae_lambda)  # (T, E) each
        metrics = self.update(adv.flatten(), ret.flatten(), clip)
        return {**metrics, "train/lr": lr, "train/clip": clip} if want_metrics else {}

    def update(self, adv: torch.Tensor, ret: torch.Tensor, clip: float) -> dict[str, float]:
        """n_epochs over shuffled mini-batches; the mean of each metric over every mini-batch."""
        ro, n = self.rollout, adv.numel()
        obs, actions = ro.obs.flatten(0, 1), ro.actions.flatten(0, 1)
        old_logp, parameters = ro.log_probs.flatten(), self.optimizer.param_groups[0]["params"]
        sums: dict[str, float] = {}
        count = 0
        for _ in range(self.p.n_epochs):
            for idx in torch.randperm(n).split(self.p.batch_size):
                logp, entropy = self.actor.log_prob_entropy(obs[idx], actions[idx])
                loss, m = ppo_loss(logp, old_logp[idx], adv[idx], self.value(obs[idx]), ret[idx], entropy, clip, self.p)
                self.optimizer.zero_grad(set_to_none=True)
                loss.backward()
                m["loss/grad_norm"] = float(torch.nn.utils.clip_grad_norm_(parameters, self.p.max_grad_norm))
                self.optimizer.step()
                for k, v in m.items():
                    sums[k] = sums.get(k, 0.0) + v
                count += 1
        return {k: v / count for k, v in sums.items()}

    @torch.no_grad()
    def act(self, obs: np.ndarray, deterministic: bool) -> np.ndarray:
        x = torch.from_numpy(obs)
        return (self.actor.mode(x) if deterministic else self.actor.sample(x)[0]).numpy()

    def modules(self) -> dict[str, torch.nn.Module]:
        return {"actor": self.actor, "critic": self.critic}

    def state_dict(self) -> dict[str, Any]:
        return {"optimizer": self.optimizer.state_dict(), "steps": self.steps}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.optimizer.load_state_dict(state["optimizer"])
        self.steps = state["steps"]


def check(params: PPOParams, num_envs: int) -> None:
    """A ValueError when a mini-batch would be larger than a rollout."""
    if params.batch_size > params.n_steps * num_envs:
        raise ValueError(
            f"batch_size {params.batch_size} exceeds a rollout of {params.n_steps} x {num_envs} = "
            f"{params.n_steps * num_envs} transitions (n_steps x classic.num_envs); lower it or raise n_steps"
        )


@CLASSIC.register(
    "ppo", params=PPOParams, paper=(papers.PPO, papers.GAE, papers.PPO_IMPLEMENTATION_DETAILS), fidelity="faithful"
)
def ppo(ctx: ClassicContext, params: PPOParams = PPOParams()) -> PPO:
    """PPO, clipped surrogate + GAE (Schulman et al. 2017, arXiv:1707.06347); discrete and continuous actions.

    Per mini-batch: L = mean max(-A rho, -A clip(rho, 1 - eps, 1 + eps)) + vf_coef mean (V(s) - R)^2
    - ent_coef mean H[pi(.|s)], rho = pi(a|s) / pi_old(a|s), A = GAE(gamma, lambda) normalised, R = A + V_old.
    """
    return PPO(ctx, params)


ppo.action_spaces = frozenset({"discrete", "continuous"})
ppo.check = check
