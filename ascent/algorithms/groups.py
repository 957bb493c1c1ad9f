"""Per-group reductions over the rows of a batch (rows carry a group id in 0..G-1)."""

from __future__ import annotations

import torch


def group_min_max(
    values: torch.Tensor, valid: torch.Tensor, group_index: torch.Tensor, groups: int | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """(min, max) over each group's valid values, (G,) each; a group with no valid value gets (+big, -big)
    (the dtype's largest finite value), so `max > min` is false for it and `min == max` marks an all-equal one.

    >>> lo, hi = group_min_max(torch.tensor([1.0, 3.0, 5.0, 7.0]), torch.tensor([True, True, False, False]),
    ...                        torch.tensor([0, 0, 1, 1]))
    >>> lo[0].item(), hi[0].item(), bool(hi[1] > lo[1])
    (1.0, 3.0, False)
    """
    if groups is None:
        groups = int(group_index.max()) + 1 if group_index.numel() else 0
    big = torch.finfo(values.dtype).max
    lo = torch.full((groups,), big, dtype=values.dtype).scatter_reduce(
        0, group_index, torch.where(valid, values, torch.full_like(values, big)), "amin"
    )
    hi = torch.full((groups,), -big, dtype=values.dtype).scatter_reduce(
        0, group_index, torch.where(valid, values, torch.full_like(values, -big)), "amax"
    )
    return lo, hi
