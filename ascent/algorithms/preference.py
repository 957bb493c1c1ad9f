"""Offline preference losses (`ascent train-pref`). ONE signature: `fn(inp: PreferenceInput[, params]) -> (loss,
metrics)`, the loss a mean over the pairs (so micro-batches weighted by their share of pairs add up to the batch's
loss exactly), metrics in the `pref/` namespace:

    pref/loss             the loss
    pref/accuracy         share of pairs whose implicit reward ranks chosen strictly above rejected
    pref/margin           mean implicit reward of chosen minus rejected
    pref/reward_chosen    mean implicit reward of the chosen completions
    pref/reward_rejected  mean implicit reward of the rejected completions

Inputs are whole-sequence log-probs: log π(y | x) = Σ_t log π(y_t | x, y_<t) over the completion's tokens (its EOS
included), for the policy π_θ and the frozen reference π_ref (the policy before training), and each completion's
token count |y|. Each loss's implicit reward r(x, y) is named in its docstring.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import torch
import torch.nn.functional as F

from ascent import papers
from ascent.registry import Registry

PREFERENCE_LOSSES: Registry = Registry("preference loss")


@dataclass(frozen=True)
class PreferenceInput:
    """Sequence log-probs of P preference pairs (chosen y_c preferred to rejected y_r as completions of x)."""

    policy_chosen: torch.Tensor
    """(P,) log π_θ(y_c | x), with gradient."""
    policy_rejected: torch.Tensor
    """(P,) log π_θ(y_r | x), with gradient."""
    ref_chosen: Optional[torch.Tensor]
    """(P,) log π_ref(y_c | x) (no gradient); None where the loss needs no reference."""
    ref_rejected: Optional[torch.Tensor]
    """(P,) log π_ref(y_r | x); None where the loss needs no reference."""
    chosen_tokens: torch.Tensor
    """(P,) completion tokens of y_c (>= 1)."""
    rejected_tokens: torch.Tensor
    """(P,) completion tokens of y_r (>= 1)."""

    def log_ratios(self) -> tuple[torch.Tensor, torch.Tensor]:
        """(P,) log π_θ/π_ref of chosen and of rejected; ValueError without reference log-probs."""
        if self.ref_chosen is None or self.ref_rejected is None:
            raise ValueError("this preference loss compares with the reference: give ref_chosen and ref_rejected")
        return self.policy_chosen - self.ref_chosen, self.policy_rejected - self.ref_rejected


def preference_metrics(loss: torch.Tensor, chosen: torch.Tensor, rejected: torch.Tensor) -> dict[str, float]:
    """The `pref/` metrics of a loss and the (P,) implicit rewards of chosen and rejected."""
    with torch.no_grad():
        return {
            "pref/loss": float(loss),
            "pref/accuracy": float((chosen > rejected).float().mean()),
            "pref/margin": float((chosen - rejected).mean()),
            "pref/reward_chosen": float(chosen.mean()),
            "pref/reward_rejected": float(rejected.mean()),
        }


@dataclass(frozen=True)
class DPOParams:
    beta: float = 0.1
    """β: scale of the implicit reward β log π_θ/π_ref (the strength of the KL constraint to the reference)."""
    label_smoothing: float = 0.0
    """ε (cDPO): the assumed share of flipped labels; the loss treats each pair as chosen-preferred with
    probability 1 - ε. In [0, 0.5); 0 is plain DPO."""

    def __post_init__(self) -> None:
        if self.beta <= 0:
            raise ValueError(f"beta must be > 0, got {self.beta}")
        if not 0 <= self.label_smoothing < 0.5:
            raise ValueError(
                f"label_smoothing must be in [0, 0.5) (at 0.5 the labels carry no signal), got {self.label_smoothing}"
            )


@PREFERENCE_LOSSES.register("dpo", params=DPOParams, paper=(papers.DPO, papers.CDPO), fidelity="faithful")
def dpo(inp: PreferenceInput, params: DPOParams = DPOParams()) -> tuple[torch.Tensor, dict[str, float]]:
    """Direct Preference Optimization (Rafailov et al. 2023, arXiv:2305.18290), with cDPO label smoothing.

    Implicit reward r(x, y) = β log π_θ(y|x)/π_ref(y|x); h = r(x, y_c) - r(x, y_r);
    l = -(1 - ε) log σ(h) - ε log σ(-h)   (ε = label_smoothing: the conservative DPO of Mitchell 2023, "A note
    on DPO with noisy preferences & relationship to IPO"; ε = 0 is DPO).
    """
    chosen, rejected = inp.log_ratios()
    rc, rr = params.beta * chosen, params.beta * rejected  # (P,)
    h = rc - rr
    eps = params.label_smoothing
    loss = (-(1 - eps) * F.logsigmoid(h) - eps * F.logsigmoid(-h)).mean()
    return loss, preference_metrics(loss, rc, rr)


@dataclass(frozen=True)
class IPOParams:
    tau: float = 0.1
    """τ: regularisation towards the reference; the loss pulls the log-ratio gap to 1 / (2τ). > 0."""

    def __post_init__(self) -> None:
        if self.tau <= 0:
            raise ValueError(f"tau must be > 0, got {self.tau}")


@PREFERENCE_LOSSES.register("ipo", params=IPOParams, paper=papers.IPO, fidelity="faithful")
def ipo(inp: PreferenceInput, params: IPOParams = IPOParams()) -> tuple[torch.Tensor, dict[str, float]]:
    """Identity Preference Optimisation (Azar et al. 2023, arXiv:2310.12036, the IPO loss of its section 5).

    Implicit reward r(x, y) = log π_θ(y|x)/π_ref(y|x) (sequence log-probs); h = r(x, y_c) - r(x, y_r);
    l = (h - 1/(2τ))²: a squared loss with a finite target, so the gap stops growing instead of diverging when
    preferences are deterministic.
    """
    rc, rr = inp.log_ratios()  # (P,)
    loss = ((rc - rr) - 1.0 / (2.0 * params.tau)).pow(2).mean()
    return loss, preference_metrics(loss, rc, rr)


@dataclass(frozen=True)
class SimPOParams:
    beta: float = 2.0
    """β: scale of the length-normalised reward β/|y| log π_θ(y|x). > 0."""
    gamma: float = 1.0
    """γ: target reward margin between chosen and rejected (in reward units). >= 0."""

    def __post_init__(self) -> None:
        if self.beta <= 0:
            raise ValueError(f"beta must be > 0, got {self.beta}")
        if self.gamma < 0:
            raise ValueError(f"gamma must be >= 0, got {self.gamma}")


@PREFERENCE_LOSSES.register("simpo", params=SimPOParams, paper=papers.SIMPO, fidelity="faithful")
def simpo(inp: PreferenceInput, params: SimPOParams = SimPOParams()) -> tuple[torch.Tensor, dict[str, float]]:
    """SimPO: a reference-free, length-normalised reward with a margin (Meng, Xia & Chen 2024, arXiv:2405.14734).

    Implicit reward r(x, y) = β/|y| · log π_θ(y|x) (the mean token log-prob, no reference model);
    l = -log σ(r(x, y_c) - r(x, y_r) - γ).
    """
    rc = params.beta * inp.policy_chosen / inp.chosen_tokens.clamp(min=1)  # (P,)
    rr = params.beta * inp.policy_rejected / inp.rejected_tokens.clamp(min=1)
    loss = -F.logsigmoid(rc - rr - params.gamma).mean()
    return loss, preference_metrics(loss, rc, rr)


simpo.reference_free = True
"""SimPO reads no reference log-probs: `ascent train-pref` computes none."""
