"""Exact resume: 2N steps == N steps + resume + N steps, parameters bitwise equal on CPU."""

from __future__ import annotations

import json

import pytest
import torch
from safetensors.torch import load_file

from ascent.app.pipeline import train
from ascent.config import load_config
from ascent.trainer.checkpoint import Checkpointer

TINY = [
    "model.hidden_size=32",
    "model.num_layers=2",
    "model.num_heads=2",
    "model.num_kv_heads=1",
    "model.intermediate_size=64",
    "data.task=addition(digits=1)",
    "data.num_eval=20",
    "warmstart.steps=3",
    "warmstart.batch_size=8",
    "warmstart.eval_every=0",
    "train.steps=4",
    "train.prompts_per_step=4",
    "rollout.samples_per_prompt=4",
    "train.eval_every=0",
    "train.checkpoint_every=0",
    "train.micro_batch_size=6",
    "train.optim.lr=1e-3",
    "train.optim.schedule=cosine",
    "algorithm.ppo_epochs=2",
    "algorithm.mini_batches=2",
    "algorithm.kl_coef=0.05",
    "eval.pass_k=2",
    "control.enabled=false",
    "logging.progress=false",
]


def final_weights(run_dir):
    return load_file(Checkpointer(run_dir / "checkpoints").latest() / "model.safetensors")


def rl_lines(run_dir):
    return [
        json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines() if '"phase": "rl"' in line
    ]


@pytest.mark.parametrize(
    "extra",
    [
        [],
        ["algorithm.advantage=gae"],
        ["algorithm.loss=a_star_po(k=2)"],
        ["data.sampler=pass_rate", "data.num_train=6"],
        ["data.sampler=coba", "data.num_train=6"],
        ["data.sampler=env_adapt(share=0.5)", "data.num_train=6"],
        ["rollout.explorer=prefix(threshold=0)", "data.num_train=6"],
        ["rollout.explorer=param_noise", "algorithm.tis_cap=2"],
        ["rollout.explorer=branch"],
    ],
    ids=[
        "grpo",
        "gae_critic",
        "a_star_po_v_star",
        "sampler_pass_rate",
        "sampler_coba",
        "sampler_env_adapt",
        "explorer_prefix",
        "explorer_param_noise",
        "explorer_branch",
    ],
)
def test_resume_is_bitwise_exact(tmp_path, extra):
    cfg = load_config("default", TINY + extra + [f"output_dir={tmp_path}"])
    full = train(cfg.__class__(**{**cfg.__dict__, "name": "full"}))
    assert full is not None and full["steps"] == 4
    split_cfg = cfg.__class__(**{**cfg.__dict__, "name": "split"})
    assert train(split_cfg, stop_at=2) is None  # stopped half-way, checkpoint written
    assert Checkpointer(tmp_path / "split" / "checkpoints").latest().name == "step_000002"
    resumed = train(run_dir=tmp_path / "split", resume=True)
    assert resumed["steps"] == 4
    a, b = final_weights(tmp_path / "full"), final_weights(tmp_path / "split")
    assert a.keys() == b.keys()
    for key in a:
        assert torch.equal(a[key], b[key]), key
    full_rl, split_rl = rl_lines(tmp_path / "full"), rl_lines(tmp_path / "split")
    assert [r["step"] for r in split_rl] == [1, 2, 3, 4]
    for x, y in zip(full_rl, split_rl):
        assert x["reward/mean"] == y["reward/mean"] and x["loss/policy"] == y["loss/policy"]
    assert full["accuracy_after_rl"] == resumed["accuracy_after_rl"]
    states = [
        Checkpointer.load_state(Checkpointer(tmp_path / name / "checkpoints").latest()) for name in ("full", "split")
    ]
    if any(e.startswith("data.sampler=") for e in extra):  # per-row estimates, epoch order, draw count: restored
        assert states[0]["sampler"] == states[1]["sampler"]
    if "algorithm.advantage=gae" in extra:  # the critic was checkpointed and restored exactly
        critics = [s["pieces"]["advantage"]["model"] for s in states]
        assert critics[0].keys() == critics[1].keys() and all(
            torch.equal(critics[0][k], critics[1][k]) for k in critics[0]
        )
    if "algorithm.loss=a_star_po(k=2)" in extra:  # V* is part of the state: the resumed run reused it
        v_stars = [s["pieces"]["loss"]["v_star"] for s in states]
        assert v_stars[0] is not None and torch.equal(v_stars[0], v_stars[1])


def test_checkpoint_is_atomic_and_pruned(tmp_path, tiny_policy):
    ckpt = Checkpointer(tmp_path, keep=2)
    for step in (1, 2, 3):
        ckpt.save(step, tiny_policy, {"step": step})
    assert sorted(p.name for p in tmp_path.iterdir() if p.is_dir()) == ["step_000002", "step_000003"]
    assert ckpt.latest().name == "step_000003"
    # a half-written checkpoint (killed mid-save) is never what `latest` points to
    (tmp_path / ".tmp-step_000004-999").mkdir()
    assert ckpt.latest().name == "step_000003"
    assert Checkpointer.load_state(ckpt.latest())["step"] == 3


def test_skipping_the_before_evaluation_changes_nothing_else(tmp_path):
    """eval.before=false leaves out accuracy_before_rl and nothing else: the RL phase draws the same samples and
    ends with bitwise the same weights and held-out results (the evaluation takes no randomness from training)."""
    cfg = load_config("default", TINY + [f"output_dir={tmp_path}", "warmstart.steps=0"])
    with_before = train(cfg.__class__(**{**cfg.__dict__, "name": "with"}))
    skip = load_config("default", TINY + [f"output_dir={tmp_path}", "warmstart.steps=0", "eval.before=false"])
    without = train(skip.__class__(**{**skip.__dict__, "name": "without"}))
    assert "accuracy_before_rl" in with_before and "accuracy_before_rl" not in without
    assert {k for k in with_before if not k.endswith("before_rl")} == set(without)
    a, b = final_weights(tmp_path / "with"), final_weights(tmp_path / "without")
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert with_before["accuracy_after_rl"] == without["accuracy_after_rl"]


def test_a_run_killed_in_its_control_keeps_its_rl_evaluation_and_its_wall_time(tmp_path, monkeypatch):
    """Killed after RL, inside the control: the resumed run does not evaluate the RL policy again, its summary
    equals an uninterrupted run's, and `wall_seconds` counts the first process's seconds too."""
    import ascent.app.pipeline as pipeline

    cfg = load_config("default", TINY + [f"output_dir={tmp_path}", "control.enabled=true", "control.kind=rft"])
    full = train(cfg.__class__(**{**cfg.__dict__, "name": "full"}))
    real_control, real_evaluate = pipeline.control_phase, pipeline.evaluate

    def killed(run, resume):
        raise KeyboardInterrupt

    monkeypatch.setattr(pipeline, "control_phase", killed)
    with pytest.raises(KeyboardInterrupt):
        train(cfg.__class__(**{**cfg.__dict__, "name": "killed"}))
    state = json.loads((tmp_path / "killed" / "state.json").read_text())
    assert state["after"]["accuracy"] == full["accuracy_after_rl"] and state["wall_seconds"] > 0
    calls = []
    monkeypatch.setattr(pipeline, "control_phase", real_control)
    monkeypatch.setattr(pipeline, "evaluate", lambda *a, **k: calls.append(1) or real_evaluate(*a, **k))
    resumed = train(run_dir=tmp_path / "killed", resume=True)
    assert len(calls) == 1  # the control's own final evaluation; before and after RL were kept

    def results(summary):  # everything but the name, times and memory
        return {k: v for k, v in summary.items() if k != "name" and "seconds" not in k and "rss" not in k}

    assert results(resumed) == results(full) and "accuracy_control" in full
    assert resumed["wall_seconds"] > state["wall_seconds"]
