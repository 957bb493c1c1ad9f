"""Run directories: open one for a new or resumed run, and resolve what `ascent eval` and `--resume` are given.

A run directory holds config.yaml, state.json, metrics.jsonl, warmstart/ and checkpoints/step_N/ (see
`ascent.app.pipeline`); where the model of a run lives is the trainer's knowledge
(`ascent.trainer.checkpoint.resolve_model_folder`).
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any, Optional

import yaml

from ascent.config.loader import config_from_dict, merge, parse_overrides, to_dict
from ascent.config.schema import RunConfig
from ascent.logging.sinks import MlflowSink, WandbSink
from ascent.trainer.checkpoint import resolve_model_folder, write_text_atomic


class RunDirError(ValueError):
    """The run directory cannot be used as asked."""


def find_config(target: Path) -> tuple[Path, Path]:
    """(run dir, model folder) for what `ascent eval` is given: a run directory or a checkpoint folder inside one."""
    return resolve_model_folder(Path(target))


def read_run_config(run_dir: Path, overrides: Optional[list[str]] = None) -> RunConfig:
    """The config.yaml of a run directory, with key=value overrides applied."""
    return config_from_dict(
        merge(yaml.safe_load((run_dir / "config.yaml").read_text()), parse_overrides(overrides or []))
    )


def open_run(
    cfg: RunConfig | None, run_dir: Path | None, overwrite: bool, resume: bool, overrides: Optional[list[str]] = None
) -> RunConfig:
    """Check the run directory; on resume read its config.yaml (with overrides applied)."""
    if resume:
        if not (run_dir / "config.yaml").exists():
            raise RunDirError(
                f"{run_dir} is not a run directory (no config.yaml); start a run with `ascent train RECIPE`"
            )
        return read_run_config(run_dir, overrides)
    if (run_dir / "state.json").exists():
        if not overwrite:
            raise RunDirError(
                f"{run_dir} already holds a run: continue it with `ascent train --resume {run_dir}`, "
                "start over with --overwrite, or choose another name=..."
            )
        shutil.rmtree(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    write_text_atomic(run_dir / "config.yaml", yaml.safe_dump(to_dict(cfg), sort_keys=False))
    return cfg


def trackers(cfg: RunConfig, run_dir: Path) -> list[Any]:
    """The experiment trackers `logging.wandb` / `logging.mlflow` ask for."""
    lg, out = cfg.logging, []
    config = to_dict(cfg)
    if lg.wandb:
        out.append(WandbSink(run_dir, cfg.name, config, lg.wandb_project, lg.wandb_mode))
    if lg.mlflow:
        out.append(MlflowSink(run_dir, cfg.name, config, lg.mlflow_uri, lg.mlflow_experiment))
    return out
