"""A*-PO (Brantley et al., 2025, arXiv:2505.20686): its parameters and its stage 1, which estimates the
optimal value of every training prompt from samples of the reference policy, once, before RL:

    V*(x) = beta log E_{y ~ pi_ref}[exp(r(x, y) / beta)]  ~=  beta log (1/k) sum_j exp(r_j / beta),

computed with logsumexp (stable for small beta, where it tends to max_j r_j; large beta gives the mean).
`AStarState.prepare` runs it at the first step and keeps the result (one value per training row) in its
state, so a resumed run does not sample again; each rollout batch's rows get their V* as `LossInput.v_star`.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from typing import Any, Optional

import torch

from ascent.algorithms.state import PieceState

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class AStarParams:
    """A*-PO: stage 1 (V* from reference samples) and the stage-2 regression."""

    beta: float = 0.5
    """Beta of stage 1, V*(x) = beta log mean_j exp(r_j / beta) over reference samples."""
    beta2: Optional[float] = None
    """Beta of the stage-2 regression (None: beta; the authors' scripts use 1e-3)."""
    k: int = 8
    """Reference-policy samples per training prompt for V*."""

    def __post_init__(self) -> None:
        if self.beta <= 0:
            raise ValueError(f"beta must be > 0, got {self.beta}")
        if self.beta2 is not None and self.beta2 <= 0:
            raise ValueError(f"beta2 must be > 0 (or null), got {self.beta2}")
        if self.k < 1:
            raise ValueError(f"k must be >= 1, got {self.k}")


def soft_value(rewards: torch.Tensor, valid: torch.Tensor, beta: float) -> torch.Tensor:
    """(P,) beta log mean_j exp(r_j / beta) over each row's valid rewards (P, k); NaN where none is valid.

    >>> r = torch.tensor([[0.0, 1.0], [1.0, 1.0]]); ok = torch.ones(2, 2, dtype=torch.bool)
    >>> [round(v, 4) for v in soft_value(r, ok, 1.0).tolist()], [round(v, 4) for v in soft_value(r, ok, 1e-3).tolist()]
    ([0.6201, 1.0], [0.9993, 1.0])
    """
    scaled = torch.where(valid, rewards / beta, torch.full_like(rewards, -math.inf))
    count = valid.sum(-1)
    out = beta * (torch.logsumexp(scaled, dim=-1) - torch.log(count.clamp(min=1).to(rewards.dtype)))
    return torch.where(count > 0, out, torch.full_like(out, math.nan))


class AStarState(PieceState):
    """V* of every training row (stage 1), estimated once and carried in the trainer state."""

    def __init__(self, params: AStarParams, services: Any) -> None:
        super().__init__(params, services)
        self.v_star: Optional[torch.Tensor] = None  # (rows,) once estimated

    @torch.no_grad()
    def prepare(self) -> None:
        """Stage 1, unless a resumed state brought V*: k samples per training prompt from the frozen
        reference, scored with the run's rewards, with a generator of its own (seed + 1), so the training
        rollouts' random stream is untouched. Rows whose samples all fail get NaN (the loss skips them)."""
        if self.v_star is not None:
            return
        rows = list(range(self.services.num_rows()))
        log.info("A*-PO stage 1: %d reference samples for each of %d training prompts", self.params.k, len(rows))
        generator = torch.Generator().manual_seed(self.services.seed + 1)
        rewards, valid = self.services.sample_and_score(self.services.reference(), rows, self.params.k, generator)
        self.v_star = soft_value(rewards, valid, self.params.beta)
        missing = int(torch.isnan(self.v_star).sum())
        if missing:
            log.warning(
                "A*-PO stage 1: every reference sample of %d prompts failed its reward; those prompts are skipped",
                missing,
            )

    def sequence_inputs(self, batch: Any) -> dict[str, torch.Tensor]:
        return {"v_star": self.v_star[batch.row_index]}

    def state_dict(self) -> dict[str, Any]:
        return {"v_star": self.v_star}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.v_star = state.get("v_star")
