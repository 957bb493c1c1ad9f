"""Token sampling from logits: temperature, top-k, top-p; returns the sampled ids and their log-probs."""

from __future__ import annotations

import torch

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


def draw_uniforms(generator: torch.Generator | None, steps: int, total: int, s: SamplingSettings, device: torch.device | str = "cpu") -> torch.Tensor | None:
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


def sample_tokens(logits: torch.Tensor, s: SamplingSettings, generator: torch.Generator | None = None, rows: torch.Tensor | None = None, total: int | None = None, u: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
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
    cdf = probs.double().cumsum(-1)  # (B, V)
    ids = torch.searchsorted(cdf, (u.to(cdf.device) * cdf[:, -1])[:, None], right=True).squeeze(-1).clamp(max=logits.shape[-1] - 1)  # (B,)
    return ids, logp.gather(-1, ids[:, None]).squeeze(-1)
