"""BR-RCRL, Bayesian-reparameterised reward-conditioned RL (Ding, Che, Zhao & Pavone 2023, "Bayesian
Reparameterization of Reward-Conditioned Reinforcement Learning with Energy-based Models", ICML 2023,
arXiv:2305.11340), and the plain return-conditioned policy it is measured against (`rcrl`).

A return-conditioned policy pi(a | s, R) learned directly treats every return-to-go (RTG) R as an independent input
and is queried at test time with returns the data may not support from the current state. BR-RCRL writes the policy
by Bayes' rule, pi(a | s, R) ∝ p(a | s) p(R | s, a), with
    p(a | s)     the behaviour policy (a Gaussian),
    p(R | s, a)  a categorical distribution of the discounted RTG over `n_bins` bins spanning the dataset's RTGs,
    p(R | s)     a categorical model of the RTG achievable from s (trained by likelihood on its own),
and trains p(a|s) and p(R|s,a) jointly as an energy-based model, E(s, a, R) = -log p(a|s) - log p(R|s,a), by
InfoNCE against `n_negatives` uniform actions, plus the likelihood of p(R|s,a) at the data:
    J = CE(softmax_{a in {a_data, a_1..a_N}} -E(s, a, R_data), a_data) - weight_r mean log p(R_data | s, a_data)
Adaptive inference (the paper's "avoiding out-of-distribution RTG queries"): at a state s, the target is the highest
bin k* whose upper tail under p(R | s) still holds mass >= `threshold`; the action maximises
p(a|s) P(R >= R_k* | s, a), found by the derivative-free optimiser of implicit BC (Florence et al. 2021,
arXiv:2109.00137): `n_samples` actions from p(a|s), `dfo_iters` rounds of resampling by softmax(-E) and shrinking
Gaussian noise, then the best. As in the authors' d3rlpy fork (github.com/GilgameshD/Bayesian-RCRL, `RCRLImpl`:
the "state" RTG model and the "greater" target).

`rcrl` is the plain return-conditioned policy (RvS-R, Emmons et al. 2021, arXiv:2112.10751, in the MLP form the
brief allows for a decision transformer): a Gaussian pi(a | s, R) fitted by likelihood to (s, RTG, a), queried at
every state with one fixed target, the `target_quantile` quantile of the dataset's RTGs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from ascent.classic.base import CLASSIC, ClassicContext
from ascent.classic.networks import adam, mlp
from ascent.offline.base import Batch, OfflineAlgorithm, check_common
from ascent.offline.networks import GaussianActor
from ascent.offline.preferences import episode_lengths
from ascent.registry import Paper

BR_RCRL_PAPER = Paper(
    "BR-RCRL",
    "Ding, Che, Zhao & Pavone",
    2023,
    "Bayesian Reparameterization of Reward-Conditioned Reinforcement Learning with Energy-based Models (ICML 2023)",
    "arXiv:2305.11340",
)
RVS_PAPER = Paper(
    "RvS",
    "Emmons, Eysenbach, Kostrikov & Levine",
    2021,
    "RvS: What is Essential for Offline RL via Supervised Learning? (ICLR 2022)",
    "arXiv:2112.10751",
    section="baselines",
)


def discounted_rtg(rewards: np.ndarray, lengths: np.ndarray, gamma: float) -> np.ndarray:
    """(N,) g_t = r_t + gamma g_{t+1} within each episode (0 after its last step).

    >>> discounted_rtg(np.array([1.0, 1.0, 1.0, 2.0]), np.array([3, 1]), 0.5).tolist()
    [1.75, 1.5, 1.0, 2.0]
    """
    out, start = np.zeros(len(rewards), np.float64), 0
    for n in lengths:
        g = 0.0
        for t in range(start + n - 1, start - 1, -1):
            g = rewards[t] + gamma * g
            out[t] = g
        start += n
    return out


def rtg_bins(rtg: np.ndarray, lo: float, hi: float, n_bins: int) -> np.ndarray:
    """The bin of each RTG among `n_bins` equal bins of [lo, hi] (values outside go to the end bins).

    >>> rtg_bins(np.array([0.0, 0.49, 0.5, 1.0, 7.0]), 0.0, 1.0, 2).tolist()
    [0, 0, 1, 1, 1]
    """
    width = (hi - lo) / n_bins if hi > lo else 1.0
    return np.clip(np.floor((rtg - lo) / width), 0, n_bins - 1).astype(np.int64)


def adaptive_bin(p_rtg: torch.Tensor, threshold: float) -> torch.Tensor:
    """(B,) the highest bin k whose upper tail sum_{j >= k} p(R = j | s) is still >= threshold, from (B, K) probs.

    >>> adaptive_bin(torch.tensor([[0.5, 0.3, 0.15, 0.05], [0.0, 0.0, 0.0, 1.0]]), 0.1).tolist()
    [2, 3]
    """
    tail = p_rtg.flip(-1).cumsum(-1).flip(-1)  # (B, K)
    k = torch.arange(p_rtg.shape[-1], device=p_rtg.device).expand_as(tail)
    return torch.where(tail >= threshold - 1e-6, k, torch.zeros_like(k)).max(-1).values


@dataclass(frozen=True)
class RTGFields:
    """What both return-conditioned learners share."""

    lr: float = 5e-4
    """Adam learning rate, > 0 (the authors' 5e-4)."""
    batch_size: int = 256
    """Transitions per gradient step."""
    gamma: float = 0.99
    """Discount of the return-to-go, in (0, 1]."""
    hidden: list[int] = field(default_factory=lambda: [256, 256, 256])
    """Hidden widths of every network (ReLU; the authors' 3 x 256)."""
    normalize_obs: bool = True
    """Standardise observations by the dataset's mean and std (+1e-3), in training and when acting."""


@dataclass(frozen=True)
class BRRCRLParams(RTGFields):
    """BR-RCRL (Ding et al. 2023, arXiv:2305.11340); defaults the authors' where they apply (module docstring)."""

    n_bins: int = 40
    """Bins of the RTG distributions over [min, max] of the dataset's discounted RTGs, >= 2."""
    n_negatives: int = 64
    """Uniform negative actions per positive in the InfoNCE loss (the authors' 256), >= 1."""
    weight_r: float = 1.0
    """Weight of the likelihood of p(R | s, a) at the data, >= 0."""
    threshold: float = 0.1
    """Adaptive inference: the target bin is the highest whose upper-tail mass under p(R | s) is >= this, in (0, 1]."""
    n_samples: int = 512
    """Candidate actions of the derivative-free optimiser per state (the authors' 65536), >= 1."""
    dfo_iters: int = 5
    """Resampling rounds of the derivative-free optimiser, >= 0."""
    noise_scale: float = 0.33
    """Initial noise of the optimiser, in units of the normalised [-1, 1] action range, >= 0."""
    noise_shrink: float = 0.5
    """Factor of the noise after every round, in (0, 1]."""

    def __post_init__(self) -> None:
        check_common(self)
        if self.n_bins < 2 or self.n_negatives < 1 or self.n_samples < 1 or self.dfo_iters < 0 or self.weight_r < 0:
            raise ValueError("n_bins >= 2, n_negatives >= 1, n_samples >= 1, dfo_iters >= 0 and weight_r >= 0")
        if not 0.0 < self.threshold <= 1.0 or not 0.0 < self.noise_shrink <= 1.0 or self.noise_scale < 0:
            raise ValueError(f"threshold and noise_shrink must be in (0, 1] and noise_scale >= 0, got "
                             f"{self.threshold}, {self.noise_shrink}, {self.noise_scale}")  # fmt: skip


@dataclass(frozen=True)
class RCRLParams(RTGFields):
    """The plain return-conditioned policy (RvS-R's MLP form): pi(a | s, R), one fixed target R at test time."""

    target_quantile: float = 1.0
    """Test-time target: this quantile of the dataset's discounted RTGs (1: the largest), in [0, 1]."""

    def __post_init__(self) -> None:
        check_common(self)
        if not 0.0 <= self.target_quantile <= 1.0:
            raise ValueError(f"target_quantile must be in [0, 1], got {self.target_quantile}")


class ReturnConditioned(OfflineAlgorithm):
    """The dataset's discounted RTG per transition (`self.rtg`, (N,)) and actions normalised to [-1, 1]."""

    def __init__(self, ctx: ClassicContext, params: Any) -> None:
        super().__init__(ctx, params)
        rtg = discounted_rtg(self.data.rewards, episode_lengths(ctx.dataset), params.gamma)
        self.rtg_lo, self.rtg_hi = float(rtg.min()), float(rtg.max())
        self.rtg = rtg
        self.t_rtg = torch.from_numpy(rtg.astype(np.float32)).to(ctx.device)
        self.a_scale = torch.as_tensor((self.high - self.low) / 2.0, dtype=torch.float32, device=ctx.device)
        self.a_bias = torch.as_tensor((self.high + self.low) / 2.0, dtype=torch.float32, device=ctx.device)
        self.t_actions = ((self.t_actions - self.a_bias) / self.a_scale).clamp(-1.0, 1.0)  # (N, A) in [-1, 1]
        self.t_rewards = self.t_rtg  # what `sample` hands to `update` as rewards: the RTG

    def act(self, obs: np.ndarray, deterministic: bool) -> np.ndarray:
        return super().act(obs, deterministic) * self.a_scale.cpu().numpy() + self.a_bias.cpu().numpy()


class BRRCRL(ReturnConditioned):
    """BR-RCRL (see the module docstring); continuous actions."""

    name = "br_rcrl"

    def __init__(self, ctx: ClassicContext, params: BRRCRLParams) -> None:
        super().__init__(ctx, params)
        p, D, A, K = params, self.obs_dim, self.action_dim, params.n_bins
        self.t_bins = torch.from_numpy(rtg_bins(self.rtg, self.rtg_lo, self.rtg_hi, K)).to(ctx.device)
        self.behaviour = mlp([D, *p.hidden, 2 * A], "relu")  # mean and log std of p(a | s)
        self.rtg_sa = mlp([D + A, *p.hidden, K], "relu")  # logits of p(R | s, a)
        self.rtg_s = mlp([D, *p.hidden, K], "relu")  # logits of p(R | s)
        for m in self.modules().values():
            m.to(ctx.device)
        self.opt = adam(list(self.behaviour.parameters()) + list(self.rtg_sa.parameters()), p.lr)
        self.opt_s = adam(list(self.rtg_s.parameters()), p.lr)
        self.gen = torch.Generator(device=ctx.device).manual_seed(ctx.seed + 7)

    def log_behaviour(self, obs: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
        """log p(a | s) for obs (..., D) and actions (..., A) -> (...)."""
        mean, log_std = self.behaviour(obs).chunk(2, -1)
        log_std = log_std.clamp(-5.0, 2.0)
        z = (actions - mean) / log_std.exp()
        return (-0.5 * z.pow(2) - log_std - 0.5 * np.log(2 * np.pi)).sum(-1)

    def update(self, b: Batch, want_metrics: bool) -> dict[str, Any]:
        p, (B, A) = self.p, b.actions.shape
        bins = rtg_bins_t(b.rewards, self.rtg_lo, self.rtg_hi, p.n_bins)  # (B,)
        neg = torch.rand(B, p.n_negatives, A, generator=self.gen, device=b.obs.device) * 2.0 - 1.0
        cand = torch.cat([b.actions[:, None], neg], 1)  # (B, 1 + N, A), the data's action first
        obs = b.obs[:, None].expand(-1, cand.shape[1], -1)  # (B, 1 + N, D)
        log_r = F.log_softmax(self.rtg_sa(torch.cat([obs, cand], -1)), -1)  # (B, 1 + N, K)
        log_r_data = log_r.gather(-1, bins[:, None, None].expand(-1, cand.shape[1], 1)).squeeze(-1)  # (B, 1 + N)
        logits = self.log_behaviour(obs, cand) + log_r_data  # -E(s, a, R_data)
        nce = F.cross_entropy(logits, torch.zeros(B, dtype=torch.long, device=b.obs.device))
        nll_r = -log_r_data[:, 0].mean()
        loss = nce + p.weight_r * nll_r
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        self.opt.step()
        loss_s = F.cross_entropy(self.rtg_s(b.obs), bins)
        self.opt_s.zero_grad(set_to_none=True)
        loss_s.backward()
        self.opt_s.step()
        if not want_metrics:
            return {}
        return {"loss/infonce": nce.detach(), "loss/rtg_sa": nll_r.detach(), "loss/rtg_s": loss_s.detach()}

    @torch.no_grad()
    def policy(self, obs: torch.Tensor, deterministic: bool) -> torch.Tensor:
        """Adaptive inference: k* from p(R | s), then the derivative-free optimiser on p(a|s) P(R >= k* | s, a)."""
        p, B, M = self.p, obs.shape[0], self.p.n_samples
        k = adaptive_bin(F.softmax(self.rtg_s(obs), -1), p.threshold)  # (B,)
        mean, log_std = self.behaviour(obs).chunk(2, -1)
        std = log_std.clamp(-5.0, 2.0).exp()
        noise = torch.randn(B, M, mean.shape[-1], generator=self.gen, device=obs.device)
        acts = (mean[:, None] + std[:, None] * noise).clamp(-1.0, 1.0)  # (B, M, A)
        o = obs[:, None].expand(-1, M, -1)
        tail_mask = torch.arange(p.n_bins, device=obs.device)[None, None] >= k[:, None, None]  # (B, 1, K)
        scale = p.noise_scale
        for it in range(p.dfo_iters + 1):
            log_tail = torch.logsumexp(F.log_softmax(self.rtg_sa(torch.cat([o, acts], -1)), -1).masked_fill(
                ~tail_mask, float("-inf")), -1)  # (B, M): log P(R >= k* | s, a)  # fmt: skip
            score = self.log_behaviour(o, acts) + log_tail
            if it == p.dfo_iters:
                break
            pick = torch.multinomial(F.softmax(score, -1), M, replacement=True, generator=self.gen)  # (B, M)
            acts = acts.gather(1, pick[..., None].expand(-1, -1, acts.shape[-1]))
            acts = (acts + scale * torch.randn(acts.shape, generator=self.gen, device=obs.device)).clamp(-1.0, 1.0)
            scale *= p.noise_shrink
        best = score.argmax(-1)  # (B,)
        return acts[torch.arange(B, device=obs.device), best]

    def modules(self) -> dict[str, nn.Module]:
        return {"behaviour": self.behaviour, "rtg_sa": self.rtg_sa, "rtg_s": self.rtg_s}

    def optimizers(self) -> list[torch.optim.Optimizer]:
        return [self.opt, self.opt_s]

    def extra_state(self) -> dict[str, Any]:
        return {"gen": self.gen.get_state()}

    def load_extra_state(self, state: dict[str, Any]) -> None:
        self.gen.set_state(state["gen"])


def rtg_bins_t(rtg: torch.Tensor, lo: float, hi: float, n_bins: int) -> torch.Tensor:
    """`rtg_bins` on a tensor."""
    width = (hi - lo) / n_bins if hi > lo else 1.0
    return torch.floor((rtg - lo) / width).clamp(0, n_bins - 1).long()


class RCRL(ReturnConditioned):
    """The plain return-conditioned policy (see the module docstring); continuous actions."""

    name = "rcrl"

    def __init__(self, ctx: ClassicContext, params: RCRLParams) -> None:
        super().__init__(ctx, params)
        p, D, A = params, self.obs_dim, self.action_dim
        self.rtg_mean, self.rtg_std = float(self.rtg.mean()), float(self.rtg.std() + 1e-6)
        self.target = float(np.quantile(self.rtg, p.target_quantile))
        one = np.ones(A, np.float32)
        self.actor = GaussianActor(D + 1, A, p.hidden, -one, one).to(ctx.device)
        self.opt = adam(list(self.actor.parameters()), p.lr)

    def cond(self, obs: torch.Tensor, rtg: torch.Tensor) -> torch.Tensor:
        return torch.cat([obs, ((rtg - self.rtg_mean) / self.rtg_std)[:, None]], -1)  # (B, D + 1)

    def update(self, b: Batch, want_metrics: bool) -> dict[str, Any]:
        loss = -self.actor.log_prob(self.cond(b.obs, b.rewards), b.actions).mean()
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        self.opt.step()
        return {"loss/policy": loss.detach()} if want_metrics else {}

    @torch.no_grad()
    def policy(self, obs: torch.Tensor, deterministic: bool) -> torch.Tensor:
        x = self.cond(obs, torch.full((obs.shape[0],), self.target, device=obs.device))
        return (self.actor.mean(x) if deterministic else self.actor.sample(x)).clamp(-1.0, 1.0)

    def modules(self) -> dict[str, nn.Module]:
        return {"actor": self.actor}

    def optimizers(self) -> list[torch.optim.Optimizer]:
        return [self.opt]


@CLASSIC.register(
    "br_rcrl",
    params=BRRCRLParams,
    paper=BR_RCRL_PAPER,
    fidelity="reduced",
    departures=(
        "the RTG range of the bins is the dataset's discounted RTG range (the authors set V_max per D4RL task)",
        "fewer InfoNCE negatives (64 vs 256) and optimiser samples (512 vs 65536) to fit a CPU",
        "p(a | s) and p(R | s, a) are separate MLPs (the authors share an encoder between branches); no Atari / "
        "discrete-action variant",
    ),
)
def br_rcrl(ctx: ClassicContext, params: BRRCRLParams = BRRCRLParams()) -> BRRCRL:
    """BR-RCRL (Ding et al. 2023, arXiv:2305.11340): pi(a|s,R) ∝ p(a|s) p(R|s,a) trained as an EBM by InfoNCE;
    at test time R is the highest bin with p(R >= R_k | s) >= threshold and a = argmax p(a|s) P(R >= R_k | s, a)."""
    return BRRCRL(ctx, params)


br_rcrl.action_spaces = frozenset({"continuous"})


@CLASSIC.register(
    "rcrl",
    params=RCRLParams,
    paper=RVS_PAPER,
    fidelity="ascent",
    departures=(
        "an MLP return-conditioned policy (RvS-R's form) in place of a decision transformer: no context of past "
        "steps, the discounted RTG as the condition",
        "one fixed target at every state (a quantile of the dataset's RTGs): the classic loop hands the policy "
        "observations only, so a decision transformer's decrement of the target by the rewards received is not "
        "available",
    ),
)
def rcrl(ctx: ClassicContext, params: RCRLParams = RCRLParams()) -> RCRL:
    """Plain return-conditioned policy: max E log pi(a | s, RTG) on the data; at test time pi(. | s, R_target)."""
    return RCRL(ctx, params)


rcrl.action_spaces = frozenset({"continuous"})
