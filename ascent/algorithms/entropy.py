"""Entropy management as policy losses, each built on `ppo_clip` (called, never copied).

- `clip_cov`, `kl_cov`: Clip-Cov and KL-Cov (Cui et al., 2025, arXiv:2505.22617). Under policy gradient, the
  entropy change of a step is driven by the covariance of log pi and the advantage, so a few tokens that are
  both likely and well rewarded collapse the entropy. Both losses score each token by its centred covariance
  Cov_t = (log pi_t - mean log pi) (A_t - mean A) and restrain the update of high-Cov tokens only.
- `entropy_bonus`: PPO's entropy bonus (Schulman et al., 2017, arXiv:1707.06347; Williams & Peng 1991):
  ppo_clip - coef * aggregated entropy of the full next-token distribution.

Cov statistics (means, number of tokens picked) are those of the tokens the loss sees: the micro-batch, which is
the whole mini-batch unless `train.micro_batch_size` splits it (so, unlike `ppo_clip`, gradient accumulation is
not exactly invariant for `clip_cov` / `kl_cov`; the authors' verl code has the same property).
"""

from __future__ import annotations

import dataclasses
import hashlib
from dataclasses import dataclass

import torch

from ascent import papers
from ascent.algorithms.aggregate import aggregate, masked_mean
from ascent.algorithms.losses import LOSSES, ppo_clip, requires, tis_weight, with_kl
from ascent.algorithms.types import LossInput


def token_covariance(inp: LossInput) -> torch.Tensor:
    """(N, T) Cov_t = (log pi_t - mean log pi)(A_t - mean A), means over the tokens with mask 1; detached, 0 off
    the mask. Its mean over the valid tokens is the batch covariance of log pi and A that drives entropy."""
    m = inp.mask
    logp, adv = inp.logprobs.detach(), inp.advantages.detach()  # (N, T)
    cov = (logp - masked_mean(logp, m)) * (adv - masked_mean(adv, m))
    return torch.where(m > 0, cov, torch.zeros_like(cov))


def selection_count(ratio: float, mask: torch.Tensor) -> int:
    """How many tokens a ratio selects: max(1, floor(ratio * valid tokens)); 0 without valid tokens."""
    n = int((mask > 0).sum())
    return max(1, int(ratio * n)) if n else 0


def batch_generator(values: torch.Tensor, seed: int) -> torch.Generator:
    """A CPU generator seeded by a hash of `values` and `seed`: the same batch gives the same random draws,
    run after run, with no state kept between calls."""
    h = hashlib.blake2b(values.detach().to("cpu", torch.float64).numpy().tobytes(), digest_size=8)
    h.update(seed.to_bytes(8, "little"))
    return torch.Generator().manual_seed(int.from_bytes(h.digest(), "little"))


def ppo_clipped(inp: LossInput, cfg) -> torch.Tensor:
    """(N, T) bool: ppo_clip's clipped branch is active (the token already has no policy gradient)."""
    ratio = torch.exp((inp.logprobs - inp.old_logprobs).detach().clamp(-20.0, 20.0))
    adv = inp.advantages
    return -adv * ratio.clamp(1.0 - cfg.clip_low, 1.0 + cfg.clip_high) > -adv * ratio


def flat_mask(like: torch.Tensor, flat_index: torch.Tensor) -> torch.Tensor:
    """(N, T) bool, True at the given row-major positions."""
    out = torch.zeros(like.numel(), dtype=torch.bool, device=like.device)
    out[flat_index] = True
    return out.view_as(like)


# ---------------------------------------------------------------------------------------------------------
# Clip-Cov
# ---------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ClipCovParams:
    """Clip-Cov's token selection."""

    clip_ratio: float = 1e-2
    """Fraction of the valid tokens whose gradient is detached (at least one token when any qualifies). The paper
    uses 2e-4 on batches of ~10^6 tokens; this CPU-scale default is explained in `clip_cov`'s docstring."""
    cov_low: float = 1.0
    """omega_low: only tokens with Cov >= cov_low may be detached (paper: 1)."""
    cov_high: float = 5.0
    """omega_high: only tokens with Cov <= cov_high may be detached (paper: 5)."""
    seed: int = 0
    """Mixed with a hash of the batch's Cov values to seed the random choice (same batch, same tokens)."""

    def __post_init__(self) -> None:
        if not 0.0 < self.clip_ratio <= 1.0:
            raise ValueError(f"clip_ratio must be in (0, 1], got {self.clip_ratio}")
        if not self.cov_low < self.cov_high:
            raise ValueError(f"cov_low must be < cov_high, got {self.cov_low} and {self.cov_high}")
        if self.seed < 0:
            raise ValueError(f"seed must be >= 0, got {self.seed}")


def clip_cov_candidates(inp: LossInput, cfg, params: ClipCovParams) -> torch.Tensor:
    """(N, T) bool: valid tokens with cov_low <= Cov <= cov_high that ppo_clip has not already clipped."""
    cov = token_covariance(inp)
    in_band = (cov >= params.cov_low) & (cov <= params.cov_high)
    return (inp.mask > 0) & in_band & ~ppo_clipped(inp, cfg)


def clip_cov_selection(inp: LossInput, cfg, params: ClipCovParams) -> torch.Tensor:
    """(N, T) bool: the tokens Clip-Cov detaches, min(k, #candidates) of the candidates drawn uniformly without
    replacement, k = max(1, floor(clip_ratio * valid tokens)); the draw is seeded by the batch (`batch_generator`)."""
    cand = clip_cov_candidates(inp, cfg, params).flatten().nonzero().squeeze(-1)  # (C,) row-major positions
    k = min(selection_count(params.clip_ratio, inp.mask), len(cand))
    g = batch_generator(token_covariance(inp)[inp.mask > 0], params.seed)
    pick = torch.randperm(len(cand), generator=g)[:k].to(cand.device)
    return flat_mask(inp.mask, cand[pick])


@LOSSES.register(
    "clip_cov",
    params=ClipCovParams,
    paper=papers.ENTROPY_MECHANISM,
    fidelity="faithful",
    departures=("the default clip ratio is 1e-2 instead of 2e-4 (CPU-scale batches have too few tokens)",),
)
def clip_cov(inp: LossInput, cfg, params: ClipCovParams = ClipCovParams()) -> tuple[torch.Tensor, dict[str, float]]:
    """Clip-Cov (Cui et al., 2025, arXiv:2505.22617): ppo_clip, gradient detached on a few high-Cov tokens.

    Cov_t = (log pi_t - mean log pi)(A_t - mean A) over the valid tokens (`token_covariance`, no grad). Of the
    tokens with cov_low <= Cov_t <= cov_high, k = max(1, floor(clip_ratio * valid tokens)) are drawn at random
    (`clip_cov_selection`) and their log pi is detached: l_t = ppo_clip(sg(log pi_t)) there, ppo_clip elsewhere.
    The loss value equals ppo_clip's; its gradient is exactly 0 on the drawn tokens and ppo_clip's on every other.
    As in the authors' code, tokens ppo_clip already clipped (no gradient) are not candidates; the KL penalty to
    the reference (kl_coef) keeps its gradient everywhere.

    Randomness without state: the draw's generator is seeded by a hash of the batch's Cov values and `seed`, so
    two identical calls pick the same tokens. Default clip_ratio 1e-2, 50x the paper's 2e-4: the paper's batches
    hold ~10^6 tokens (2e-4: ~200 detached); a CPU run's micro-batch holds ~10^2-10^4, where 2e-4 is always below
    one token and only the one-token floor would act, whatever the ratio. 1e-2 detaches ~1% (10 of 10^3). Set
    clip_ratio=2e-4 at the paper's scale. The authors pair Clip-Cov with a wide PPO clip (clip_low = clip_high = 1).
    """
    sel = clip_cov_selection(inp, cfg, params)  # (N, T) bool
    logp = torch.where(sel, inp.logprobs.detach(), inp.logprobs)
    loss, metrics = ppo_clip(dataclasses.replace(inp, logprobs=logp, ref_logprobs=None), cfg)
    with torch.no_grad():
        metrics["loss/clip_cov_frac"] = float(masked_mean(sel.float(), inp.mask))
        metrics["loss/clip_cov_candidate_frac"] = float(
            masked_mean(clip_cov_candidates(inp, cfg, params).float(), inp.mask)
        )
        metrics["loss/cov_mean"] = float(masked_mean(token_covariance(inp), inp.mask))
    return with_kl(loss, inp, cfg, metrics)


# ---------------------------------------------------------------------------------------------------------
# KL-Cov
# ---------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class KlCovParams:
    """KL-Cov's token selection and penalty."""

    kl_ratio: float = 1e-2
    """Fraction of the valid tokens, those of largest Cov, that get the penalty (at least one). The authors use
    2e-3 (Qwen2.5-7B) and 2e-4 (32B) on ~10^6-token batches; 1e-2 for CPU-scale batches, as for clip_cov."""
    coef: float = 1.0
    """k of the penalty k |log pi - log pi_old| on the selected tokens (the authors' ppo_kl_coef: 1)."""

    def __post_init__(self) -> None:
        if not 0.0 < self.kl_ratio <= 1.0:
            raise ValueError(f"kl_ratio must be in (0, 1], got {self.kl_ratio}")
        if self.coef < 0:
            raise ValueError(f"coef must be >= 0, got {self.coef}")


def kl_cov_selection(inp: LossInput, params: KlCovParams) -> torch.Tensor:
    """(N, T) bool: the k = max(1, floor(kl_ratio * valid tokens)) valid tokens of largest Cov."""
    valid = (inp.mask > 0).flatten().nonzero().squeeze(-1)  # (M,) row-major positions
    cov = token_covariance(inp).flatten()[valid]
    top = torch.topk(cov, selection_count(params.kl_ratio, inp.mask)).indices
    return flat_mask(inp.mask, valid[top])


@LOSSES.register(
    "kl_cov",
    params=KlCovParams,
    paper=papers.ENTROPY_MECHANISM,
    fidelity="faithful",
    departures=(
        (
            "the base surrogate is ppo_clip, not the authors' unclipped -A rho (widen the clip to recover it); "
            "default ratio 1e-2 for CPU-scale batches"
        ),
    ),
)
def kl_cov(inp: LossInput, cfg, params: KlCovParams = KlCovParams()) -> tuple[torch.Tensor, dict[str, float]]:
    """KL-Cov (Cui et al., 2025, arXiv:2505.22617): ppo_clip + k |log pi - log pi_old| on the top-Cov tokens.

    Cov_t as in clip_cov; I = the max(1, floor(kl_ratio * valid tokens)) valid tokens of largest Cov_t
    (`kl_cov_selection`). l_t = ppo_clip_t + [t in I] k |log pi_t - log pi_old,t|, reduced by `loss_agg`, with the
    TIS weight on both terms. The penalty's form, |log ratio| per token, is the authors' code's (their verl fork's
    kl_cov loss); that code puts it on the unclipped surrogate -A rho, ascent keeps ppo_clip (for the authors'
    form, widen the clip: clip_low=1 and a large clip_high).
    The penalty is 0, with gradient 0, where pi = pi_old exactly: on the first update of each rollout batch (ascent's
    pi_old is then the current policy). It acts from the second update on: use ppo_epochs * mini_batches > 1.
    """
    sel = kl_cov_selection(inp, params)  # (N, T) bool
    loss, metrics = ppo_clip(dataclasses.replace(inp, ref_logprobs=None), cfg)
    abs_log_ratio = (inp.logprobs - inp.old_logprobs).abs()  # (N, T)
    penalty = params.coef * abs_log_ratio * sel * tis_weight(inp, cfg)
    loss = loss + aggregate(penalty, inp.mask, cfg.loss_agg, inp.num_tokens, inp.num_seqs, inp.norm_length)
    with torch.no_grad():
        metrics["loss/kl_cov_frac"] = float(masked_mean(sel.float(), inp.mask))
        metrics["loss/kl_cov_abs_log_ratio"] = float(masked_mean(abs_log_ratio, sel.float()))
        metrics["loss/cov_mean"] = float(masked_mean(token_covariance(inp), inp.mask))
    return with_kl(loss, inp, cfg, metrics)


# ---------------------------------------------------------------------------------------------------------
# Entropy bonus
# ---------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class EntropyBonusParams:
    """PPO's entropy bonus."""

    coef: float = 1e-3
    """c2 in L = L_clip - c2 H (0: plain ppo_clip). PPO used 0.01 on Atari; Cui et al. 2025 report that 0.01
    makes an LLM's entropy explode and 1e-4 to 1e-3 barely slows its collapse: it is sensitive, tune it."""

    def __post_init__(self) -> None:
        if self.coef < 0:
            raise ValueError(f"coef must be >= 0 (a bonus), got {self.coef}")


def token_entropy(logits: torch.Tensor) -> torch.Tensor:
    """(N, T) H_t = -sum_v pi(v) log pi(v) from (N, T, V) log-probs, with grad."""
    return -(logits.exp() * logits.clamp(min=-1e4)).sum(-1)  # clamp: a -inf log-prob adds 0, not nan


@LOSSES.register(
    "entropy_bonus",
    params=EntropyBonusParams,
    paper=(papers.PPO, papers.ENTROPY_REGULARISATION),
    fidelity="faithful",
    departures=("no value term: ascent's LLM losses are critic-free (`gae` trains its own critic)",),
)
@requires("full_logits")
def entropy_bonus(
    inp: LossInput, cfg, params: EntropyBonusParams = EntropyBonusParams()
) -> tuple[torch.Tensor, dict[str, float]]:
    """PPO's entropy bonus (Schulman et al., 2017, arXiv:1707.06347): ppo_clip - coef * aggregated entropy.

    L = ppo_clip - coef * aggregate(H), H_t = -sum_v pi(v | x_<t) log pi(v | x_<t) over the full vocabulary at
    every completion position (the entropy term of Williams & Peng 1991), reduced with `loss_agg` and no TIS
    weight (the bonus is not a ratio). Its gradient raises the entropy of every visited state. Needs the
    full-vocabulary log-softmax ("full_logits"), an (N, T, V) tensor per micro-batch."""
    if inp.logits is None:
        raise ValueError("loss 'entropy_bonus' needs LossInput.logits; the learner fills them from its `requires`")
    loss, metrics = ppo_clip(inp, cfg)
    entropy = token_entropy(inp.logits)  # (N, T)
    loss = loss - params.coef * aggregate(
        entropy, inp.mask, cfg.loss_agg, inp.num_tokens, inp.num_seqs, inp.norm_length
    )
    metrics["loss/entropy"] = float(masked_mean(entropy.detach(), inp.mask))
    return loss, metrics


kl_cov.several_updates = True  # type: ignore[attr-defined]  # its penalty is 0 while pi == pi_old
