"""Atomic, verified checkpoints in Hugging Face format plus the trainer state.

A checkpoint is written to a temporary folder, its files flushed to disk, a `manifest.json` with every
file's size and SHA-256 added, and the folder renamed into place; the `latest` pointer is replaced
atomically after that. A run killed at any moment leaves the previous checkpoint intact; a write that fails
(a full disk) removes its temporary folder and says which checkpoint is still there. On resume,
`Checkpointer.latest` checks the manifest and falls back, with a warning, to the newest checkpoint that is
whole when the newest one was truncated or corrupted afterwards.
"""

from __future__ import annotations

import errno
import hashlib
import json
import logging
import os
import pickle
import random
import shutil
from pathlib import Path
from typing import Any, Optional

import numpy as np
import torch
from safetensors.torch import load_file

log = logging.getLogger(__name__)
MANIFEST = "manifest.json"


def state_globals() -> list[Any]:
    """The non-builtin types a trainer state may hold: numpy arrays and dtypes (numpy's RNG state, replay
    buffers); everything else in it is tensors, containers, numbers, strings and bytes."""
    core = getattr(np, "_core", None) or np.core  # numpy 2 / numpy 1
    dtypes = {type(np.dtype(code)) for code in "?bBhHiIlLqQefdgFDGSUVO"}
    return [np.ndarray, np.dtype, core.multiarray._reconstruct, core.multiarray.scalar, *dtypes]


class CheckpointError(RuntimeError):
    """A checkpoint could not be written (the previous one is intact) or none that is whole remains."""


def write_text_atomic(path: Path, text: str) -> None:
    """Write a file through a temporary sibling and os.replace."""
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.write(text)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def rng_state() -> dict[str, Any]:
    """Global RNG states (python, numpy, torch)."""
    return {"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state()}


def set_rng_state(state: dict[str, Any]) -> None:
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def write_manifest(folder: Path) -> None:
    """Flush every file of `folder` to disk and record its size and SHA-256 in folder/manifest.json."""
    files = {}
    for path in sorted(p for p in folder.rglob("*") if p.is_file() and p.name != MANIFEST):
        with open(path, "rb") as fh:
            os.fsync(fh.fileno())
        files[str(path.relative_to(folder))] = {"bytes": path.stat().st_size, "sha256": _sha256(path)}
    write_text_atomic(folder / MANIFEST, json.dumps({"files": files}, indent=1))


def verify_folder(folder: Path) -> Optional[str]:
    """None when every file the manifest lists is there with its size and checksum; else what is wrong.
    A folder without a manifest (written before manifests existed) is taken as it is."""
    manifest = folder / MANIFEST
    if not manifest.exists():
        return None
    try:
        files = json.loads(manifest.read_text())["files"]
    except (ValueError, KeyError) as exc:
        return f"unreadable {MANIFEST} ({exc})"
    for name, meta in files.items():
        path = folder / name
        if not path.exists():
            return f"{name} is missing"
        if path.stat().st_size != meta["bytes"]:
            return f"{name} has {path.stat().st_size} bytes, the manifest says {meta['bytes']} (truncated?)"
        if _sha256(path) != meta["sha256"]:
            return f"{name} does not match its checksum (corrupted)"
    return None


def save_folder_atomic(final: Path, write) -> Path:
    """Call `write(tmp_dir)`, add the manifest, then move tmp_dir to `final` (replacing an older one). If
    writing fails (e.g. the disk is full), the temporary folder is removed and the error re-raised."""
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = final.with_name(f".tmp-{final.name}-{os.getpid()}")
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir()
    try:
        write(tmp)
        write_manifest(tmp)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    if final.exists():
        old = final.with_name(f".old-{final.name}-{os.getpid()}")
        os.rename(final, old)
        os.rename(tmp, final)
        shutil.rmtree(old)
    else:
        os.rename(tmp, final)
    return final


def load_weights(model: torch.nn.Module, folder: Path) -> None:
    """Load the weights saved by `save_pretrained` (full model or peft adapter) into `model`, exactly."""
    adapter = folder / "adapter_model.safetensors"
    if adapter.exists():
        from peft import set_peft_model_state_dict

        set_peft_model_state_dict(model, load_file(adapter))
        return
    state = load_file(folder / "model.safetensors")
    missing, unexpected = model.load_state_dict(state, strict=False)
    tied = {k for k in missing if k.endswith("lm_head.weight")}
    if set(missing) - tied or unexpected:
        raise RuntimeError(
            f"checkpoint {folder} does not fit the model: missing {sorted(set(missing) - tied)[:5]}, "
            f"unexpected {sorted(unexpected)[:5]}"
        )


class Checkpointer:
    """Numbered checkpoints under `root`, the newest named in `root/latest`, the oldest pruned."""

    def __init__(self, root: Path, keep: int = 2) -> None:
        self.root, self.keep = Path(root), max(1, keep)

    def save(self, step: int, policy, state: dict[str, Any]) -> Path:
        """Write model + tokenizer + trainer_state.pt for `step` atomically."""

        def write(tmp: Path) -> None:
            policy.save(tmp)
            torch.save(state, tmp / "trainer_state.pt")

        try:
            path = save_folder_atomic(self.root / f"step_{step:06d}", write)
            write_text_atomic(self.root / "latest", path.name)
        except (OSError, RuntimeError) as exc:
            # torch's zip writer reports a short write (a full disk) as RuntimeError "... unexpected pos N vs M"
            # or "PytorchStreamWriter failed writing"; any other RuntimeError is a bug and goes up as it is
            short_write = "unexpected pos" in str(exc) or "failed writing" in str(exc)
            if isinstance(exc, RuntimeError) and not short_write:
                raise
            kept = self.latest()
            free = shutil.disk_usage(self.root).free
            full = short_write or getattr(exc, "errno", None) in (errno.ENOSPC, errno.EDQUOT)
            why = f"no space left on its disk, {free} bytes free" if full else str(exc).strip()[:200]
            raise CheckpointError(
                f"could not write the checkpoint of step {step} ({why}); "
                + (f"the previous checkpoint {kept} is intact" if kept else "no earlier checkpoint exists")
                + "; free space, then continue with `ascent train --resume RUN_DIR`"
            ) from exc
        self._prune()
        return path

    def _prune(self) -> None:
        done = sorted(p for p in self.root.glob("step_*") if p.is_dir())
        for old in done[: -self.keep]:
            shutil.rmtree(old)

    def latest(self) -> Path | None:
        """The newest checkpoint that is whole (its manifest checks out), or None. When the one `latest`
        names is truncated or corrupted, a warning names it and an older whole one is returned instead."""
        pointer = self.root / "latest"
        if not pointer.exists():
            return None
        named = self.root / pointer.read_text().strip()
        candidates = [named] + sorted((p for p in self.root.glob("step_*") if p.is_dir() and p != named), reverse=True)
        for path in candidates:
            if path.name > named.name:  # newer than the pointer: a save that never finished
                continue
            problem = "trainer_state.pt is missing" if not (path / "trainer_state.pt").exists() else None
            problem = problem or verify_folder(path)
            if problem is None:
                return path
            log.warning("checkpoint %s is damaged: %s; trying an older one", path, problem)
        raise CheckpointError(f"no whole checkpoint under {self.root} (the newest, {named.name}, is damaged)")

    @staticmethod
    def load_state(path: Path) -> dict[str, Any]:
        """trainer_state.pt, read by torch's weights-only unpickler: tensors, containers, numbers, strings, bytes
        and the numpy arrays and dtypes of RNG states (`STATE_GLOBALS`), nothing that runs code. A file holding
        anything else (a crafted `__reduce__`) is refused with CheckpointError; nothing of it runs. The sha256
        manifest detects damage, not tampering: this is what keeps a run folder from someone else harmless."""
        file = path / "trainer_state.pt"
        try:
            with torch.serialization.safe_globals(state_globals()):
                return torch.load(file, weights_only=True)
        except pickle.UnpicklingError as err:
            why = next((ln.strip() for ln in str(err).splitlines() if "GLOBAL" in ln), str(err).splitlines()[0])
            raise CheckpointError(
                f"{file} holds objects ascent does not save ({why}); refused: nothing in it was run. "
                "Resume or evaluate only run folders you or ascent wrote"
            ) from None


def resolve_model_folder(target: Path) -> tuple[Path, Path]:
    """(run dir, model folder) for a run directory or a checkpoint folder inside one.

    A run directory (it holds config.yaml) gives its latest complete `checkpoints/step_N`, else its
    `warmstart/`; a checkpoint folder gives itself and the run directory above it.
    """
    target = Path(target)
    if (target / "config.yaml").exists():
        model = Checkpointer(target / "checkpoints").latest() or (target / "warmstart")
        if not model.exists():
            raise FileNotFoundError(f"{target} has no checkpoint yet")
        return target, model
    for parent in target.resolve().parents:
        if (parent / "config.yaml").exists():
            return parent, target
    raise FileNotFoundError(f"{target} is neither a run directory nor a checkpoint inside one (no config.yaml found)")
