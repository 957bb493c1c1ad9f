"""AdamW and the learning-rate schedule (linear warm-up, then constant / cosine / linear decay / wsd)."""

from __future__ import annotations

import math

import torch

from ascent.config.schema import OptimConfig


def make_optimizer(model: torch.nn.Module, cfg: OptimConfig) -> torch.optim.AdamW:
    """AdamW over the trainable parameters."""
    params = [p for p in model.parameters() if p.requires_grad]
    if not params:
        raise ValueError("the model has no trainable parameters")
    return torch.optim.AdamW(params, lr=cfg.lr, betas=(cfg.beta1, cfg.beta2), weight_decay=cfg.weight_decay)


def lr_factor(step: int, total: int, cfg: OptimConfig) -> float:
    """Multiplier of the peak lr at optimizer step `step` of `total`.

    >>> c = OptimConfig(lr=1.0, schedule="cosine", warmup_steps=10, min_lr_ratio=0.0)
    >>> lr_factor(5, 110, c), lr_factor(10, 110, c), round(lr_factor(60, 110, c), 3), lr_factor(110, 110, c)
    (0.5, 1.0, 0.5, 0.0)
    >>> w = OptimConfig(lr=1.0, schedule="wsd", warmup_steps=10, decay_frac=0.2)
    >>> [round(lr_factor(s, 110, w), 6) for s in (80, 90, 100, 110)]
    [1.0, 1.0, 0.5, 0.0]
    """
    if cfg.warmup_steps and step < cfg.warmup_steps:
        return (step + 0) / cfg.warmup_steps
    if cfg.schedule == "constant":
        return 1.0
    progress = min(1.0, (step - cfg.warmup_steps) / max(1, total - cfg.warmup_steps))
    if cfg.schedule == "wsd":  # warm-up, stable, then a linear decay over the last decay_frac of the steps
        progress = max(0.0, (progress - (1.0 - cfg.decay_frac)) / cfg.decay_frac) if cfg.decay_frac > 0 else 0.0
    shape = 0.5 * (1.0 + math.cos(math.pi * progress)) if cfg.schedule == "cosine" else 1.0 - progress
    return cfg.min_lr_ratio + (1.0 - cfg.min_lr_ratio) * shape


def make_scheduler(
    optimizer: torch.optim.Optimizer, cfg: OptimConfig, total_steps: int
) -> torch.optim.lr_scheduler.LambdaLR:
    """A LambdaLR following `lr_factor`."""
    return torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: lr_factor(s, total_steps, cfg))


def clip_and_step(
    model: torch.nn.Module, optimizer: torch.optim.Optimizer, scheduler, grad_clip: float
) -> tuple[float, bool]:
    """Clip the global grad norm, then step if it is finite. Returns (grad norm, stepped)."""
    params = [p for p in model.parameters() if p.grad is not None]
    norm = torch.nn.utils.clip_grad_norm_(params, grad_clip if grad_clip > 0 else float("inf"))
    if hasattr(norm, "full_tensor"):  # sharded (FSDP2) gradients: the norm over every rank's shards
        norm = norm.full_tensor()
    stepped = bool(torch.isfinite(norm))
    if stepped:
        optimizer.step()
        scheduler.step()
    optimizer.zero_grad(set_to_none=True)
    return float(norm), stepped
