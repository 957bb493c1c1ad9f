"""One in-context RL experiment: histories per arm, a transformer distilled from each, in-context evaluation on
held-out tasks, and the source algorithm itself on the same tasks, over several seeds.

An arm is a name and the source whose histories it distils: `ad` (a learning algorithm: Algorithm Distillation,
Laskin et al. 2022, arXiv:2210.14215), `ed` (the optimal policy only: the paper's expert-distillation control) and
`ad_eps` (a demonstrator whose noise decays: AD^epsilon, Zisman et al. 2023, arXiv:2312.12275). Every arm trains
the same transformer with the same budget from the same initial weights of a seed.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional

import numpy as np
import torch

from ascent.incontext.histories import SOURCES, cached_history, collect
from ascent.incontext.model import InContextTransformer, TransformerParams
from ascent.incontext.tasks import make_family, optimal_returns
from ascent.incontext.train import TrainParams, evaluate_in_context, train_model


@dataclass(frozen=True)
class InContextConfig:
    """An in-context RL experiment (`ascent eval-in-context key=value ...`; docs/in_context.md)."""

    family: str = "darkroom"
    """Task family spec (`ascent list incontext_families --params`), e.g. darkroom or bandit(arms=5)."""
    arms: list[str] = field(default_factory=lambda: ["ad=q_learning", "ed=expert", "ad_eps=noisy_expert"])
    """Arms as name=source spec (`ascent list incontext_sources --params`); every arm trains the same model."""
    source_control: bool = True
    """Also run the first arm's source algorithm on the held-out tasks (its return per episode, for comparison)."""
    histories: int = 122
    """Training histories per arm (the family's training tasks in a seeded order, repeated as needed)."""
    episodes: int = 120
    """Episodes per history (before subsampling)."""
    eval_tasks: int = 20
    """Held-out tasks evaluated (the family's test tasks, repeated as needed)."""
    eval_episodes: int = 30
    """In-context episodes per held-out task."""
    greedy: bool = False
    """Evaluate with the argmax action (default: sample from the model)."""
    seeds: list[int] = field(default_factory=lambda: [0, 1, 2])
    """Seeds: each seeds the histories, the model's initial weights, the batches and the evaluation."""
    model: TransformerParams = field(default_factory=TransformerParams)
    """The transformer."""
    train: TrainParams = field(default_factory=TrainParams)
    """Training (context, steps, batch, learning rate, subsampling)."""
    cache_dir: Optional[str] = "runs/incontext/cache"
    """Where histories are cached (.npz); null: never cached."""
    threads: int = 1
    """torch threads."""

    def __post_init__(self) -> None:
        for arm in self.arms:
            name, _, spec = arm.partition("=")
            if not name or not spec:
                raise ValueError(f"arms: {arm!r} is not name=source (e.g. ad=q_learning)")
            SOURCES.resolve(spec, key=f"arms {name}")
        if not self.arms or not self.seeds or self.eval_episodes < 1 or self.histories < 1 or self.episodes < 1:
            raise ValueError("need at least one arm and one seed, eval_episodes >= 1, histories >= 1, episodes >= 1")


def arm_specs(cfg: InContextConfig) -> list[tuple[str, str]]:
    return [tuple(a.split("=", 1)) for a in cfg.arms]  # type: ignore[misc]


def run_seed(
    cfg: InContextConfig, seed: int, log: Callable[[str], None] = print, models: Optional[dict] = None
) -> dict[str, np.ndarray | list[float]]:
    """Every arm of one seed: (eval_tasks, eval_episodes) returns per arm name, the source control as `source`,
    and each arm's training losses under `loss_<arm>`; the trained models go into `models` when given."""
    family = make_family(cfg.family)
    train_tasks = family.tasks("train", cfg.histories, seed)
    test_tasks = family.tasks("test", cfg.eval_tasks, 0)
    cache = Path(cfg.cache_dir) if cfg.cache_dir else None
    grid = int(np.sqrt(family.num_obs)) if family.name != "bandit" else 0
    out: dict[str, np.ndarray | list[float]] = {}
    for name, spec in arm_specs(cfg):
        t0 = time.perf_counter()
        hist = cached_history(family, cfg.family, train_tasks, spec, cfg.episodes, seed, cache)
        t1 = time.perf_counter()
        torch.manual_seed(seed)
        model = InContextTransformer(
            family.num_obs, family.num_actions, family.horizon, cfg.train.context, cfg.model, grid=grid
        )
        losses = train_model(model, hist, cfg.train, seed)
        t2 = time.perf_counter()
        ret = evaluate_in_context(model, family, test_tasks, cfg.eval_episodes, seed + 1000, cfg.greedy)
        out[name], out[f"loss_{name}"] = ret, losses
        out[f"seconds_{name}"] = [t1 - t0, t2 - t1, time.perf_counter() - t2]  # data, training, evaluation
        if models is not None:
            models[name] = model
        log(
            f"seed {seed} {name} ({spec}): loss {np.mean(losses[:50]):.3f} -> {np.mean(losses[-50:]):.3f}; "
            f"in-context return first 5 {ret[:, :5].mean():.2f}, last 5 {ret[:, -5:].mean():.2f} "
            f"(data {t1 - t0:.0f}s, training {t2 - t1:.0f}s, evaluation {time.perf_counter() - t2:.0f}s)"
        )
    if cfg.source_control:
        spec = arm_specs(cfg)[0][1]
        episodes = cfg.eval_episodes * cfg.train.subsample
        src = collect(family, test_tasks, spec, max(episodes, cfg.episodes), seed + 1000).episode_returns()
        out["source"] = src[:, : episodes : cfg.train.subsample] if cfg.train.subsample > 1 else src[:, :episodes]
    return out


def mean_interval(x: np.ndarray) -> tuple[float, float, float]:
    """Mean over seeds (axis 0) and a 95% t-interval half-width (0 with one seed)."""
    from scipy import stats

    m = float(np.mean(x))
    if len(x) < 2:
        return m, m, m
    half = float(stats.t.ppf(0.975, len(x) - 1) * np.std(x, ddof=1) / np.sqrt(len(x)))
    return m, m - half, m + half


def summarise(cfg: InContextConfig, per_seed: list[dict]) -> dict:
    """summary.json: per arm the return per in-context episode (mean over held-out tasks, then over seeds with a 95%
    t-interval), first-5 and last-5 means with intervals, the optimal return of the held-out tasks; per arm the
    data, training and evaluation seconds summed over seeds and the final training loss, where the seeds carry them."""
    family = make_family(cfg.family)
    test_tasks = family.tasks("test", cfg.eval_tasks, 0)
    opt = float(optimal_returns(family, test_tasks, seed=0, episodes=20).mean())
    names = [n for n, _ in arm_specs(cfg)] + (["source"] if cfg.source_control else [])
    summary: dict = {
        "family": cfg.family,
        "return_optimal": opt,
        "seeds": list(cfg.seeds),
        "arms": dict(arm_specs(cfg)),
    }
    curves = {}
    for name in names:
        per_task = np.stack([s[name] for s in per_seed])  # (seeds, tasks, E)
        curve = per_task.mean(1)  # (seeds, E)
        curves[name] = [list(mean_interval(curve[:, e])) for e in range(curve.shape[1])]
        for part, sl in (("first5", slice(0, 5)), ("last5", slice(-5, None))):
            m, lo, hi = mean_interval(curve[:, sl].mean(1))
            summary[f"return_{part}_{name}"] = m
            summary[f"return_{part}_{name}_ci95"] = [lo, hi]
    for name, _ in arm_specs(cfg):
        if all(f"seconds_{name}" in s for s in per_seed):  # data, training, evaluation seconds, summed over seeds
            summary[f"seconds_{name}"] = [
                round(float(sum(s[f"seconds_{name}"][i] for s in per_seed)), 1) for i in range(3)
            ]
        if all(f"loss_{name}" in s for s in per_seed):  # final training loss (last 50 steps), mean over seeds
            summary[f"loss_last_{name}"] = float(np.mean([np.mean(s[f"loss_{name}"][-50:]) for s in per_seed]))
    summary["curves"] = curves
    return summary
