"""ONE reduction from a (sequence, token) loss matrix to a scalar, used by every loss.

Normalisers are passed in (tokens and sequences of the whole mini-batch), so that summing the losses of
micro-batches gives exactly the loss of the mini-batch: gradient accumulation changes nothing.
"""

from __future__ import annotations

from typing import Literal

import torch

AggMode = Literal["token-mean", "seq-mean-token-mean", "seq-mean-token-sum", "seq-mean-token-sum-norm"]
AGG_MODES: tuple[str, ...] = ("token-mean", "seq-mean-token-mean", "seq-mean-token-sum", "seq-mean-token-sum-norm")


def aggregate(
    loss_mat: torch.Tensor,
    mask: torch.Tensor,
    mode: str,
    num_tokens: float | None = None,
    num_seqs: float | None = None,
    norm_length: float | None = None,
) -> torch.Tensor:
    """Reduce `loss_mat` (N, T) over the tokens where `mask` (N, T) is 1.

    - token-mean: sum_{i,t} l_it / sum_{i,t} m_it (DAPO; every token weighs the same)
    - seq-mean-token-mean: mean_i (sum_t l_it / sum_t m_it) (original GRPO)
    - seq-mean-token-sum: mean_i sum_t l_it
    - seq-mean-token-sum-norm: sum_{i,t} l_it / (N * L) with a constant L (Dr. GRPO, no length bias)

    `num_tokens` / `num_seqs` default to this batch's counts; pass the mini-batch's counts when
    accumulating micro-batches.

    >>> l = torch.tensor([[1., 2., 0.], [3., 0., 0.]]); m = torch.tensor([[1., 1., 0.], [1., 0., 0.]])
    >>> float(aggregate(l, m, "token-mean")), float(aggregate(l, m, "seq-mean-token-mean"))
    (2.0, 2.25)
    >>> float(aggregate(l, m, "seq-mean-token-sum")), float(aggregate(l, m, "seq-mean-token-sum-norm", norm_length=3))
    (3.0, 1.0)
    """
    masked = loss_mat * mask  # (N, T)
    seqs = float(num_seqs) if num_seqs is not None else float(mask.shape[0])
    if mode == "token-mean":
        tokens = float(num_tokens) if num_tokens is not None else float(mask.sum())
        return masked.sum() / max(tokens, 1.0)
    if mode == "seq-mean-token-mean":
        per_seq = masked.sum(-1) / mask.sum(-1).clamp(min=1.0)  # (N,)
        return per_seq.sum() / max(seqs, 1.0)
    if mode == "seq-mean-token-sum":
        return masked.sum() / max(seqs, 1.0)
    if mode == "seq-mean-token-sum-norm":
        length = float(norm_length) if norm_length is not None else float(mask.shape[1])
        return masked.sum() / max(seqs * length, 1.0)
    raise ValueError(f"unknown loss aggregation {mode!r}; valid modes: {', '.join(AGG_MODES)}")


def masked_mean(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mean of `x` where `mask` is 1 (0 if the mask is empty)."""
    return (x * mask).sum() / mask.sum().clamp(min=1.0)
