"""How the learner cuts a rollout batch: mini-batches (one optimizer step each) and micro-batches (one
forward/backward each), whole groups kept together when the loss requires "groups"."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

import torch

from ascent.rollout.types import RolloutBatch


@dataclass
class MicroBatch:
    """Rows of a mini-batch processed in one forward/backward."""

    input_ids: torch.Tensor  # (n, T)
    attention_mask: torch.Tensor  # (n, T)
    mask: torch.Tensor  # (n, T) loss mask
    advantages: torch.Tensor  # (n, T)
    old_logprobs: torch.Tensor | None  # (n, T)
    sampled_logprobs: torch.Tensor  # (n, T)
    completion_mask: torch.Tensor  # (n, T) sampled tokens, valid or not
    prompt_group: torch.Tensor  # (n,) the prompt each row answers (rows sharing one are forwarded once)
    sequence: dict[str, torch.Tensor] = field(default_factory=dict)  # (n,) or token-aligned (n, T) LossInput fields


def mini_batch_bounds(batch: RolloutBatch, parts: int, groups: bool, loss: str = "") -> list[int]:
    """Row boundaries of exactly `parts` mini-batches; at group boundaries when `groups` (the loss requires
    "groups"; the rows of a group are contiguous in a RolloutBatch)."""
    n = len(batch)
    if not groups:
        return [round(i * n / parts) for i in range(parts + 1)]
    starts = group_starts(batch.group_index)
    count = len(starts) - 1
    if count < parts:
        raise ValueError(
            f"loss {loss!r} needs whole groups per mini-batch, but {count} groups cannot fill "
            f"algorithm.mini_batches={parts}; lower mini_batches or raise train.prompts_per_step"
        )
    return [starts[round(i * count / parts)] for i in range(parts + 1)]


def micro_batches(
    batch: RolloutBatch, rows: slice, m: int, groups: bool, keep: Optional[torch.Tensor] = None
) -> list[torch.Tensor]:
    """Row indices of each micro-batch of the mini-batch `rows`: `m` rows each, or whole groups packed up to `m`
    rows when `groups` (a group larger than `m` forms one micro-batch on its own). `keep` (N,) bool: only those
    rows."""
    idx = torch.arange(len(batch))[rows]
    if keep is not None:
        idx = idx[keep[idx]]
        if len(idx) == 0:
            return []
    if not groups:
        return [idx[s : s + m] for s in range(0, len(idx), m)]
    starts = group_starts(batch.group_index[idx])
    spans, first = [], 0
    for a, b in zip(starts[:-1], starts[1:]):  # the group's rows are [a, b)
        if b - first > m and a > first:  # it would overflow the open micro-batch: close that one before it
            spans.append((first, a))
            first = a
    spans.append((first, starts[-1]))
    return [idx[a:b] for a, b in spans]


def group_starts(group_index: torch.Tensor) -> list[int]:
    """Start row of each run of equal group ids, plus the end: [0, ..., N].

    >>> group_starts(torch.tensor([0, 0, 1, 1, 1, 2]))
    [0, 2, 5, 6]
    """
    n = len(group_index)
    change = (group_index[1:] != group_index[:-1]).nonzero().squeeze(-1) + 1
    return [0] + change.tolist() + [n] if n else [0]
