"""Atomic checkpoints in Hugging Face format plus the trainer state.

A checkpoint is written to a temporary folder and renamed into place; the `latest` pointer is replaced
atomically after that. A run killed at any moment leaves the previous checkpoint intact.
"""

from __future__ import annotations

import os
import random
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import torch
from safetensors.torch import load_file


def write_text_atomic(path: Path, text: str) -> None:
    """Write a file through a temporary sibling and os.replace."""
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    with open(tmp, "w") as fh:
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


def save_folder_atomic(final: Path, write) -> Path:
    """Call `write(tmp_dir)`, then move tmp_dir to `final` (replacing an older one)."""
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = final.with_name(f".tmp-{final.name}-{os.getpid()}")
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir()
    write(tmp)
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

        path = save_folder_atomic(self.root / f"step_{step:06d}", write)
        write_text_atomic(self.root / "latest", path.name)
        self._prune()
        return path

    def _prune(self) -> None:
        done = sorted(p for p in self.root.glob("step_*") if p.is_dir())
        for old in done[: -self.keep]:
            shutil.rmtree(old)

    def latest(self) -> Path | None:
        """The newest complete checkpoint, or None."""
        pointer = self.root / "latest"
        if not pointer.exists():
            return None
        path = self.root / pointer.read_text().strip()
        return path if (path / "trainer_state.pt").exists() else None

    @staticmethod
    def load_state(path: Path) -> dict[str, Any]:
        return torch.load(path / "trainer_state.pt", weights_only=False)


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
