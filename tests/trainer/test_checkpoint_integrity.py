"""Checkpoint manifests: a truncated or corrupted checkpoint is detected and resume falls back to the one before
with a warning; a full disk while checkpointing leaves the previous checkpoint intact and says so."""

from __future__ import annotations

import errno
import json
import logging

import pytest
import torch

from ascent.app.pipeline import train
from ascent.config import load_config
from ascent.policy.model import Policy
from ascent.policy.tokenizer import char_tokenizer
from ascent.trainer import checkpoint as ckpt_mod
from ascent.trainer.checkpoint import Checkpointer, CheckpointError, load_weights, verify_folder
from tests.conftest import tiny_qwen
from tests.trainer.test_resume import TINY


@pytest.fixture()
def two(tmp_path):
    tok = char_tokenizer("0123456789+= ")
    policy = Policy(model=tiny_qwen(tok, seed=1), tokenizer=tok)
    ck = Checkpointer(tmp_path / "checkpoints", keep=3)
    first = ck.save(1, policy, {"step": 1})
    with torch.no_grad():
        next(policy.model.parameters()).add_(1.0)
    second = ck.save(2, policy, {"step": 2})
    return ck, first, second, policy


def test_manifest_lists_every_file_with_its_checksum(two):
    ck, first, second, _ = two
    files = json.loads((second / "manifest.json").read_text())["files"]
    assert {"model.safetensors", "trainer_state.pt", "config.json"} <= set(files)
    assert all(len(m["sha256"]) == 64 and m["bytes"] > 0 for m in files.values())
    assert verify_folder(second) is None and ck.latest() == second


def test_truncated_checkpoint_falls_back_with_a_warning(two, caplog):
    ck, first, second, _ = two
    weights = second / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:100])
    assert "truncated" in verify_folder(second)
    with caplog.at_level(logging.WARNING):
        assert ck.latest() == first
    assert "step_000002 is damaged" in caplog.text and "truncated" in caplog.text


def test_flipped_byte_is_detected(two, caplog):
    ck, first, second, _ = two
    state = second / "trainer_state.pt"
    data = bytearray(state.read_bytes())
    data[len(data) // 2] ^= 0xFF
    state.write_bytes(bytes(data))
    assert "checksum" in verify_folder(second)
    with caplog.at_level(logging.WARNING):
        assert ck.latest() == first
    for path in (first, second):  # nothing whole left: a clear error, not a silent restart from scratch
        (path / "model.safetensors").write_bytes(b"")
    with pytest.raises(CheckpointError, match="no whole checkpoint"):
        ck.latest()


def test_full_disk_keeps_the_previous_checkpoint(two, monkeypatch):
    ck, first, second, policy = two
    real_save = torch.save

    def disk_full(obj, path, *a, **k):
        with open(path, "wb") as fh:
            fh.write(b"partial")
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(ckpt_mod.torch, "save", disk_full)
    with pytest.raises(
        CheckpointError,
        match=r"step 3 \(no space left on its disk, \d+ bytes free\); the previous checkpoint .*step_000002 is intact",
    ):
        ck.save(3, policy, {"step": 3})
    monkeypatch.setattr(ckpt_mod.torch, "save", real_save)
    assert ck.latest() == second and verify_folder(second) is None
    assert not any(p.name.startswith(".tmp-") for p in ck.root.iterdir()), "the half-written folder is removed"
    assert not (ck.root / "step_000003").exists()
    load_weights(policy.model, second)  # still loads


def test_resume_after_corruption_continues_from_the_previous_checkpoint(tmp_path, caplog):
    over = TINY + [f"output_dir={tmp_path}", "train.checkpoint_every=1", "name=c"]
    cfg = load_config("default", over)
    assert train(cfg, stop_at=3) is None
    run_dir = tmp_path / "c"
    newest = Checkpointer(run_dir / "checkpoints").latest()
    assert newest.name == "step_000003"
    (newest / "model.safetensors").write_bytes(b"garbage")
    with caplog.at_level(logging.WARNING):
        summary = train(run_dir=run_dir, resume=True)
    assert "step_000003 is damaged" in caplog.text and summary["steps"] == 4
    rl = [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines() if '"phase": "rl"' in x]
    assert [r["step"] for r in rl] == [1, 2, 3, 4]  # step 3 redone once, not duplicated
    assert verify_folder(Checkpointer(run_dir / "checkpoints").latest()) is None
