"""The combinatorial-optimisation training loop: fresh instances each step, sampled solutions, a registered loss.

One step (`CoTrainer.step`): draw `batch_size` instances from the seeded generator, sample `starts` solutions of
each with the policy (POMO: one per start node), turn them into a loss with the configured `co_loss` entry, take an
Adam step. `evaluate` decodes the fixed test set and reports the optimality gap against its reference solutions.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Callable, Optional

import torch

from ascent.co.decoding import MODES, evaluate_modes, rollout
from ascent.co.envs import make_env
from ascent.co.losses import CO_LOSSES
from ascent.co.model import CO_POLICIES
from ascent.co.problems import generate
from ascent.co.solvers import EvalSet, gap, load_test_set
from ascent.config.schema import CoConfig

TRAIN_SEED_OFFSET = 7919
"""The training generator is seeded with seed * TRAIN_SEED_OFFSET + 1 (never the test set's seed)."""


def check_co(cfg: CoConfig) -> None:
    """Cross-field checks of a `co:` section; each failure says what to change."""
    for key in ("n", "steps", "batch_size", "eval_size", "log_every", "keep_checkpoints"):
        if getattr(cfg, key) <= 0:
            raise ValueError(f"co.{key} must be > 0, got {getattr(cfg, key)}")
    if cfg.n < 2:
        raise ValueError(f"co.n must be at least 2, got {cfg.n}")
    if cfg.starts < 0 or cfg.starts > cfg.n:
        raise ValueError(f"co.starts must be in [0, co.n={cfg.n}] (0: every start node), got {cfg.starts}")
    if cfg.starts == 1:
        raise ValueError("co.starts=1 leaves POMO's shared baseline nothing to compare with; use 0 or >= 2")
    if cfg.lr <= 0 or cfg.weight_decay < 0 or cfg.max_grad_norm < 0:
        raise ValueError("co.lr must be > 0, co.weight_decay and co.max_grad_norm >= 0")
    bad = [m for m in cfg.eval_modes if m not in MODES]
    if bad or not cfg.eval_modes:
        raise ValueError(f"co.eval_modes: {bad or 'empty'}; choose from {', '.join(MODES)}")


class CoTrainer:
    """Policy, optimizer and generators of one run; `fit` trains, `evaluate` measures gaps."""

    def __init__(self, cfg: CoConfig, seed: int, test: Optional[EvalSet] = None) -> None:
        check_co(cfg)
        self.cfg, self.seed = cfg, seed
        torch.manual_seed(seed)
        self.policy = CO_POLICIES.resolve(cfg.policy, key="co.policy")(cfg.problem)
        self.loss = CO_LOSSES.resolve(cfg.loss, key="co.loss")
        self.optim = torch.optim.Adam(self.policy.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
        self.gen = torch.Generator().manual_seed(seed * TRAIN_SEED_OFFSET + 1)  # instances
        self.sample_gen = torch.Generator().manual_seed(seed * TRAIN_SEED_OFFSET + 2)  # actions
        self.steps = 0
        self._test = test

    @property
    def test(self) -> EvalSet:
        """The fixed test set (its first eval_size instances), loaded on first use."""
        if self._test is None:
            self._test = load_test_set(self.cfg.problem, self.cfg.n, Path(self.cfg.test_cache), self.cfg.eval_size)
        return self._test

    def step(self) -> dict[str, float]:
        """One gradient step on a fresh batch; its metrics."""
        cfg = self.cfg
        inst = generate(cfg.problem, cfg.n, cfg.batch_size, self.gen)
        starts = cfg.starts or len(make_env(inst).start_nodes())
        sol = rollout(self.policy, inst, starts, starts=True, greedy=False, generator=self.sample_gen)
        loss, metrics = self.loss(sol)
        self.optim.zero_grad(set_to_none=True)
        loss.backward()
        if cfg.max_grad_norm > 0:
            metrics["loss/grad_norm"] = float(
                torch.nn.utils.clip_grad_norm_(self.policy.parameters(), cfg.max_grad_norm)
            )
        self.optim.step()
        self.steps += 1
        return metrics

    def evaluate(self, modes: Optional[list[str]] = None) -> dict[str, float]:
        """`eval/gap_<mode>` (percent) and `eval/cost_<mode>` for each decoding mode on the test set."""
        out = {}
        for mode, costs in evaluate_modes(self.policy, self.test.instances, modes or self.cfg.eval_modes).items():
            out[f"eval/gap_{mode}"] = gap(costs, self.test.ref_cost)
            out[f"eval/cost_{mode}"] = float(costs.mean())
        return out

    def fit(
        self,
        on_log: Callable[[int, dict[str, float]], None] = lambda s, m: None,
        on_checkpoint: Callable[[int], None] = lambda s: None,
        stop_at: Optional[int] = None,
    ) -> bool:
        """Train until cfg.steps (or `stop_at`); True when cfg.steps were reached."""
        cfg = self.cfg
        end = cfg.steps if stop_at is None else min(stop_at, cfg.steps)
        t_log, steps_log = time.perf_counter(), self.steps
        while self.steps < end:
            metrics = self.step()
            if self.steps % cfg.log_every == 0:
                now = time.perf_counter()
                metrics["time/steps_per_s"] = (self.steps - steps_log) / max(now - t_log, 1e-9)
                t_log, steps_log = now, self.steps
                if cfg.eval_every and self.steps % cfg.eval_every == 0 and self.steps < cfg.steps:
                    metrics.update(self.evaluate(cfg.eval_modes[:1]))
                on_log(self.steps, metrics)
            if (cfg.checkpoint_every and self.steps % cfg.checkpoint_every == 0) or self.steps >= end:
                on_checkpoint(self.steps)
        return self.steps >= cfg.steps

    def state_dict(self) -> dict[str, Any]:
        return {
            "optim": self.optim.state_dict(),
            "gen": self.gen.get_state(),
            "sample_gen": self.sample_gen.get_state(),
            "steps": self.steps,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.optim.load_state_dict(state["optim"])
        self.gen.set_state(state["gen"])
        self.sample_gen.set_state(state["sample_gen"])
        self.steps = state["steps"]
