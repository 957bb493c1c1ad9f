"""TreeOPSD's bounded-teacher self-distillation loss (`tree_sd`), the loss half of TreeOPSD (tree-aware posterior
self-distillation for long-horizon agentic RL, 2026; its turn credit is the advantage estimator `tree`).

TreeOPSD maps each (turn) credit A to a closed-form teacher whose likelihood ratio to the frozen behaviour policy
mu is bounded, and trains the student towards that teacher: the divergence's gradient at pi = mu is the policy
gradient, and the update stops at a finite target however many sequential mini-batches reuse the rollouts. The
abstract gives no formula; ascent's reading, per sampled token t with rho_t = pi_theta(t) / mu(t):

    log rho*_t = bound * tanh(A_t)                        (the teacher's ratio, in [e^-bound, e^bound])
    l_t = [rho*_t log(rho*_t / rho_t) - rho*_t + rho_t] / bound

l_t is the generalised KL divergence between the scalars rho*_t and rho_t: >= 0, zero only at rho_t = rho*_t. Its
gradient is (rho_t - rho*_t) / bound * grad log pi_theta(t): at rho = 1 this is -(e^{bound tanh A} - 1) / bound
grad log pi = -A grad log pi + O(A^2): the policy gradient; it vanishes once the token's probability has moved by
the teacher's ratio, so repeated epochs over one batch cannot push it further (PPO's clip instead stops the
gradient at 1 +- eps but leaves the ratio free to be pushed past it by other tokens' updates).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from ascent import papers
from ascent.algorithms.aggregate import masked_mean
from ascent.algorithms.losses import LOSSES, _reduce, tis_weight, with_kl
from ascent.algorithms.types import LossInput


@dataclass(frozen=True)
class TreeSdParams:
    """TreeOPSD's bounded teacher (abstract only; ascent's reading of its form)."""

    bound: float = 0.2
    """The teacher's log-ratio to the behaviour policy lies in [-bound, bound] (log rho* = bound tanh A); > 0."""

    def __post_init__(self) -> None:
        if not (self.bound > 0 and math.isfinite(self.bound)):
            raise ValueError(f"bound must be a positive number, got {self.bound}")


def teacher_log_ratio(advantages: torch.Tensor, bound: float) -> torch.Tensor:
    """log rho* = bound * tanh(A): the bounded teacher's log-likelihood ratio to the behaviour policy.

    >>> [round(x, 4) for x in teacher_log_ratio(torch.tensor([-10.0, 0.0, 0.5]), 0.2).tolist()]
    [-0.2, 0.0, 0.0924]
    """
    return bound * torch.tanh(advantages)


@LOSSES.register(
    "tree_sd",
    params=TreeSdParams,
    paper=papers.TREEOPSD,
    fidelity="reduced",
    departures=(
        (
            "the teacher's form (log rho* = bound tanh A) and the divergence (generalised KL between the sampled "
            "token's ratios rho* and rho, divided by bound) are ascent's reading of the abstract"
        ),
        "per sampled token only: no full-vocabulary teacher distribution",
        (
            "the tree is whatever prefixes a group's samples share (advantage `tree`); TreeOPSD branches alternative "
            "continuations from shared prefixes on purpose"
        ),
    ),
)
def tree_sd(inp: LossInput, cfg, params: TreeSdParams = TreeSdParams()) -> tuple[torch.Tensor, dict[str, float]]:
    """TreeOPSD bounded-teacher self-distillation (module docstring): l = [rho* log(rho*/rho) - rho* + rho] / bound,
    log rho* = bound tanh(A), rho = pi / pi_old."""
    log_ratio = (inp.logprobs - inp.old_logprobs).clamp(-20.0, 20.0)  # (N, T)
    target = teacher_log_ratio(inp.advantages, params.bound)
    rho, rho_star = torch.exp(log_ratio), torch.exp(target)
    loss_mat = (rho_star * (target - log_ratio) - rho_star + rho) / params.bound
    loss = _reduce(loss_mat * tis_weight(inp, cfg), inp, cfg)
    with torch.no_grad():
        metrics = {
            "loss/policy": float(loss),
            "loss/ratio_mean": float(masked_mean(rho, inp.mask)),
            "loss/teacher_gap": float(masked_mean((log_ratio - target).abs(), inp.mask)),
        }
    return with_kl(loss, inp, cfg, metrics)
