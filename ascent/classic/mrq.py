"""MR.Q: model-free RL on model-based representations (Fujimoto, D'Oro, Zhang, Tian & Rabbat 2025, "Towards
General-Purpose Model-Free Reinforcement Learning", ICLR 2025, arXiv:2501.16142), for continuous actions.

A state encoder z_s = f(s) and a state-action encoder z_sa = g(z_s, a) are trained, as a model, to make the value
approximately linear in z_sa: a linear head on z_sa predicts the next latent, the reward (two-hot over symexp
bins) and termination. The encoder loss unrolls the model in latent space over H_enc steps of a stored sequence:
    z_0 = f(s_0);  (d^_k, z_{k+1}, r^_k) = head(g(z_k, a_k))
    L_enc = sum_k [ w_dyn mean((z_{k+1} - f'(s_{k+1}))^2 m_k) + w_r mean(CE(r^_k, twohot(r_k)) m_k)
                    + w_d mean((d^_k - term_k)^2 m_k) ]
f' the target encoder, m_k = prod_{j<k} (1 - end_j) masking what follows an episode's end. The value Q_i(z_sa)
(twin, Huber loss) learns from an n-step target (n = H_Q, shorter where the episode ended), in units of the
replay's mean |r| (reward_scale):
    y = (sum_k gamma^k r_k m_k + (1 - term) gamma^n min_i Q'_i(g'(z'_n, a'_n)) * target_reward_scale) / reward_scale,
    z'_n = f'(s_n), a'_n = clip(pi'(z'_n) + clip(N(0, sigma'), -c, c), -1, 1)     (TD3 target policy smoothing)
and the deterministic actor pi(z_s) = tanh(u(z_s)) maximises the mean of both Q_i through the encoder:
    L_pi = -mean_i mean(Q_i(g(z_s, pi(z_s)))) + w_pre mean(u^2)      (the encoder moves only by L_enc).
All target networks (encoder, value, policy) are copied every target_update_freq gradient steps; at each copy the
reward scales move (target <- current, current <- mean |r| of the replay) and the encoder takes
target_update_freq gradient steps in one burst, as in the paper's code.

Simplifications here (documented choices, not the paper's): continuous actions only (no Gumbel-softmax discrete
variant), no image encoder or augmentation, uniform replay (LAP prioritisation dropped), torch's default
initialisation (not Xavier), the value heads are 3-layer LayerNorm-ELU MLPs, the termination loss is always on
(the paper skips it for envs that never terminate; the target is then 0). Network sizes and the encoder horizon
are parameters; the defaults are the paper's, the comparison in docs/classic.md uses smaller ones.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from ascent import papers
from ascent.classic.base import CLASSIC, ClassicContext
from ascent.typed import ConfigError


@dataclass(frozen=True)
class MRQParams:
    """MR.Q (Fujimoto et al. 2025, arXiv:2501.16142); defaults are the paper's single hyper-parameter set."""

    buffer_size: int = 1_000_000
    """Replay capacity in transitions (split evenly over the vector environments), > 0."""
    learning_starts: int = 10_000
    """Environment steps of uniformly random actions before learning starts, >= 0."""
    batch_size: int = 256
    """Sequences per gradient step (encoder and value/policy), > 0."""
    gamma: float = 0.99
    """Discount, in (0, 1]."""
    target_update_freq: int = 250
    """Gradient steps between hard copies of all target networks (and the encoder's burst of as many steps), > 0."""
    exploration_noise: float = 0.2
    """Std of the Gaussian noise added to the actor's action in [-1, 1] units while collecting, >= 0."""
    target_policy_noise: float = 0.2
    """Std of the TD3 target policy smoothing noise, >= 0."""
    noise_clip: float = 0.3
    """Clip of the target policy noise, >= 0."""
    dyn_weight: float = 1.0
    """Weight of the next-latent (dynamics) loss, >= 0."""
    reward_weight: float = 0.1
    """Weight of the two-hot reward cross-entropy, >= 0."""
    done_weight: float = 0.1
    """Weight of the termination loss, >= 0."""
    enc_horizon: int = 5
    """Steps the encoder's model is unrolled in latent space (H_enc), >= 1."""
    q_horizon: int = 3
    """Steps of the value's multi-step return (H_Q), >= 1."""
    zs_dim: int = 512
    """Width of the state embedding z_s, > 0."""
    za_dim: int = 256
    """Width of the action embedding inside g, > 0."""
    zsa_dim: int = 512
    """Width of the state-action embedding z_sa, > 0."""
    hidden: int = 512
    """Hidden width of every MLP (encoder, value, policy), > 0."""
    enc_lr: float = 1e-4
    """AdamW learning rate of the encoder, > 0."""
    value_lr: float = 3e-4
    """AdamW learning rate of the value, > 0."""
    policy_lr: float = 3e-4
    """AdamW learning rate of the policy, > 0."""
    weight_decay: float = 1e-4
    """AdamW weight decay of all three, >= 0."""
    value_grad_clip: float = 20.0
    """Max gradient norm of the value, > 0."""
    pre_activ_weight: float = 1e-5
    """Weight of the penalty on the actor's pre-tanh output, >= 0."""
    num_bins: int = 65
    """Two-hot reward bins, evenly spaced in symlog space over [-bin_range, bin_range], >= 2."""
    bin_range: float = 10.0
    """Symlog half-range of the reward bins, > 0."""

    def __post_init__(self) -> None:
        for key in ("buffer_size", "batch_size", "target_update_freq", "enc_horizon", "q_horizon", "zs_dim"):
            if getattr(self, key) <= 0:
                raise ConfigError(f"mrq: {key} must be > 0, got {getattr(self, key)}")
        for key in ("za_dim", "zsa_dim", "hidden", "enc_lr", "value_lr", "policy_lr", "value_grad_clip", "bin_range"):
            if not getattr(self, key) > 0:
                raise ConfigError(f"mrq: {key} must be > 0, got {getattr(self, key)}")
        for key in ("learning_starts", "exploration_noise", "target_policy_noise", "noise_clip", "dyn_weight"):
            if getattr(self, key) < 0:
                raise ConfigError(f"mrq: {key} must be >= 0, got {getattr(self, key)}")
        for key in ("reward_weight", "done_weight", "weight_decay", "pre_activ_weight"):
            if getattr(self, key) < 0:
                raise ConfigError(f"mrq: {key} must be >= 0, got {getattr(self, key)}")
        if not 0.0 < self.gamma <= 1.0:
            raise ConfigError(f"mrq: gamma must be in (0, 1], got {self.gamma}")
        if self.num_bins < 2:
            raise ConfigError(f"mrq: num_bins must be >= 2, got {self.num_bins}")


# ----------------------------------------------------------------------------------------------------- the losses


def symexp_bins(num_bins: int, bin_range: float) -> torch.Tensor:
    """sign(x)(exp|x| - 1) of num_bins points evenly spaced in [-bin_range, bin_range]: (K,).

    >>> symexp_bins(3, 1.0).tolist()
    [-1.7182817459106445, 0.0, 1.7182817459106445]
    """
    x = torch.linspace(-bin_range, bin_range, num_bins)
    return x.sign() * (x.abs().exp() - 1.0)


def two_hot(x: torch.Tensor, bins: torch.Tensor) -> torch.Tensor:
    """(N,) values -> (N, K) weights on the two bins around each value (linear interpolation; clipped at the ends).

    >>> two_hot(torch.tensor([0.25, 5.0]), torch.tensor([0.0, 1.0, 2.0])).tolist()
    [[0.75, 0.25, 0.0], [0.0, 0.0, 1.0]]
    """
    x = x.clamp(bins[0], bins[-1])
    upper = torch.searchsorted(bins, x.contiguous(), right=True).clamp(1, len(bins) - 1)  # (N,)
    lower = upper - 1
    w = (x - bins[lower]) / (bins[upper] - bins[lower])  # (N,) weight of the upper bin
    out = torch.zeros(len(x), len(bins), dtype=x.dtype)
    out.scatter_(1, lower[:, None], (1.0 - w)[:, None])
    return out.scatter_add_(1, upper[:, None], w[:, None])


def encoder_loss(
    pred_z: torch.Tensor,
    pred_r: torch.Tensor,
    pred_d: torch.Tensor,
    target_z: torch.Tensor,
    rewards: torch.Tensor,
    terminated: torch.Tensor,
    valid: torch.Tensor,
    bins: torch.Tensor,
    weights: tuple[float, float, float],
) -> torch.Tensor:
    """sum_k w_dyn mean((z^ - z')^2 m) + w_r mean(CE(r^, twohot(r)) m) + w_d mean((d^ - term)^2 m).

    pred_z, target_z (B, H, Z); pred_r logits (B, H, K); pred_d (B, H); rewards, terminated, valid (B, H);
    weights (w_dyn, w_r, w_d). Means are over the batch (and Z) at each step k, summed over k.
    """
    B, H, K = pred_r.shape
    m = valid  # (B, H)
    dyn = ((pred_z - target_z).pow(2) * m[..., None]).mean(dim=(0, 2)).sum()
    target_r = two_hot(rewards.reshape(-1), bins).reshape(B, H, K)
    ce = -(target_r * F.log_softmax(pred_r, dim=-1)).sum(-1)  # (B, H)
    rew = (ce * m).mean(dim=0).sum()
    done = ((pred_d - terminated).pow(2) * m).mean(dim=0).sum()
    return weights[0] * dyn + weights[1] * rew + weights[2] * done


def value_target(
    rewards: torch.Tensor,
    valid: torch.Tensor,
    terminated: torch.Tensor,
    next_q: torch.Tensor,
    gamma: float,
    reward_scale: float,
    target_reward_scale: float,
) -> torch.Tensor:
    """(sum_k gamma^k r_k m_k + (1 - term) gamma^n next_q target_reward_scale) / reward_scale, n = sum_k m_k;
    rewards, valid (B, H); terminated (B,) of the last valid step; next_q (B,) = min_i Q'_i at its next state.

    >>> value_target(torch.tensor([[1.0, 2.0]]), torch.tensor([[1.0, 1.0]]), torch.tensor([0.0]),
    ...              torch.tensor([10.0]), 0.5, 2.0, 1.0).tolist()
    [2.25]
    """
    H = rewards.shape[1]
    discounts = gamma ** torch.arange(H, dtype=rewards.dtype)  # (H,)
    ret = (rewards * valid * discounts).sum(1)  # (B,)
    n = valid.sum(1)  # (B,)
    return (ret + (1.0 - terminated) * gamma**n * next_q * target_reward_scale) / reward_scale


# --------------------------------------------------------------------------------------------------- the networks


class LNMLP(nn.Module):
    """Linear -> LayerNorm -> activation for each hidden layer, then a plain linear output (the paper's MLP)."""

    def __init__(self, sizes: list[int], activation: str) -> None:
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(a, b) for a, b in zip(sizes[:-1], sizes[1:]))
        self.act = F.elu if activation == "elu" else F.relu

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.layers[:-1]:
            x = self.act(F.layer_norm(layer(x), (layer.out_features,)))
        return self.layers[-1](x)


class Encoder(nn.Module):
    """f: s -> z_s (B, Zs); g: (z_s, a) -> z_sa (B, Zsa); head: z_sa -> (done (B,), next z_s (B, Zs), reward (B, K))."""

    def __init__(self, obs_dim: int, action_dim: int, p: MRQParams) -> None:
        super().__init__()
        self.zs_mlp = LNMLP([obs_dim, p.hidden, p.hidden, p.zs_dim], "elu")
        self.za = nn.Linear(action_dim, p.za_dim)
        self.zsa_mlp = LNMLP([p.zs_dim + p.za_dim, p.hidden, p.hidden, p.zsa_dim], "elu")
        self.head = nn.Linear(p.zsa_dim, 1 + p.zs_dim + p.num_bins)
        self.zs_dim = p.zs_dim

    def zs(self, obs: torch.Tensor) -> torch.Tensor:
        z = self.zs_mlp(obs)
        return F.elu(F.layer_norm(z, (z.shape[-1],)))

    def forward(self, zs: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        return self.zsa_mlp(torch.cat([zs, F.elu(self.za(action))], dim=-1))

    def model(self, zs: torch.Tensor, action: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        out = self.head(self(zs, action))
        return out[:, 0], out[:, 1 : self.zs_dim + 1], out[:, self.zs_dim + 1 :]


class Value(nn.Module):
    """Twin Q_i(z_sa): (B, Zsa) -> (2, B)."""

    def __init__(self, p: MRQParams) -> None:
        super().__init__()
        self.q1 = LNMLP([p.zsa_dim, p.hidden, p.hidden, p.hidden, 1], "elu")
        self.q2 = LNMLP([p.zsa_dim, p.hidden, p.hidden, p.hidden, 1], "elu")

    def forward(self, zsa: torch.Tensor) -> torch.Tensor:
        return torch.stack([self.q1(zsa).squeeze(-1), self.q2(zsa).squeeze(-1)])


class Policy(nn.Module):
    """pi(z_s) = tanh(u(z_s)) in [-1, 1]^A; forward returns (action (B, A), pre-activation u (B, A))."""

    def __init__(self, action_dim: int, p: MRQParams) -> None:
        super().__init__()
        self.net = LNMLP([p.zs_dim, p.hidden, p.hidden, action_dim], "relu")

    def forward(self, zs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        u = self.net(zs)
        return torch.tanh(u), u


# ----------------------------------------------------------------------------------------------------- the replay


class SequenceReplay:
    """Time-major ring (T, E) of vector steps, so that H consecutive steps of one environment can be drawn;
    actions stored in [-1, 1]. `end` marks terminated or truncated steps (what follows is another episode)."""

    KEYS = ("obs", "actions", "rewards", "next_obs", "terminated", "end")

    def __init__(self, capacity: int, num_envs: int, obs_dim: int, action_dim: int) -> None:
        self.rows, self.pos, self.full = max(capacity // num_envs, 1), 0, False
        T, E = self.rows, num_envs
        self.obs, self.next_obs = np.zeros((T, E, obs_dim), np.float32), np.zeros((T, E, obs_dim), np.float32)
        self.actions = np.zeros((T, E, action_dim), np.float32)
        self.rewards, self.terminated, self.end = (np.zeros((T, E), np.float32) for _ in range(3))

    def __len__(self) -> int:
        return self.rows if self.full else self.pos

    def add(self, obs, actions, rewards, next_obs, terminated, truncated) -> None:
        p = self.pos
        self.obs[p], self.actions[p], self.rewards[p], self.next_obs[p] = obs, actions, rewards, next_obs
        self.terminated[p], self.end[p] = terminated, np.logical_or(terminated, truncated)
        self.pos = (p + 1) % self.rows
        self.full = self.full or self.pos == 0

    def reward_scale(self) -> float:
        return max(float(np.abs(self.rewards[: len(self)]).mean()), 1e-8)

    def sample(self, batch_size: int, horizon: int, rng: np.random.Generator) -> dict[str, torch.Tensor]:
        """Sequences (B, H, ...) of one environment each, with `valid` (B, H) = prod_{j<k} (1 - end_j)."""
        oldest = self.pos if self.full else 0
        start = rng.integers(0, len(self) - horizon + 1, size=batch_size)  # (B,)
        env = rng.integers(0, self.obs.shape[1], size=batch_size)  # (B,)
        rows = (oldest + start[:, None] + np.arange(horizon)) % self.rows  # (B, H)
        out = {k: torch.from_numpy(getattr(self, k)[rows, env[:, None]]) for k in self.KEYS}
        end = out["end"]
        out["valid"] = torch.cumprod(torch.cat([torch.ones(batch_size, 1), 1.0 - end[:, :-1]], dim=1), dim=1)
        return out

    def state_dict(self) -> dict[str, Any]:
        n = len(self)
        return {"pos": self.pos, "full": self.full, **{k: getattr(self, k)[:n].copy() for k in self.KEYS}}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        n = len(state["rewards"])
        if n > self.rows:
            raise ValueError(f"the checkpoint's replay holds {n} vector steps, more than capacity {self.rows}")
        self.pos, self.full = state["pos"], state["full"]
        for key in self.KEYS:
            getattr(self, key)[:n] = state[key]


# -------------------------------------------------------------------------------------------------- the algorithm


def adamw(module: nn.Module, lr: float, weight_decay: float) -> torch.optim.AdamW:
    return torch.optim.AdamW(module.parameters(), lr=lr, weight_decay=weight_decay, fused=True)


class MRQ:
    """MR.Q on a VecEnv with continuous actions (see the module docstring)."""

    def __init__(self, ctx: ClassicContext, params: MRQParams) -> None:
        self.ctx, self.p, self.envs, self.steps = ctx, params, ctx.envs, 0
        envs, p = ctx.envs, params
        self.encoder, self.value, self.policy = (
            Encoder(envs.obs_dim, envs.action_dim, p),
            Value(p),
            Policy(envs.action_dim, p),
        )
        self.encoder_target = Encoder(envs.obs_dim, envs.action_dim, p)
        self.value_target, self.policy_target = Value(p), Policy(envs.action_dim, p)
        for m in self.modules().values():
            m.to(ctx.device)
        self.sync_targets()
        self.encoder_opt = adamw(self.encoder, p.enc_lr, p.weight_decay)
        self.value_opt = adamw(self.value, p.value_lr, p.weight_decay)
        self.policy_opt = adamw(self.policy, p.policy_lr, p.weight_decay)
        self.buffer = SequenceReplay(p.buffer_size, envs.num_envs, envs.obs_dim, envs.action_dim)
        self.bins = symexp_bins(p.num_bins, p.bin_range)
        self.scale = np.asarray((envs.high - envs.low) / 2.0, np.float32)
        self.bias = np.asarray((envs.high + envs.low) / 2.0, np.float32)
        self.rng = np.random.default_rng(ctx.seed)
        self.steps_per_iteration = envs.num_envs
        self.training_steps, self.reward_scale, self.target_reward_scale = 0, 1.0, 0.0

    def sync_targets(self) -> None:
        for src, dst in ((self.encoder, self.encoder_target), (self.value, self.value_target)):
            dst.load_state_dict(src.state_dict())
        self.policy_target.load_state_dict(self.policy.state_dict())

    @torch.no_grad()
    def collect(self) -> None:
        envs, E = self.envs, self.envs.num_envs
        obs = envs.obs
        if self.steps < self.p.learning_starts:
            unit = self.rng.uniform(-1.0, 1.0, size=(E, envs.action_dim)).astype(np.float32)
        else:
            unit = self.policy(self.encoder.zs(torch.from_numpy(obs)))[0]
            unit = (unit + self.p.exploration_noise * torch.randn_like(unit)).clamp(-1.0, 1.0).numpy()
        step = envs.step(unit * self.scale + self.bias)
        self.buffer.add(obs, unit, step.reward, step.final_obs, step.terminated, step.truncated)
        self.steps += E

    def iteration(self, want_metrics: bool) -> dict[str, float]:
        self.collect()
        horizon = max(self.p.enc_horizon, self.p.q_horizon)
        if self.steps <= self.p.learning_starts or len(self.buffer) < horizon:
            return {}
        metrics = [self.gradient_step() for _ in range(self.envs.num_envs)][-1]
        return {k: float(v) for k, v in metrics.items()} if want_metrics else {}

    def gradient_step(self) -> dict[str, torch.Tensor]:
        """Every target_update_freq steps: copy the targets, move the reward scales, train the encoder in a burst;
        then one value and one policy step."""
        metrics: dict[str, torch.Tensor] = {}
        if self.training_steps % self.p.target_update_freq == 0:
            self.sync_targets()
            self.target_reward_scale, self.reward_scale = self.reward_scale, self.buffer.reward_scale()
            for _ in range(self.p.target_update_freq):
                metrics["loss/encoder"] = self.encoder_step()
        self.training_steps += 1
        metrics.update(self.value_policy_step())
        metrics["charts/reward_scale"] = torch.tensor(self.reward_scale)
        return metrics

    def encoder_step(self) -> torch.Tensor:
        p = self.p
        b = self.buffer.sample(p.batch_size, p.enc_horizon, self.rng)
        B, H = b["rewards"].shape
        with torch.no_grad():
            target_z = self.encoder_target.zs(b["next_obs"].reshape(B * H, -1)).reshape(B, H, -1)  # (B, H, Zs)
        z, preds = self.encoder.zs(b["obs"][:, 0]), []
        for k in range(H):
            d, z, r = self.encoder.model(z, b["actions"][:, k])
            preds.append((z, r, d))
        pred_z, pred_r, pred_d = (torch.stack(x, dim=1) for x in zip(*preds))
        loss = encoder_loss(
            pred_z, pred_r, pred_d, target_z, b["rewards"], b["terminated"], b["valid"], self.bins,
            (p.dyn_weight, p.reward_weight, p.done_weight),
        )  # fmt: skip
        self.encoder_opt.zero_grad(set_to_none=True)
        loss.backward()
        self.encoder_opt.step()
        return loss.detach()

    def value_policy_step(self) -> dict[str, torch.Tensor]:
        p = self.p
        b = self.buffer.sample(p.batch_size, p.q_horizon, self.rng)
        last = (b["valid"].sum(1).long() - 1)[:, None]  # (B, 1): the last step of the sequence's episode
        next_obs = b["next_obs"].gather(1, last[..., None].expand(-1, -1, b["next_obs"].shape[-1])).squeeze(1)
        with torch.no_grad():
            next_zs = self.encoder_target.zs(next_obs)  # (B, Zs)
            next_a = self.policy_target(next_zs)[0]
            noise = (torch.randn_like(next_a) * p.target_policy_noise).clamp(-p.noise_clip, p.noise_clip)
            next_q = self.value_target(self.encoder_target(next_zs, (next_a + noise).clamp(-1.0, 1.0)))  # (2, B)
            y = value_target(
                b["rewards"], b["valid"], b["terminated"].gather(1, last).squeeze(1), next_q.min(0).values,
                p.gamma, self.reward_scale, self.target_reward_scale,
            )  # fmt: skip
            zs = self.encoder.zs(b["obs"][:, 0])
            zsa = self.encoder(zs, b["actions"][:, 0])
        q = self.value(zsa)  # (2, B)
        v_loss = F.smooth_l1_loss(q, y.expand(2, -1))
        self.value_opt.zero_grad(set_to_none=True)
        v_loss.backward()
        nn.utils.clip_grad_norm_(self.value.parameters(), p.value_grad_clip)
        self.value_opt.step()
        action, pre = self.policy(zs)
        pi_loss = -self.value(self.encoder(zs, action)).mean() + p.pre_activ_weight * pre.pow(2).mean()
        self.policy_opt.zero_grad(set_to_none=True)
        pi_loss.backward()  # the value's and encoder's grads are cleared before their next steps
        self.policy_opt.step()
        return {"loss/value": v_loss.detach(), "loss/policy": pi_loss.detach()}

    @torch.no_grad()
    def act(self, obs: np.ndarray, deterministic: bool) -> np.ndarray:
        unit = self.policy(self.encoder.zs(torch.from_numpy(obs)))[0]
        if not deterministic:
            unit = (unit + self.p.exploration_noise * torch.randn_like(unit)).clamp(-1.0, 1.0)
        return unit.numpy() * self.scale + self.bias

    def modules(self) -> dict[str, torch.nn.Module]:
        return {
            "encoder": self.encoder,
            "encoder_target": self.encoder_target,
            "value": self.value,
            "value_target": self.value_target,
            "policy": self.policy,
            "policy_target": self.policy_target,
        }

    def state_dict(self) -> dict[str, Any]:
        return {
            "optimizers": [o.state_dict() for o in (self.encoder_opt, self.value_opt, self.policy_opt)],
            "buffer": self.buffer.state_dict(),
            "rng": self.rng.bit_generator.state,
            "steps": self.steps,
            "training_steps": self.training_steps,
            "reward_scales": [self.reward_scale, self.target_reward_scale],
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        for opt, s in zip((self.encoder_opt, self.value_opt, self.policy_opt), state["optimizers"]):
            opt.load_state_dict(s)
        self.buffer.load_state_dict(state["buffer"])
        self.rng.bit_generator.state = state["rng"]
        self.steps, self.training_steps = state["steps"], state["training_steps"]
        self.reward_scale, self.target_reward_scale = state["reward_scales"]


@CLASSIC.register(
    "mrq",
    params=MRQParams,
    paper=papers.MR_Q,
    fidelity="reduced",
    departures=(
        (
            "continuous actions only; uniform replay (no LAP); no image encoder; default initialisation; the "
            "termination loss is always on"
        ),
    ),
)
def mrq(ctx: ClassicContext, params: MRQParams = MRQParams()) -> MRQ:
    """MR.Q, model-free RL on a model-based (dynamics, reward, termination) state-action encoding with a TD3-style
    deterministic actor (Fujimoto, D'Oro, Zhang, Tian & Rabbat 2025, ICLR 2025, arXiv:2501.16142).

    Encoder: sum_k w_dyn |z^_{k+1} - f'(s_{k+1})|^2 + w_r CE(r^_k, twohot(r_k)) + w_d (d^_k - term_k)^2 over the
    latent unroll; value: Huber(Q_i(z_sa), (sum_k gamma^k r_k + gamma^n min Q'(z'_sa) target_scale) / scale);
    actor: -Q(g(z_s, pi(z_s))) + w_pre |u|^2. Continuous actions, uniform replay (no LAP).
    """
    return MRQ(ctx, params)


mrq.action_spaces = frozenset({"continuous"})
