"""Preference Optimization for combinatorial optimization (Pan et al. 2025, "Preference Optimization for
Combinatorial Optimization Problems", ICML 2025, arXiv:2505.08735): the `co_loss` entry `preference`.

The paper starts from the entropy-regularised objective `max E[r(x, tau)] + alpha H(pi(.|x))`, whose optimum is
`pi*(tau|x) = exp(r(x, tau) / alpha) / Z(x)`; solving for the reward gives the reparameterised reward
`r(x, tau) = alpha log pi(tau|x) + alpha log Z(x)`. Under the Bradley-Terry model the probability that tau_i is
preferred to tau_j is `sigma(r_i - r_j)`, in which Z(x) cancels: `sigma(alpha (log pi(tau_i|x) - log pi(tau_j|x)))`.
The loss is the negative log-likelihood of the preferences that the true costs give among the S sampled solutions of
each instance (POMO's multi-start rollouts):

    loss = -mean_{b, i, j} 1[R_i > R_j] log sigma(alpha (log pi(tau_i) - log pi(tau_j)))

(the mean over all B x S x S ordered pairs, as the authors' `preference_among_pomo_loss_fn`). Only the order of the
costs enters, never their size: a preference signal that does not fade as the rewards' spread shrinks, which is the
paper's argument for faster convergence than REINFORCE's advantage. Its gradient weighs each pair by
`alpha sigma(-alpha (log pi_i - log pi_j))`: a pair the policy already orders right counts less.
`model="exponential"` uses the paper's exponential preference model (appendix F), `f(x) = x` in place of
`log sigma(x)`; `model="plackett_luce"` the full ranking's Plackett-Luce likelihood (the authors' `pl_loss`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import torch
import torch.nn.functional as F

from ascent.co.decoding import Solutions
from ascent.co.losses import CO_LOSSES
from ascent.papers import PO_CO


@dataclass(frozen=True)
class PreferenceParams:
    """Preference optimisation's loss."""

    alpha: float = 0.05
    """The entropy coefficient alpha that scales the log-likelihood difference (the authors' configs use a few
    hundredths; a parameter to tune per problem)."""
    model: Literal["bradley_terry", "exponential", "plackett_luce"] = "bradley_terry"
    """The preference model: Bradley-Terry (the paper's main one), exponential, or Plackett-Luce over the ranking."""

    def __post_init__(self) -> None:
        if not self.alpha > 0:
            raise ValueError(f"alpha must be > 0, got {self.alpha}")
        if self.model not in ("bradley_terry", "exponential", "plackett_luce"):
            raise ValueError(f"model must be bradley_terry, exponential or plackett_luce, got {self.model!r}")


@CO_LOSSES.register(
    "preference",
    params=PreferenceParams,
    paper=PO_CO,
    fidelity="reduced",
    departures=(
        "no local-search fine-tuning phase (the paper's optional 2-opt / LS preference pairs at the end of training)",
        "ties (equal costs) give no preference; a population's solutions are compared within each agent",
        "plackett_luce is the standard likelihood of the best-first ranking (the authors' pl_loss normalises over the "
        "better-ranked solutions instead)",
    ),
)
def preference(sol: Solutions, params: PreferenceParams = PreferenceParams()) -> tuple[torch.Tensor, dict[str, float]]:
    """Preference optimisation's loss over the S sampled solutions of each instance (Pan et al. 2025,
    arXiv:2505.08735, equations 6-8): pairwise preferences from the true costs, scored by the reparameterised reward
    `alpha log pi`; see the module docstring."""
    B, S = sol.reward.shape
    K = sol.agents
    M = S // K
    if M < 2:
        raise ValueError(f"preference needs at least 2 solutions per instance and agent, got {M}")
    reward = sol.reward.detach().view(B * K, M)
    ll = sol.log_likelihood.view(B * K, M)
    a = params.alpha
    if params.model == "plackett_luce":
        order = reward.argsort(dim=1, descending=True)
        s = (a * ll).gather(1, order)  # best first
        # log P(ranking) = sum_k s_k - logsumexp(s_k..s_M): suffix logsumexp via a flipped cumulative logsumexp
        tail = torch.logcumsumexp(s.flip(1), dim=1).flip(1)
        loss = -(s - tail).mean()
    else:
        prefer = (reward[:, :, None] > reward[:, None, :]).float()  # (BK, M, M): i preferred to j
        diff = a * (ll[:, :, None] - ll[:, None, :])
        score = F.logsigmoid(diff) if params.model == "bradley_terry" else diff
        loss = -(score * prefer).mean()
    r = sol.reward.detach()
    return loss, {
        "loss/policy": float(loss.detach()),
        "train/reward": float(r.mean()),
        "train/best_reward": float(r.max(dim=1).values.mean()),
        "train/entropy": float(sol.entropy.mean()),
    }
