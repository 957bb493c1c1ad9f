"""RPG (Huang et al. 2023, arXiv:2307.10710): an interrupted run resumed from its checkpoint ends exactly where the
uninterrupted one does (its own file: two short training runs)."""

from __future__ import annotations

import pytest
import torch


def test_resume_is_exact(tmp_path):
    """N steps in one go and N/2 + resume give the same weights and evaluation returns (replay, counts, latent,
    optimizers and generators all checkpointed)."""
    pytest.importorskip("gymnasium")
    from safetensors.torch import load_file

    from ascent.app.pipeline import train
    from ascent.config import load_config
    from ascent.trainer.checkpoint import Checkpointer

    common = ["classic.env=ascent/DecoyPoint-v0", "classic.total_steps=120", "logging.progress=false"]
    common += ["classic.algorithm=rpg(learning_starts=40,hidden=[16,16],batch_size=16,state_dim=8)"]
    common += ["classic.eval_episodes=2", f"output_dir={tmp_path}"]
    whole = train(load_config("halfcheetah-sac", [*common, "name=whole"]))
    assert train(load_config("halfcheetah-sac", [*common, "name=split"]), stop_at=75) is None
    split = train(run_dir=tmp_path / "split", resume=True)
    assert split["final_returns"] == whole["final_returns"]
    a, b = (
        load_file(str(Checkpointer(tmp_path / n / "checkpoints").latest() / "model.safetensors"))
        for n in ("whole", "split")
    )
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
