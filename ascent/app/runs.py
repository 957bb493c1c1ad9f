"""Run directories: open one for a new or resumed run, and resolve what `ascent eval` and `--resume` are given.

A run directory holds config.yaml, state.json, metrics.jsonl, warmstart/ and checkpoints/step_N/ (see
`ascent.app.pipeline`); where the model of a run lives is the trainer's knowledge
(`ascent.trainer.checkpoint.resolve_model_folder`).
"""

from __future__ import annotations

import os
import shutil
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator, Optional

import yaml

from ascent.config.loader import config_from_dict, merge, parse_overrides, to_dict, yaml_problem
from ascent.config.schema import RunConfig
from ascent.logging.sinks import MlflowSink, WandbSink
from ascent.trainer.checkpoint import resolve_model_folder, write_text_atomic


class RunDirError(ValueError):
    """The run directory cannot be used as asked."""


RUN_MARKER = ".ascent-run"
"""The file that marks a folder as made by ascent (a run, a comparison, an export): `--overwrite` deletes
nothing without it."""


def make_private_dir(folder: Path, kind: str) -> None:
    """Create `folder` (parents as needed) readable by its owner only (0700: a run's samples.jsonl holds the
    hidden tests of code tasks) and mark it as ascent's."""
    folder.mkdir(parents=True, exist_ok=True)
    folder.chmod(0o700)
    if not (folder / RUN_MARKER).exists():
        write_text_atomic(folder / RUN_MARKER, f"{kind}\n")


def remove_marked_dir(folder: Path, what: str) -> None:
    """`shutil.rmtree(folder)` for --overwrite, only if ascent made it (RUN_MARKER) and it is no symlink."""
    if folder.is_symlink():
        raise RunDirError(f"{folder} is a symbolic link; --overwrite replaces only folders ascent made")
    if not (folder / RUN_MARKER).is_file():
        raise RunDirError(
            f"{folder} does not look like {what} made by ascent (no {RUN_MARKER} file); --overwrite deletes only "
            "those: remove it yourself if you mean to, or choose another name"
        )
    shutil.rmtree(folder)


def _earlier_run(run_dir: Path) -> bool:
    """A run made before runs were marked: its config.yaml and state.json are there and the config's `name` is
    the folder's own (what `name=.` or `name=..` made is not: there the folder is runs/ or the project)."""
    try:
        raw = yaml.safe_load((run_dir / "config.yaml").read_text())
    except (OSError, yaml.YAMLError, UnicodeDecodeError):
        return False
    return (run_dir / "state.json").is_file() and isinstance(raw, dict) and raw.get("name") == run_dir.name


def find_config(target: Path) -> tuple[Path, Path]:
    """(run dir, model folder) for what `ascent eval` is given: a run directory or a checkpoint folder inside one."""
    return resolve_model_folder(Path(target))


def run_config_has(run_dir: Path, section: str) -> bool:
    """Whether a run directory's config.yaml has a top-level `section` (read without building the config); a damaged
    config.yaml answers False and `read_run_config` then says what is wrong."""
    path = Path(run_dir) / "config.yaml"
    try:
        raw = yaml.safe_load(path.read_text()) if path.exists() else None
    except (yaml.YAMLError, UnicodeDecodeError):
        return False
    return isinstance(raw, dict) and raw.get(section) is not None


def read_run_config(run_dir: Path, overrides: Optional[list[str]] = None) -> RunConfig:
    """The config.yaml of a run directory, with key=value overrides applied; a damaged one fails in one line."""
    path = run_dir / "config.yaml"
    try:
        raw = yaml.safe_load(path.read_text())
    except yaml.YAMLError as err:
        raise RunDirError(f"{path} is not valid YAML{yaml_problem(err)}") from None
    except UnicodeDecodeError as err:
        raise RunDirError(f"{path} is not UTF-8 text ({err.reason} at byte {err.start})") from None
    if not isinstance(raw, dict):
        raise RunDirError(f"{path} must be a mapping of config keys, got {type(raw).__name__}")
    return config_from_dict(merge(raw, parse_overrides(overrides or [])))


_LOCKS: dict[str, int] = {}
"""Run directories this process holds, by resolved path -> the open descriptor that carries the lock."""


def lock_run_dir(run_dir: Path) -> None:
    """Hold an exclusive advisory lock (flock) on the run directory itself until `release_run_dir` or the process
    ends (the kernel drops it then, also after a crash or SIGKILL): a second `ascent train` on the same folder is
    refused before it writes anything. No lock file is left behind."""
    import fcntl

    key = str(run_dir.resolve())
    fd = os.open(run_dir, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        raise RunDirError(
            f"{run_dir} is in use by another running `ascent train`; wait for it to end, or choose another name=..."
        ) from None
    _LOCKS[key] = fd


def release_run_dir(run_dir: Path) -> None:
    """Let go of a run directory locked by `lock_run_dir` (no-op when not held)."""
    fd = _LOCKS.pop(str(Path(run_dir).resolve()), None)
    if fd is not None:
        os.close(fd)


def make_run_dir(run_dir: Path) -> bool:
    """Create the run directory (and its parents); True when it did not exist. An output folder that is a file,
    read-only or otherwise unusable fails in one line naming it."""
    existed = run_dir.is_dir()
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
        if not os.access(run_dir, os.W_OK | os.X_OK):
            raise PermissionError(13, "Permission denied")
    except OSError as err:
        blocked = next((p for p in [run_dir, *run_dir.parents] if p.exists() and not p.is_dir()), None)
        why = f"{blocked} is a file, not a folder" if blocked is not None else (err.strerror or str(err))
        raise RunDirError(f"cannot write the run folder {run_dir}: {why} (set output_dir=... or name=...)") from None
    return not existed


def open_run(
    cfg: RunConfig | None, run_dir: Path | None, overwrite: bool, resume: bool, overrides: Optional[list[str]] = None
) -> RunConfig:
    """Check the run directory and lock it for this process (`lock_run_dir`; the caller releases it); on resume
    read its config.yaml (with overrides applied). A folder holds a run from its config.yaml on."""
    if resume:
        if not (run_dir / "config.yaml").exists():
            raise RunDirError(
                f"{run_dir} is not a run directory (no config.yaml); start a run with `ascent train RECIPE`"
            )
        lock_run_dir(run_dir)
        try:
            return read_run_config(run_dir, overrides)
        except BaseException:
            release_run_dir(run_dir)
            raise
    if run_dir.is_symlink():
        raise RunDirError(f"{run_dir} is a symbolic link; a run directory must be a folder of its own")
    if run_dir.name in ("", ".", ".."):  # given directly: output_dir/name was checked with the config
        raise RunDirError(f"{run_dir} cannot be a run directory: name a folder of its own")
    make_run_dir(run_dir)
    lock_run_dir(run_dir)
    try:
        marked = (run_dir / RUN_MARKER).is_file()
        if (run_dir / "state.json").exists() or (run_dir / "config.yaml").exists():
            if not overwrite:
                raise RunDirError(
                    f"{run_dir} already holds a run: continue it with `ascent train --resume {run_dir}`, "
                    "start over with --overwrite, or choose another name=..."
                )
            if not marked and not _earlier_run(run_dir):
                raise RunDirError(
                    f"{run_dir} does not look like a run made by ascent (no {RUN_MARKER} file); --overwrite deletes "
                    "only those: remove it yourself if you mean to, or choose another name=..."
                )
            clear_run_dir(run_dir)
        elif not marked and any(run_dir.iterdir()):
            raise RunDirError(
                f"{run_dir} holds files that are no ascent run; choose another name=... or output_dir=..."
            )
        make_private_dir(run_dir, "run")
        write_text_atomic(run_dir / "config.yaml", yaml.safe_dump(to_dict(cfg), sort_keys=False))
    except BaseException:
        release_run_dir(run_dir)
        raise
    return cfg


@contextmanager
def opened_run(
    cfg: RunConfig | None, run_dir: Path, overwrite: bool, resume: bool, overrides: Optional[list[str]] = None
) -> Iterator[RunConfig]:
    """`open_run` for the length of a `with` block: the directory stays locked until the block ends, and a new
    run that fails before it trained anything leaves the folder as it found it (`discard_failed_start`)."""
    created = not run_dir.exists()
    before = set(os.listdir(run_dir)) if run_dir.is_dir() else set()
    cfg = open_run(cfg, run_dir, overwrite, resume, overrides)
    keep = {name for name in before if (run_dir / name).exists()} - {"config.yaml"}  # not what --overwrite cleared
    try:
        yield cfg
    except BaseException:
        if not resume:
            discard_failed_start(run_dir, created, keep)
        raise
    finally:
        release_run_dir(run_dir)


def clear_run_dir(run_dir: Path) -> None:
    """Remove what a run directory holds, keeping the directory itself (and so the lock on it)."""
    for child in run_dir.iterdir():
        if child.is_dir() and not child.is_symlink():
            shutil.rmtree(child)
        else:
            child.unlink()


def discard_failed_start(run_dir: Path, created: bool, keep: frozenset[str] | set[str] = frozenset()) -> bool:
    """A start that failed before anything was trained leaves nothing behind: the folder goes when this start
    created it; otherwise what the start wrote goes and the entries in `keep` (there before it, e.g. the log that
    `ascent compare` writes beside a run) stay. A run with a state.json or logged steps is kept for --resume.
    Returns whether it was discarded."""
    metrics = run_dir / "metrics.jsonl"
    if not run_dir.is_dir() or (run_dir / "state.json").exists() or (metrics.exists() and metrics.stat().st_size):
        return False
    if created:
        shutil.rmtree(run_dir, ignore_errors=True)
        return True
    for child in run_dir.iterdir():
        if child.name in keep:
            continue
        if child.is_dir() and not child.is_symlink():
            shutil.rmtree(child)
        else:
            child.unlink()
    return True


def trackers(cfg: RunConfig, run_dir: Path) -> list[Any]:
    """The experiment trackers `logging.wandb` / `logging.mlflow` ask for."""
    lg, out = cfg.logging, []
    config = to_dict(cfg)
    if lg.wandb:
        out.append(WandbSink(run_dir, cfg.name, config, lg.wandb_project, lg.wandb_mode))
    if lg.mlflow:
        out.append(MlflowSink(run_dir, cfg.name, config, lg.mlflow_uri, lg.mlflow_experiment))
    return out
