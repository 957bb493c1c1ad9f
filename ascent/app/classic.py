"""A classic online deep-RL run (a recipe with a `classic:` section): train, checkpoint, resume, evaluate, summarise.

Same run directory as a language-model run: config.yaml, state.json, metrics.jsonl (phase "rl", step = environment
steps), optional TensorBoard / W&B / MLflow, checkpoints/step_N/ (model.safetensors with every network,
trainer_state.pt with optimizers, environments, normalisers, generators and replay buffer; atomic, with
manifests), curves.png and summary.json:

    final_return       mean undiscounted return of classic.eval_episodes deterministic episodes after training
    final_return_std   their standard deviation
    final_returns      each episode's return
    env_steps          environment steps trained (PPO rounds total_steps up to whole rollouts); 0 for an offline
                       algorithm, which never steps the training environments
    gradient_steps     an offline algorithm's gradient steps (only for one: `classic.total_steps` counts them)
    train_seconds      wall seconds of the training loop (environment steps, updates, checkpoints)
    train_cpu_seconds  CPU seconds of this process in the training loop (less sensitive to a loaded machine)
    eval_seconds       wall seconds of the final evaluation
    wall_seconds       wall seconds of the whole command (setup, training, evaluation), summed over resumes
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

from ascent.app.runs import RunDirError, opened_run, read_run_config, run_config_has, trackers
from ascent.classic.loop import ClassicTrainer
from ascent.config.loader import to_dict
from ascent.config.schema import RunConfig
from ascent.logging import jsonsafe
from ascent.logging.metrics import MetricsLogger, console
from ascent.logging.plots import plot_panels
from ascent.logging.progress import progress_bar
from ascent.trainer.checkpoint import Checkpointer, rng_state, set_rng_state, write_text_atomic

PANELS = (
    ("episode/return", "training episode return"),
    ("eval/return", "evaluation return (deterministic)"),
    ("episode/length", "training episode length"),
    ("time/fps", "environment steps per second"),
    ("loss/policy", "policy loss"),
    ("loss/value", "value / Q loss"),
    ("loss/entropy", "entropy (PPO) / temperature alpha (SAC)"),
    ("train/lr", "learning rate"),
    ("train/clip", "clip range (PPO)"),
    ("train/epsilon", "exploration epsilon (DQN)"),
    ("loss/grad_norm", "gradient norm (PPO)"),
)


def is_classic_run(run_dir: Path) -> bool:
    """Whether a run directory's config.yaml describes a classic run (read without building the config)."""
    return run_config_has(run_dir, "classic")


def train_run(
    cfg: Optional[RunConfig] = None,
    run_dir: Optional[Path] = None,
    resume: bool = False,
    overwrite: bool = False,
    stop_at: Optional[int] = None,
    overrides: Optional[list[str]] = None,
) -> Optional[dict[str, Any]]:
    """`ascent.app.pipeline.train` for a classic run, without importing the language-model stack: open (or
    reopen, with `resume`) the run directory, then `train_classic`."""
    run_dir = Path(run_dir) if run_dir is not None else Path(cfg.output_dir) / cfg.name
    with opened_run(cfg, run_dir, overwrite, resume, overrides) as cfg:
        if cfg.classic is None:
            raise RunDirError(f"{run_dir} is not a classic run (its config has no classic: section)")
        return train_classic(cfg, run_dir, resume, stop_at, trackers(cfg, run_dir))


def evaluate_checkpoint(run_dir: Path, model_dir: Path, overrides: Optional[list[str]] = None) -> dict[str, Any]:
    """`ascent eval` of a classic run: the checkpoint's networks and observation statistics, then
    classic.eval_episodes deterministic episodes (overrides such as classic.eval_episodes=50 apply)."""
    cfg = read_run_config(run_dir, overrides)
    torch.set_num_threads(cfg.threads or 1)
    trainer = ClassicTrainer(cfg.classic, cfg.seed)
    trainer.weights.load(model_dir)
    trainer.load_state_dict(Checkpointer.load_state(model_dir)["trainer"])
    returns = trainer.evaluate(cfg.classic.eval_episodes)
    return {
        "checkpoint": str(model_dir),
        **step_counts(trainer),
        "return_mean": float(np.mean(returns)),
        "return_std": float(np.std(returns)),
        "returns": returns,
    }


def train_classic(
    cfg: RunConfig, run_dir: Path, resume: bool, stop_at: Optional[int], sinks: Sequence[Any] = ()
) -> Optional[dict[str, Any]]:
    """Train `cfg.classic` in `run_dir` (opened by the pipeline); the summary, or None when stopped at `stop_at`
    environment steps. `sinks`: experiment trackers (`ascent.logging.sinks`)."""
    c = cfg.classic
    torch.set_num_threads(cfg.threads or 1)  # tiny MLPs: one thread is the fastest
    state_path = run_dir / "state.json"
    state = json.loads(state_path.read_text()) if resume and state_path.exists() else {}
    t0, wall_before, train_before = time.perf_counter(), state.get("wall_seconds", 0.0), state.get("train_seconds", 0.0)
    cpu_before = state.get("train_cpu_seconds", 0.0)
    random.seed(cfg.seed), np.random.seed(cfg.seed), torch.manual_seed(cfg.seed)
    trainer = ClassicTrainer(c, cfg.seed)
    print_header(cfg, trainer)
    logger = MetricsLogger(run_dir, cfg.logging.tensorboard, sinks)
    ckpt = Checkpointer(run_dir / "checkpoints", c.keep_checkpoints)
    latest = ckpt.latest() if resume else None
    if latest is not None:
        trainer.weights.load(latest)
        saved = Checkpointer.load_state(latest)
        trainer.load_state_dict(saved["trainer"])
        set_rng_state(saved["rng"])
        console.print(f"resumed from {latest} ({trainer.steps} {step_unit(trainer)})")
    logger.truncate_after("rl", trainer.steps)
    t1, c1 = time.perf_counter(), time.process_time()

    def save_state(training: bool = True) -> None:
        if training:  # the training clocks stop at the last checkpoint; evaluation has its own
            state["train_seconds"] = train_before + time.perf_counter() - t1
            state["train_cpu_seconds"] = cpu_before + time.process_time() - c1
        state["wall_seconds"] = wall_before + time.perf_counter() - t0
        write_text_atomic(state_path, jsonsafe.dumps(state, indent=2))

    def on_checkpoint(step: int) -> None:
        ckpt.save(step, trainer.weights, {"trainer": trainer.state_dict(), "rng": rng_state()})
        save_state()

    with progress_bar("rl", c.total_steps, cfg.logging.progress, trainer.steps) as bar:

        def on_log(step: int, metrics: dict[str, float]) -> None:
            logger.log("rl", step, metrics)
            bar.update(step, {"reward/mean": metrics.get("episode/return")})

        finished = trainer.fit(on_log, on_checkpoint, stop_at)
    if not finished:
        save_state()
        logger.close()
        return None
    t2 = time.perf_counter()
    returns = trainer.evaluate(c.eval_episodes)
    state["eval_seconds"] = time.perf_counter() - t2
    save_state(training=False)
    return finish(cfg, run_dir, trainer, returns, state, logger)


def finish(
    cfg: RunConfig, run_dir: Path, trainer: ClassicTrainer, returns: list[float], state: dict, logger: MetricsLogger
) -> dict[str, Any]:
    """summary.json (keys: the module docstring), the final evaluation in metrics.jsonl, curves.png."""
    c = cfg.classic
    logger.log("rl", trainer.steps, {"eval/return": float(np.mean(returns))})
    summary = {
        "name": cfg.name,
        "env": c.env,
        "algorithm": c.algorithm,
        "seed": cfg.seed,
        **step_counts(trainer),
        "episodes": trainer.episodes + len(trainer.envs.finished),
        "final_return": float(np.mean(returns)),
        "final_return_std": float(np.std(returns)),
        "final_returns": [float(r) for r in returns],
        "train_seconds": round(state["train_seconds"], 3),
        "train_cpu_seconds": round(state["train_cpu_seconds"], 3),
        "eval_seconds": round(state["eval_seconds"], 3),
        "wall_seconds": round(state["wall_seconds"], 3),
        "threads": torch.get_num_threads(),
    }
    write_text_atomic(run_dir / "summary.json", jsonsafe.dumps(summary, indent=2))
    plot_panels(logger.path, run_dir / "curves.png", PANELS, "rl", step_unit(trainer))
    logger.finish(run_dir, summary, [])
    logger.close()
    console.print(
        f"{c.env} {c.algorithm}: final return {summary['final_return']:.1f} ± {summary['final_return_std']:.1f} "
        f"over {len(returns)} deterministic episodes; {trainer.steps} {step_unit(trainer)} "
        f"in {summary['train_seconds']:.1f}s "
        f"(wall {summary['wall_seconds']:.1f}s); summary in {run_dir / 'summary.json'}"
    )
    return summary


def step_unit(trainer: ClassicTrainer) -> str:
    """What the trainer's steps count: environment steps, or gradient steps for an offline algorithm."""
    return getattr(trainer.algo, "step_unit", "environment steps")


def step_counts(trainer: ClassicTrainer) -> dict[str, int]:
    """The summary's step fields: `env_steps`, and `gradient_steps` for an offline algorithm (env_steps 0)."""
    if step_unit(trainer) == "gradient steps":
        return {"env_steps": 0, "gradient_steps": trainer.steps}
    return {"env_steps": trainer.steps}


def print_header(cfg: RunConfig, trainer: ClassicTrainer) -> None:
    c = cfg.classic
    console.print(f"[bold]ascent[/bold] classic run [cyan]{cfg.output_dir}/{cfg.name}[/cyan] (seed {cfg.seed})")
    console.print(yaml.safe_dump({"classic": to_dict(c)}, sort_keys=False).rstrip())
    params = sum(p.numel() for m in trainer.weights.modules.values() for p in m.parameters())
    iterations = -(-c.total_steps // trainer.algo.steps_per_iteration)
    console.print(
        f"{c.env}: {c.num_envs} env(s), observation {trainer.envs.obs_dim}, "
        f"{'discrete ' + str(trainer.envs.n_actions) if trainer.envs.discrete else 'continuous'} actions; "
        f"{iterations} iterations of {trainer.algo.steps_per_iteration} {step_unit(trainer)}; {params:,} parameters; "
        f"{torch.get_num_threads()} torch thread(s)"
    )
