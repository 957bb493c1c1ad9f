"""Resuming or evaluating a run folder runs no code from it: a trainer_state.pt or an environment snapshot whose
pickle calls `os.system` (with a valid checksum manifest, as anyone who writes the folder can make) is refused
with a clear error, and the command never runs (the security probe's finding 3)."""

from __future__ import annotations

import os
import pickle
from pathlib import Path

import gymnasium as gym
import pytest
import torch

from ascent.classic.envs import env_state, set_env_state
from ascent.cli import main
from ascent.trainer.checkpoint import (
    Checkpointer,
    CheckpointError,
    save_folder_atomic,
    write_manifest,
    write_text_atomic,
)

TINY = [
    "model.hidden_size=32",
    "model.num_layers=2",
    "model.num_heads=2",
    "model.num_kv_heads=1",
    "model.intermediate_size=64",
    "data.task=addition(digits=1)",
    "data.num_eval=4",
    "warmstart.steps=0",
    "train.steps=2",
    "train.prompts_per_step=2",
    "rollout.samples_per_prompt=2",
    "train.eval_every=0",
    "train.checkpoint_every=1",
    "eval.before=false",
    "control.enabled=false",
    "logging.progress=false",
]


class Evil:
    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"echo code-ran-on-load > {self.marker}",))


def test_a_crafted_trainer_state_is_refused_and_runs_nothing(tmp_path):
    marker = tmp_path / "marker"
    root = tmp_path / "evilrun" / "checkpoints"

    def write(tmp: Path) -> None:
        torch.save({"trainer": Evil(marker)}, tmp / "trainer_state.pt")
        (tmp / "model.safetensors").write_bytes(b"")

    write_text_atomic(root / "latest", save_folder_atomic(root / "step_000001", write).name)
    latest = Checkpointer(root).latest()  # the manifest is valid: it detects damage, not tampering
    with pytest.raises(CheckpointError, match=r"holds objects ascent does not save .*posix.system.*refused"):
        Checkpointer.load_state(latest)
    assert not marker.exists()


def test_resume_of_a_tampered_run_stops_with_one_line(tmp_path, capsys):
    from ascent.app.pipeline import train
    from ascent.config import load_config

    assert train(load_config("default", [*TINY, f"output_dir={tmp_path}", "name=r"]), stop_at=1) is None
    latest = Checkpointer(tmp_path / "r" / "checkpoints").latest()
    state = torch.load(latest / "trainer_state.pt", weights_only=False)
    marker = tmp_path / "marker"
    state["evil"] = Evil(marker)
    torch.save(state, latest / "trainer_state.pt")
    (latest / "manifest.json").unlink()
    write_manifest(latest)
    assert main(["train", "--resume", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("ascent: error:") and "refused: nothing in it was run" in err[-1]
    assert not marker.exists()


def test_an_environment_snapshot_may_hold_environments_only(tmp_path):
    env = gym.make("CartPole-v1")
    env.reset(seed=0)
    back = set_env_state(None, env_state(env))  # a real snapshot reads back
    assert type(back.unwrapped).__name__ == "CartPoleEnv"
    marker = tmp_path / "marker"
    with pytest.raises(pickle.UnpicklingError, match="may not use posix.system"):
        set_env_state(None, {"pickle": pickle.dumps(Evil(marker))})
    assert not marker.exists()
