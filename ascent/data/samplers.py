"""Prompt samplers: which training prompts an RL step samples, and how many completions each gets.

ONE construction signature, `SAMPLERS[name](ctx: SamplerContext[, params]) -> PromptSampler`, and one
interface (`PromptSampler`): `next(k)` draws the step's prompts as a `Draw`, `observe(rows, rewards, valid)`
feeds back every scored group (the trainer calls it after each rollout round, before any group filter),
`state_dict()` / `load_state_dict()` make a resumed run draw exactly what the uninterrupted one would have.

A sampler decides *which prompts*; a group filter (`ascent.algorithms.filters`) decides which scored groups
the learner keeps; an explorer (`ascent.rollout.explorers`) decides *how* a group's completions are produced.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

import torch

from ascent.data.sampler import RowSampler
from ascent.registry import Registry

SAMPLERS: Registry = Registry("sampler")


@dataclass(frozen=True)
class SamplerContext:
    """What a sampler is built from."""

    rows: list[dict[str, Any]]
    """The training rows (a sampler may read their fields, e.g. a task's `difficulty`)."""
    seed: int
    """The run seed."""
    samples_per_prompt: int
    """rollout.samples_per_prompt: the default group size."""
    total_steps: int = 0
    """train.steps (samplers that stage or schedule by progress read it)."""


@dataclass(frozen=True)
class Draw:
    """One round of prompts for the rollout stage."""

    indices: list[int]
    """Training-row indices, one per group (a row may appear once)."""
    samples: Optional[list[int]] = None
    """Completions per group, aligned with `indices` (None: rollout.samples_per_prompt for every group)."""

    def __post_init__(self) -> None:
        if self.samples is not None:
            if len(self.samples) != len(self.indices):
                raise ValueError(f"Draw: {len(self.samples)} sample counts for {len(self.indices)} prompts")
            if any(s < 1 for s in self.samples):
                raise ValueError(f"Draw: every prompt needs >= 1 sample, got {self.samples}")


class PromptSampler:
    """The sampler interface. `varies_samples`: the sampler may set `Draw.samples` (the collector must then
    sample groups of different sizes; the single-turn collector does, agent collectors do not)."""

    varies_samples = False

    def next(self, k: int) -> Draw:
        """The next `k` prompts."""
        raise NotImplementedError

    def observe(self, rows: torch.Tensor, rewards: torch.Tensor, valid: torch.Tensor) -> None:
        """Feedback from one scored rollout round: `rows` (N,) long training-row index of each sample,
        `rewards` (N,) float, `valid` (N,) bool (False: the reward failed; ignore that sample)."""

    def metrics(self) -> dict[str, float]:
        """sampler/ metrics of the last draw (logged with the step)."""
        return {}

    def state_dict(self) -> dict[str, Any]:
        raise NotImplementedError

    def load_state_dict(self, state: dict[str, Any]) -> None:
        raise NotImplementedError


@SAMPLERS.register("uniform")
class UniformSampler(PromptSampler):
    """Every training row once per epoch in a fresh seeded permutation (sampling without replacement): the
    default, what every GRPO recipe does. Its state is the epoch and the cursor."""

    def __init__(self, ctx: SamplerContext) -> None:
        self.rows = RowSampler(len(ctx.rows), ctx.seed)

    def next(self, k: int) -> Draw:
        return Draw(self.rows.next(k))

    def state_dict(self) -> dict[str, Any]:
        return self.rows.state_dict()

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.rows.load_state_dict(state)


def group_rewards(rows: torch.Tensor, rewards: torch.Tensor, valid: torch.Tensor) -> dict[int, list[float]]:
    """The valid rewards of each training row in a scored round: {row: [reward, ...]}.

    >>> group_rewards(torch.tensor([3, 3, 5, 5]), torch.tensor([1.0, 0.0, 1.0, 0.5]),
    ...               torch.tensor([True, True, False, True]))
    {3: [1.0, 0.0], 5: [0.5]}
    """
    out: dict[int, list[float]] = {}
    for r, x, ok in zip(rows.tolist(), rewards.tolist(), valid.tolist()):
        if ok:
            out.setdefault(int(r), []).append(float(x))
    return out
