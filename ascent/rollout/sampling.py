"""Token sampling from logits: temperature, top-k, top-p; returns the sampled ids and their log-probs."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from ascent.rollout.types import SamplingSettings


def filter_logits(logits: torch.Tensor, top_k: int, top_p: float) -> torch.Tensor:
    """Set logits outside the top-k / nucleus (top-p) to -inf. logits: (B, V)."""
    if top_k > 0 and top_k < logits.shape[-1]:
        kth = torch.topk(logits, top_k, dim=-1).values[:, -1:]  # (B, 1)
        logits = logits.masked_fill(logits < kth, float("-inf"))
    if top_p < 1.0:
        sorted_logits, order = torch.sort(logits, dim=-1, descending=True)
        probs = torch.softmax(sorted_logits, dim=-1)
        cum = probs.cumsum(-1)
        drop = (cum - probs) > top_p  # keep the smallest prefix whose mass reaches top_p
        sorted_logits = sorted_logits.masked_fill(drop, float("-inf"))
        logits = torch.full_like(logits, float("-inf")).scatter(-1, order, sorted_logits)
    return logits


def draw_uniforms(
    generator: torch.Generator | None, steps: int, total: int, s: SamplingSettings, device: torch.device | str = "cpu"
) -> torch.Tensor | None:
    """All the uniforms a rollout of `total` sequences x `steps` positions can use, drawn up front: (steps,
    total) float64, entry [t, i] for position t of sequence i (None when greedy: nothing is drawn).

    Pre-drawing makes each sequence's tokens independent of when it is decoded (scheduling, caps on the
    active batch, finished rows leaving). Rows are positions so that the values equal those of `steps`
    successive `torch.rand(total)` draws (the CPU generator is sequential), which is what the engines drew
    step by step before.
    """
    if s.temperature == 0:
        return None
    return torch.rand(steps, total, generator=generator, dtype=torch.float64).to(device)


def sample_tokens(
    logits: torch.Tensor,
    s: SamplingSettings,
    generator: torch.Generator | None = None,
    rows: torch.Tensor | None = None,
    total: int | None = None,
    u: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Sample one token per row of `logits` (B, V). Returns (ids (B,), log-probs (B,)).

    The log-prob is that of the temperature-scaled, untruncated distribution, which is what the learner
    recomputes; temperature 0 is greedy (log-prob at temperature 1).

    Sampling is by inverse CDF with one uniform per row: `u` (B,) when given (the engines pass their
    pre-drawn `draw_uniforms` entries, one per (sequence, position)), else `total` fresh draws of which row
    b uses draw `rows[b]`. Either way which sequences share the batch never changes what any sequence
    samples: engines that drop, reorder or schedule rows stay reproducible and comparable.
    """
    logits = logits.float()
    if s.temperature == 0:
        ids = logits.argmax(-1)  # (B,)
        logp = torch.log_softmax(logits, -1)
        return ids, logp.gather(-1, ids[:, None]).squeeze(-1)
    scaled = logits / s.temperature if s.temperature != 1.0 else logits
    logp = torch.log_softmax(scaled, -1)  # (B, V)
    probs = torch.softmax(filter_logits(scaled, s.top_k, s.top_p), -1) if (s.top_k or s.top_p < 1.0) else logp.exp()
    if u is None:
        rows = torch.arange(logits.shape[0]) if rows is None else rows
        u = torch.rand(total or logits.shape[0], generator=generator, dtype=torch.float64)[rows]  # (B,)
    ids = inverse_cdf(probs, u.to(probs.device))
    return ids, logp.gather(-1, ids[:, None]).squeeze(-1)


BLOCK = 256
"""Vocabulary block of the two-level inverse CDF (`inverse_cdf`)."""


def inverse_cdf(probs: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
    """For each row of (unnormalised) `probs` (B, V), the first index i with cdf[i] > u * total, in float64.

    Small vocabularies take one cumulative sum. Large ones (V > 4 x BLOCK) take two levels: per-block sums,
    a cumulative sum over the blocks to find the block, then a cumulative sum inside that block only. A
    float64 cumulative sum is sequential per row, so on a 49k vocabulary the two levels cut the sampler's
    cost several-fold (B x V/BLOCK + B x BLOCK sequential adds instead of B x V). The result differs from one
    long cumulative sum only in rounding: the block sums are taken in the probs' own precision (casting the
    whole (B, V) matrix to float64 costs more than the sampling), ~1e-7 relative, the size of the probs'
    own rounding; a token with zero probability is never drawn."""
    b, v = probs.shape
    if v <= 4 * BLOCK:
        cdf = probs.double().cumsum(-1)  # (B, V)
        return torch.searchsorted(cdf, (u * cdf[:, -1])[:, None], right=True).squeeze(-1).clamp(max=v - 1)
    nb = -(-v // BLOCK)
    blocks = (probs if v == nb * BLOCK else F.pad(probs, (0, nb * BLOCK - v))).view(
        b, nb, BLOCK
    )  # zero padding: never drawn
    block_cdf = blocks.sum(-1).double().cumsum(-1)  # (B, nb): block sums in the probs' dtype, their cumsum in float64
    target = u * block_cdf[:, -1]  # (B,)
    bi = torch.searchsorted(block_cdf, target[:, None], right=True).squeeze(-1).clamp(max=nb - 1)  # (B,)
    rows = torch.arange(b, device=probs.device)
    inside = blocks[rows, bi].double()  # (B, BLOCK)
    before = torch.where(bi > 0, block_cdf[rows, (bi - 1).clamp(min=0)], torch.zeros_like(target))
    j = torch.searchsorted(inside.cumsum(-1), (target - before)[:, None], right=True).squeeze(-1)  # (B,)
    last = torch.where(inside > 0, torch.arange(BLOCK, device=probs.device), -1).amax(
        -1
    )  # rounding past the block's end
    return bi * BLOCK + torch.minimum(j, last.clamp(min=0))
