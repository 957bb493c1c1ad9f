"""A neural combinatorial-optimisation run (a recipe with a `co:` section): train, checkpoint, resume, measure gaps.

Same run directory as the other runs: config.yaml, state.json, metrics.jsonl (phase "rl", step = gradient steps),
checkpoints/step_N/ (model.safetensors: the policy; trainer_state.pt: optimizer, generators, step), curves.png and
summary.json:

    gap_<mode>         mean optimality gap (percent) on the fixed test set against its reference solutions, for each
                       decoding mode in co.eval_modes (greedy, multistart, multistart_aug8)
    cost_<mode>        mean tour length under that mode
    ref_cost           mean reference tour length; ref_solver: which solver made them
    steps, instances   gradient steps, training instances seen
    train_seconds      wall seconds of the training loop; train_cpu_seconds: CPU seconds of this process in it
    eval_seconds       wall seconds of the final evaluation; wall_seconds: the whole command, summed over resumes
"""

from __future__ import annotations

import json
import random
import time
from pathlib import Path
from typing import Any, Optional, Sequence

import numpy as np
import torch
import yaml
from safetensors.torch import load_file, save_file

from ascent.app.runs import RunDirError, opened_run, read_run_config, run_config_has, trackers
from ascent.co.train import CoTrainer
from ascent.config.loader import to_dict
from ascent.config.schema import RunConfig
from ascent.logging.metrics import MetricsLogger, console
from ascent.logging.plots import plot_panels
from ascent.logging.progress import progress_bar
from ascent.trainer.checkpoint import Checkpointer, rng_state, set_rng_state, write_text_atomic

PANELS = (
    ("train/reward", "mean sampled reward (minus tour length)"),
    ("train/best_reward", "best of the starts, per instance"),
    ("eval/gap_greedy", "test-set gap, greedy (%)"),
    ("loss/policy", "policy loss"),
    ("train/entropy", "policy entropy per step"),
    ("time/steps_per_s", "gradient steps per second"),
)


def is_co_run(run_dir: Path) -> bool:
    """Whether a run directory's config.yaml describes a CO run (read without building the config)."""
    return run_config_has(run_dir, "co")


class PolicyWeights:
    """The policy as one model.safetensors; `save(folder)` is what the Checkpointer calls."""

    def __init__(self, module: torch.nn.Module) -> None:
        self.module = module

    def save(self, folder: Path) -> None:
        save_file(
            {k: v.contiguous() for k, v in self.module.state_dict().items()}, str(Path(folder) / "model.safetensors")
        )

    def load(self, folder: Path) -> None:
        self.module.load_state_dict(load_file(str(Path(folder) / "model.safetensors")))


def evaluate_checkpoint(run_dir: Path, model_dir: Path, overrides: Optional[list[str]] = None) -> dict[str, Any]:
    """`ascent eval` of a CO run: the checkpoint's policy on the fixed test set, every mode of co.eval_modes
    (overrides such as co.eval_size=100 or "co.eval_modes=[greedy]" apply)."""
    cfg = read_run_config(run_dir, overrides)
    torch.set_num_threads(cfg.threads or 1)
    trainer = CoTrainer(cfg.co, cfg.seed)
    PolicyWeights(trainer.policy).load(model_dir)
    result = trainer.evaluate()
    return {
        "checkpoint": str(model_dir),
        "steps": Checkpointer.load_state(model_dir)["trainer"]["steps"],
        **{k.split("/", 1)[1]: round(v, 4) for k, v in result.items()},
        "ref_solver": trainer.test.solver,
        "test_instances": trainer.test.instances.size,
    }


def train_run(
    cfg: Optional[RunConfig] = None,
    run_dir: Optional[Path] = None,
    resume: bool = False,
    overwrite: bool = False,
    stop_at: Optional[int] = None,
    overrides: Optional[list[str]] = None,
) -> Optional[dict[str, Any]]:
    """Open (or reopen, with `resume`) the run directory and train its `co:` section; the summary, or None when
    stopped at `stop_at` steps."""
    run_dir = Path(run_dir) if run_dir is not None else Path(cfg.output_dir) / cfg.name
    with opened_run(cfg, run_dir, overwrite, resume, overrides) as cfg:
        if cfg.co is None:
            raise RunDirError(f"{run_dir} is not a combinatorial-optimisation run (its config has no co: section)")
        return train_co(cfg, run_dir, resume, stop_at, trackers(cfg, run_dir))


def train_co(
    cfg: RunConfig, run_dir: Path, resume: bool, stop_at: Optional[int], sinks: Sequence[Any] = ()
) -> Optional[dict[str, Any]]:
    """Train `cfg.co` in `run_dir`; see the module docstring for what it writes."""
    c = cfg.co
    torch.set_num_threads(cfg.threads or 1)
    state_path = run_dir / "state.json"
    state = json.loads(state_path.read_text()) if resume and state_path.exists() else {}
    t0, wall_before = time.perf_counter(), state.get("wall_seconds", 0.0)
    train_before, cpu_before = state.get("train_seconds", 0.0), state.get("train_cpu_seconds", 0.0)
    random.seed(cfg.seed), np.random.seed(cfg.seed), torch.manual_seed(cfg.seed)
    trainer = CoTrainer(c, cfg.seed)
    weights = PolicyWeights(trainer.policy)
    test = trainer.test  # fail before training when the test set is missing
    params = sum(p.numel() for p in trainer.policy.parameters())
    console.print(f"[bold]ascent[/bold] co run [cyan]{run_dir}[/cyan] (seed {cfg.seed})")
    console.print(yaml.safe_dump({"co": to_dict(c)}, sort_keys=False).rstrip())
    console.print(
        f"{c.problem}{c.n}: {c.steps} steps x {c.batch_size} instances x {c.starts or 'all'} starts; "
        f"{params:,} parameters; test set {test.instances.size} instances ({test.solver})"
    )
    logger = MetricsLogger(run_dir, cfg.logging.tensorboard, sinks)
    ckpt = Checkpointer(run_dir / "checkpoints", c.keep_checkpoints)
    latest = ckpt.latest() if resume else None
    if latest is not None:
        weights.load(latest)
        saved = Checkpointer.load_state(latest)
        trainer.load_state_dict(saved["trainer"])
        set_rng_state(saved["rng"])
        console.print(f"resumed from {latest} ({trainer.steps} steps)")
    logger.truncate_after("rl", trainer.steps)
    t1, c1 = time.perf_counter(), time.process_time()

    def save_state(training: bool = True) -> None:
        if training:
            state["train_seconds"] = train_before + time.perf_counter() - t1
            state["train_cpu_seconds"] = cpu_before + time.process_time() - c1
        state["wall_seconds"] = wall_before + time.perf_counter() - t0
        write_text_atomic(state_path, json.dumps(state, indent=2))

    def on_checkpoint(step: int) -> None:
        ckpt.save(step, weights, {"trainer": trainer.state_dict(), "rng": rng_state()})
        save_state()

    with progress_bar("rl", c.steps, cfg.logging.progress, trainer.steps) as bar:

        def on_log(step: int, metrics: dict[str, float]) -> None:
            logger.log("rl", step, metrics)
            bar.update(step, {"reward/mean": metrics.get("train/reward")})

        finished = trainer.fit(on_log, on_checkpoint, stop_at)
    if not finished:
        save_state()
        logger.close()
        return None
    t2 = time.perf_counter()
    result = trainer.evaluate()
    state["eval_seconds"] = time.perf_counter() - t2
    save_state(training=False)
    logger.log("rl", trainer.steps, result)
    summary = {
        "name": cfg.name,
        "problem": c.problem,
        "n": c.n,
        "policy": c.policy,
        "loss": c.loss,
        "seed": cfg.seed,
        "steps": trainer.steps,
        "instances": trainer.steps * c.batch_size,
        **{k.split("/", 1)[1]: round(v, 4) for k, v in result.items()},
        "ref_cost": round(float(test.ref_cost.mean()), 4),
        "ref_solver": test.solver,
        "test_instances": test.instances.size,
        "train_seconds": round(state["train_seconds"], 3),
        "train_cpu_seconds": round(state["train_cpu_seconds"], 3),
        "eval_seconds": round(state["eval_seconds"], 3),
        "wall_seconds": round(state["wall_seconds"], 3),
        "threads": torch.get_num_threads(),
    }
    write_text_atomic(run_dir / "summary.json", json.dumps(summary, indent=2))
    plot_panels(logger.path, run_dir / "curves.png", PANELS, "rl", "gradient steps")
    logger.finish(run_dir, summary, [])
    logger.close()
    gaps = ", ".join(f"{m} {summary['gap_' + m]:.2f}%" for m in c.eval_modes)
    console.print(f"{c.problem}{c.n} {c.loss}: gap {gaps}; summary in {run_dir / 'summary.json'}")
    return summary
