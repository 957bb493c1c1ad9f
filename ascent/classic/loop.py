"""The classic training loop: environments + the configured algorithm, iterated until `total_steps`, with
metrics, periodic evaluation and checkpoints due at environment-step boundaries; its whole state (weights,
optimizers, environments, normalisers, generators, replay buffer) round-trips for an exact resume.

The loop knows only the `Algorithm` interface (`ascent.classic.base`); which algorithm runs is the config's
`classic.algorithm` spec, resolved in the `classic` registry.
"""

from __future__ import annotations

import time
from functools import partial
from pathlib import Path
from typing import Any, Callable, Optional

import numpy as np
import torch
from safetensors.torch import load_file, save_file

from ascent.classic.base import CLASSIC, ClassicContext
from ascent.classic.envs import VecEnv, evaluate, make_env
from ascent.config.schema import ClassicConfig

EVAL_SEED_OFFSET = 10_000
"""Evaluation episode i is reset with seed + EVAL_SEED_OFFSET + i (never a training environment's seed)."""


def crossed(before: int, after: int, every: int) -> bool:
    """Whether a multiple of `every` lies in (before, after] (never when every is 0).

    >>> crossed(250, 260, 256), crossed(256, 300, 256), crossed(0, 10, 0)
    (True, False, False)
    """
    return every > 0 and after // every > before // every


class Weights:
    """The networks of a run as one model.safetensors (keys `module.parameter`); `save(folder)` is what
    `ascent.trainer.checkpoint.Checkpointer` calls."""

    def __init__(self, modules: dict[str, torch.nn.Module]) -> None:
        self.modules = modules

    def save(self, folder: Path) -> None:
        tensors = {f"{name}.{k}": v.contiguous() for name, m in self.modules.items() for k, v in m.state_dict().items()}
        save_file(tensors, str(Path(folder) / "model.safetensors"))

    def load(self, folder: Path) -> None:
        tensors = load_file(str(Path(folder) / "model.safetensors"))
        for name, module in self.modules.items():
            prefix = f"{name}."
            module.load_state_dict({k[len(prefix) :]: v for k, v in tensors.items() if k.startswith(prefix)})


class ClassicTrainer:
    """Builds the environments and the algorithm of `cfg`; `fit` trains, `evaluate` measures."""

    def __init__(self, cfg: ClassicConfig, seed: int) -> None:
        self.cfg, self.seed = cfg, seed
        piece = CLASSIC.resolve(cfg.algorithm, key="classic.algorithm")
        self.make = partial(make_env, cfg.env, cfg.wrappers, True)
        self.make_eval = partial(make_env, cfg.env, cfg.wrappers, False)
        gamma = getattr(piece.params, "gamma", 0.99) if cfg.normalize_reward else None
        self.envs = VecEnv(self.make, cfg.num_envs, seed, cfg.normalize_obs, gamma, cfg.clip_obs, cfg.clip_reward)
        ctx = ClassicContext(self.envs, cfg.total_steps, seed, torch.device(cfg.device), cfg.dataset)
        self.algo = piece(ctx)
        self.weights = Weights(self.algo.modules())
        self.episodes = 0
        """Training episodes finished so far."""

    @property
    def steps(self) -> int:
        return self.algo.steps

    def episode_metrics(self) -> dict[str, float]:
        """Mean return and length of the training episodes finished since the last call (none: {})."""
        done = self.envs.drain_episodes()
        self.episodes += len(done)
        if not done:
            return {"episodes": float(self.episodes)}
        returns, lengths = zip(*done)
        return {
            "episode/return": float(np.mean(returns)),
            "episode/length": float(np.mean(lengths)),
            "episodes": float(self.episodes),
        }

    def evaluate(self, episodes: int) -> list[float]:
        """Undiscounted returns of `episodes` deterministic episodes (frozen observation statistics)."""
        act = partial(self.algo.act, deterministic=True)
        if hasattr(self.algo, "begin_episodes"):  # a non-stationary policy counts the episodes' timesteps
            self.algo.begin_episodes()
        return evaluate(self.make_eval, act, episodes, self.seed + EVAL_SEED_OFFSET, self.envs.obs_norm)

    def fit(
        self,
        on_log: Callable[[int, dict[str, float]], None],
        on_checkpoint: Callable[[int], None],
        stop_at: Optional[int] = None,
    ) -> bool:
        """Iterate until total_steps (or `stop_at` environment steps); `on_log(steps, metrics)` after each
        iteration that crosses a multiple of log_every (and eval_every), `on_checkpoint(steps)` when one is due.
        Returns True when total_steps were reached."""
        cfg, algo = self.cfg, self.algo
        end = cfg.total_steps if stop_at is None else min(stop_at, cfg.total_steps)
        t_log, steps_log = time.perf_counter(), algo.steps
        while algo.steps < end:
            before = algo.steps
            want = crossed(before, before + algo.steps_per_iteration, cfg.log_every)
            metrics = algo.iteration(want)
            after = algo.steps
            if crossed(before, after, cfg.log_every):
                now = time.perf_counter()
                metrics.update(self.episode_metrics())
                metrics["time/fps"] = (after - steps_log) / max(now - t_log, 1e-9)
                t_log, steps_log = now, after
            if crossed(before, after, cfg.eval_every) and after < cfg.total_steps:
                metrics["eval/return"] = float(np.mean(self.evaluate(cfg.eval_episodes)))
            if metrics:
                on_log(after, metrics)
            if crossed(before, after, cfg.checkpoint_every) or after >= end:
                on_checkpoint(after)
        return algo.steps >= cfg.total_steps

    def state_dict(self) -> dict[str, Any]:
        return {"algorithm": self.algo.state_dict(), "envs": self.envs.state_dict(), "episodes": self.episodes}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.algo.load_state_dict(state["algorithm"])
        self.envs.load_state_dict(state["envs"])
        self.episodes = state["episodes"]
