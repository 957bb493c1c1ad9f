"""Distil histories into the in-context transformer, and evaluate it in context with frozen weights.

Training (Algorithm Distillation, Laskin et al. 2022, arXiv:2210.14215): windows of `context` consecutive steps are
cut at random from the histories (never across two histories) and the model predicts every action in the window
from the steps before it (cross-entropy at every position). Evaluation: the model acts in held-out tasks from an
empty context for E episodes; the context is the last `context` steps of its own interaction, across episode
boundaries; no gradient is taken and the weights are never written (`torch.inference_mode`), so any improvement
of the return with the episode index is in-context learning.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Optional

import numpy as np
import torch

from ascent.incontext.histories import History
from ascent.incontext.model import InContextTransformer
from ascent.incontext.tasks import Family


@dataclass(frozen=True)
class TrainParams:
    context: int = 80
    """Steps per training window (and the evaluation context)."""
    batch_size: int = 32
    """Windows per gradient step."""
    steps: int = 1500
    """Gradient steps."""
    lr: float = 1e-3
    """Peak AdamW learning rate (linear warmup, cosine decay to 10%)."""
    warmup: int = 100
    """Warmup steps."""
    weight_decay: float = 0.01
    """AdamW weight decay."""
    grad_clip: float = 1.0
    """Gradient-norm clip."""
    subsample: int = 1
    """Keep every k-th episode of each history (AD's subsampling; 1: all)."""

    def __post_init__(self) -> None:
        if self.context < 2 or self.batch_size < 1 or self.steps < 0 or self.lr <= 0 or self.subsample < 1:
            raise ValueError("train needs context >= 2, batch_size >= 1, steps >= 0, lr > 0, subsample >= 1")


@dataclass
class Tokens:
    """A history as model inputs, each (N, L): position t carries o_t, a_{t-1}, r_{t-1}, t mod H, target a_t."""

    obs: torch.Tensor
    prev_actions: torch.Tensor
    prev_rewards: torch.Tensor
    steps: torch.Tensor
    actions: torch.Tensor


def history_tokens(h: History, num_actions: int) -> Tokens:
    """Shift a history's actions and rewards one step right (a reserved "none" action and reward 0 at t = 0)."""
    n, length = h.obs.shape
    prev_a = np.concatenate([np.full((n, 1), num_actions), h.actions[:, :-1]], 1)
    prev_r = np.concatenate([np.zeros((n, 1), np.float32), h.rewards[:, :-1]], 1)
    steps = np.broadcast_to(np.arange(length) % h.horizon, (n, length))
    return Tokens(
        torch.as_tensor(h.obs),
        torch.as_tensor(prev_a),
        torch.as_tensor(prev_r, dtype=torch.float32),
        torch.as_tensor(np.ascontiguousarray(steps)),
        torch.as_tensor(h.actions),
    )


def sample_windows(
    tok: Tokens, context: int, batch: int, gen: torch.Generator, probs: Optional[torch.Tensor] = None
) -> Tokens:
    """`batch` random windows of `context` steps (each inside one history); the history of each window uniform, or
    drawn with `probs` (N,) (a weighted empirical risk: LHF, ascent.incontext.lhf)."""
    n, length = tok.obs.shape
    k = min(context, length)
    if probs is None:
        rows = torch.randint(0, n, (batch,), generator=gen)
    else:
        rows = torch.multinomial(probs, batch, replacement=True, generator=gen)
    start = torch.randint(0, length - k + 1, (batch,), generator=gen)
    cols = start[:, None] + torch.arange(k)[None]  # (B, K)
    pick = lambda x: x[rows[:, None], cols]  # noqa: E731
    return Tokens(pick(tok.obs), pick(tok.prev_actions), pick(tok.prev_rewards), pick(tok.steps), pick(tok.actions))


def window_loss(model: InContextTransformer, w: Tokens) -> torch.Tensor:
    logits = model(w.obs, w.prev_actions, w.prev_rewards, w.steps)  # (B, K, A)
    return torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), w.actions.reshape(-1))


def lr_factor(step: int, warmup: int, total: int) -> float:
    if step < warmup:
        return (step + 1) / warmup
    progress = (step - warmup) / max(1, total - warmup)
    return 0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(1.0, progress)))


def train_model(
    model: InContextTransformer,
    histories: History,
    p: TrainParams,
    seed: int,
    on_log: Optional[Callable[[int, dict], None]] = None,
    log_every: int = 100,
    history_weights: Optional[np.ndarray] = None,
) -> list[float]:
    """Fit `model` to predict the histories' actions; returns the loss of every step. `history_weights` (N,):
    windows are cut from history i with probability proportional to its weight (default: uniform)."""
    tok = history_tokens(histories.subsample(p.subsample), model.num_actions)
    probs = None
    if history_weights is not None:
        w = np.asarray(history_weights, dtype=np.float64)
        if w.shape != (len(histories.obs),) or not np.all(np.isfinite(w)) or w.min() < 0 or w.sum() <= 0:
            raise ValueError(f"history_weights must be {len(histories.obs)} finite values >= 0, not all 0")
        probs = torch.as_tensor(w / w.sum())
    gen = torch.Generator().manual_seed(seed)
    opt = torch.optim.AdamW(model.parameters(), lr=p.lr, weight_decay=p.weight_decay)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: lr_factor(s, p.warmup, p.steps))
    model.train()
    losses = []
    for step in range(p.steps):
        loss = window_loss(model, sample_windows(tok, p.context, p.batch_size, gen, probs))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), p.grad_clip)
        opt.step()
        sched.step()
        losses.append(loss.item())
        if on_log is not None and (step + 1) % log_every == 0:
            on_log(step + 1, {"loss": float(np.mean(losses[-log_every:])), "lr": sched.get_last_lr()[0]})
    model.eval()
    return losses


@torch.inference_mode()
def evaluate_in_context(
    model: InContextTransformer, family: Family, tasks: np.ndarray, episodes: int, seed: int, greedy: bool = False
) -> np.ndarray:
    """(N, E) return of every in-context episode on `tasks`, the model's weights frozen (see the module docstring).
    Actions are sampled from the model's distribution (`greedy`: its argmax)."""
    was_training = model.training
    model.eval()
    batch = family.batch(tasks, seed)
    gen = torch.Generator().manual_seed(seed)
    n, h, k = len(tasks), family.horizon, model.context
    length = episodes * h
    obs = torch.zeros((n, length), dtype=torch.long)
    prev_a = torch.full((n, length), model.num_actions, dtype=torch.long)
    prev_r = torch.zeros((n, length))
    steps = torch.as_tensor(np.arange(length) % h).expand(n, length)
    returns = np.zeros((n, episodes))
    for e in range(episodes):
        o = batch.reset()
        for t in range(h):
            i = e * h + t
            obs[:, i] = torch.as_tensor(o)
            lo = max(0, i + 1 - k)
            logits = model(obs[:, lo : i + 1], prev_a[:, lo : i + 1], prev_r[:, lo : i + 1], steps[:, lo : i + 1])
            last = logits[:, -1].float()  # (N, A)
            a = last.argmax(-1) if greedy else torch.multinomial(torch.softmax(last, -1), 1, generator=gen)[:, 0]
            o, r = batch.step(a.numpy())
            returns[:, e] += r
            if i + 1 < length:
                prev_a[:, i + 1], prev_r[:, i + 1] = a, torch.as_tensor(r)
    model.train(was_training)
    return returns
