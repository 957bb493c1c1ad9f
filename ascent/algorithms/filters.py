"""Group filters: which groups of a scored rollout batch the learner trains on, and how many extra sampling
rounds may refill the ones dropped. ONE signature: `fn(rewards, valid, group_index[, params]) -> (G,) bool`
(True: keep the group). The trainer keeps the groups a filter accepts, samples fresh prompts for the rest,
up to the filter's `params.max_refill_rounds` extra rounds, and trains on what it has then.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ascent import papers
from ascent.algorithms.groups import group_min_max
from ascent.registry import Registry

FILTERS: Registry = Registry("group filter")


@FILTERS.register("none", paper=None, fidelity="ascent")
def keep_all(rewards: torch.Tensor, valid: torch.Tensor, group_index: torch.Tensor) -> torch.Tensor:
    """Keep every group (no filtering, no refills)."""
    groups = int(group_index.max()) + 1 if group_index.numel() else 0
    return torch.ones(groups, dtype=torch.bool)


@dataclass(frozen=True)
class DapoParams:
    """DAPO dynamic sampling."""

    max_refill_rounds: int = 3
    """Extra sampling rounds per step to replace the groups dropped (0: drop, never refill)."""

    def __post_init__(self) -> None:
        if self.max_refill_rounds < 0:
            raise ValueError(f"max_refill_rounds must be >= 0, got {self.max_refill_rounds}")


@FILTERS.register(
    "dapo",
    params=DapoParams,
    paper=papers.DAPO,
    fidelity="faithful",
    departures=(
        (
            "refills at most `max_refill_rounds` times and trains on what it has then (DAPO samples until the batch "
            "is full)"
        ),
    ),
)
def dapo(
    rewards: torch.Tensor, valid: torch.Tensor, group_index: torch.Tensor, params: DapoParams = DapoParams()
) -> torch.Tensor:
    """DAPO dynamic sampling (Yu et al. 2025, arXiv:2503.14476): keep a group only when at least two of its
    valid samples' rewards differ (an all-equal group has zero GRPO advantage: no signal); (G,) bool.

    >>> dapo(torch.tensor([1.0, 1.0, 0.0, 1.0, 2.0, 2.0]), torch.ones(6, dtype=torch.bool),
    ...      torch.tensor([0, 0, 1, 1, 2, 2]))
    tensor([False,  True, False])
    """
    lo, hi = group_min_max(rewards, valid, group_index)  # (G,) each
    return hi > lo
