"""A*-PO stage 1 (#104, Brantley et al. 2025): estimate the optimal value of every training prompt from
samples of the reference policy, once, before RL:

    V*(x) = beta log E_{y ~ pi_ref}[exp(r(x, y) / beta)]  ~=  beta log (1/k) sum_j exp(r_j / beta),

computed with logsumexp (stable for small beta, where it tends to max_j r_j; large beta gives the mean).
RLTrainer calls `estimate_v_star` lazily at its first step when the loss requires "v_star" and keeps the
result (one value per training row) in its state, so a resumed run does not sample again.
"""

from __future__ import annotations

import logging
import math
from typing import Callable

import torch

from ascent.rollout.batch import assemble

log = logging.getLogger(__name__)


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


@torch.no_grad()
def estimate_v_star(reference: torch.nn.Module, parts, encode: Callable[[int], list[int]], k: int, beta: float, seed: int, chunk: int) -> torch.Tensor:
    """(len(parts.rows),) V* per training row: `k` samples per prompt from the frozen `reference`, scored
    with the run's rewards, `chunk` prompts at a time. Uses its own generator (seeded by `seed`), so the
    training rollouts' random stream is untouched. Rows whose samples all fail get NaN (A*-PO skips them)."""
    if k < 1:
        raise ValueError(f"algorithm.a_star_k must be >= 1, got {k}")
    generator = torch.Generator().manual_seed(seed)
    reference.eval()
    values = []
    total = len(parts.rows)
    log.info("A*-PO stage 1: %d reference samples for each of %d training prompts", k, total)
    for start in range(0, total, chunk):
        indices = list(range(start, min(start + chunk, total)))
        rows = [parts.rows[i] for i in indices]
        ids = [encode(i) for i in indices]
        gen = parts.engine.generate(reference, ids, k, parts.settings, generator)
        fields = [{key: v for key, v in r.items() if key != "prompt"} for r in rows]
        batch = assemble([r["prompt"] for r in rows], ids, fields, gen, k, parts.policy.tokenizer, row_indices=indices)
        scores = parts.rewards.score(batch.prompts, batch.completions, batch.reward_fields())
        values.append(soft_value(scores.rewards.reshape(len(indices), k), scores.valid.reshape(len(indices), k), beta))
    v_star = torch.cat(values)
    missing = int(torch.isnan(v_star).sum())
    if missing:
        log.warning("A*-PO stage 1: every reference sample of %d prompts failed its reward; those prompts are skipped", missing)
    return v_star
