"""What a new user meets in the first hour (issue 44): silent no-ops refused or said, a resumed run that never
mixes evaluations scored by different rewards, one run per folder, failed starts that leave nothing, one-line
errors for unusable folders and damaged configs, and the results printed at the end."""

from __future__ import annotations

import json
import os

import pytest

from ascent.app.pipeline import train
from ascent.app.runs import RunDirError, open_run, read_run_config, release_run_dir
from ascent.config import ConfigError, load_config
from ascent.tasks import DataError
from ascent.trainer.rl import TrainingError

TINY = [
    "model.hidden_size=32",
    "model.num_layers=1",
    "model.num_heads=2",
    "model.num_kv_heads=1",
    "model.intermediate_size=64",
    "data.task=addition(digits=1)",
    "data.num_eval=12",
    "warmstart.steps=2",
    "warmstart.batch_size=8",
    "warmstart.eval_every=0",
    "train.steps=2",
    "train.prompts_per_step=2",
    "rollout.samples_per_prompt=2",
    "rollout.max_new_tokens=3",
    "train.eval_every=0",
    "train.checkpoint_every=0",
    "eval.pass_k=0",
    "control.enabled=false",
    "logging.progress=false",
]

GOOD_REWARD = """
def exact(prompts, completions, answer, **fields):
    return [1.0 for _ in completions]  # every completion counts: the tiny model's accuracy is 1 before RL
"""
BROKEN_REWARD = """
def exact(prompts, completions, answer, **fields):
    raise RuntimeError("a bug in my reward")
"""


def tiny(tmp_path, *extra):
    return load_config("default", TINY + [f"output_dir={tmp_path}", *extra])


@pytest.mark.parametrize("advantage", ["grpo", "dr_grpo", "rloo"])
def test_one_sample_per_prompt_with_a_group_baseline_is_refused(advantage):
    with pytest.raises(ConfigError, match=r"samples_per_prompt=1 .*nothing is trained"):
        load_config("default", ["rollout.samples_per_prompt=1", f"algorithm.advantage={advantage}"])


def test_one_sample_per_prompt_with_a_baseline_of_its_own_is_accepted():
    assert load_config("default", ["rollout.samples_per_prompt=1", "algorithm.advantage=reinforce_pp"])
    assert load_config("default", ["rollout.samples_per_prompt=1", "algorithm.loss=a_star_po"])  # regresses on r


def test_zero_rl_steps_report_no_rl_phase(tmp_path, capsys):
    summary = train(tiny(tmp_path, "train.steps=0", "name=zero"))
    assert "accuracy_before_rl" in summary
    assert "accuracy_after_rl" not in summary and "seconds_per_rl_step" not in summary
    assert "train.steps=0: no RL phase" in capsys.readouterr().out


def test_resume_after_a_reward_fix_rescores_the_evaluation_before_rl(tmp_path):
    reward = tmp_path / "my_reward.py"
    reward.write_text(BROKEN_REWARD)
    cfg = tiny(tmp_path, f"reward={reward}:exact", "name=fixed")
    with pytest.raises(TrainingError, match="reward"):
        train(cfg)
    state = json.loads((tmp_path / "fixed" / "state.json").read_text())
    assert state["before"]["accuracy"] == 0.0  # every reward of the pre-RL evaluation failed
    reward.write_text(GOOD_REWARD)  # the error's own advice: fix the reward, then --resume
    resumed = train(run_dir=tmp_path / "fixed", resume=True)
    fresh = train(tiny(tmp_path, f"reward={reward}:exact", "name=fresh"))
    assert fresh["accuracy_before_rl"] == 1.0
    assert resumed["accuracy_before_rl"] == fresh["accuracy_before_rl"]
    assert resumed["accuracy_after_rl"] == fresh["accuracy_after_rl"]


def test_a_run_folder_in_use_is_refused_before_anything_is_written(tmp_path):
    live = tiny(tmp_path, "name=shared")
    run_dir = tmp_path / "shared"
    open_run(live, run_dir, overwrite=False, resume=False)  # a live run: its config.yaml, no state.json yet
    before = (run_dir / "config.yaml").read_text()
    try:
        other = tiny(tmp_path, "name=shared", "train.steps=7")
        with pytest.raises(RunDirError, match="in use by another"):
            train(other, overwrite=True)
        with pytest.raises(RunDirError, match="in use by another"):
            train(run_dir=run_dir, resume=True)
        assert (run_dir / "config.yaml").read_text() == before
    finally:
        release_run_dir(run_dir)
    with pytest.raises(RunDirError, match="already holds a run"):  # its config.yaml makes the folder taken
        train(tiny(tmp_path, "name=shared", "train.steps=7"))


def test_a_failed_start_leaves_nothing_behind(tmp_path):
    with pytest.raises(DataError):
        train(tiny(tmp_path, "name=nodata", "data.task=jsonl", "data.train=missing.jsonl", "data.eval=missing.jsonl"))
    assert not (tmp_path / "nodata").exists()
    train(tiny(tmp_path, "name=nodata", "train.steps=1"))  # and the name is free again


def test_an_output_folder_that_is_a_file_fails_in_one_line(tmp_path):
    (tmp_path / "afile").write_text("not a folder")
    with pytest.raises(RunDirError, match=r"afile is a file, not a folder"):
        train(tiny(tmp_path / "afile" / "runs", "name=x"))


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only folders")
def test_a_read_only_output_folder_fails_in_one_line(tmp_path):
    out = tmp_path / "ro"
    out.mkdir(mode=0o555)
    with pytest.raises(RunDirError, match="cannot write the run folder"):
        train(tiny(out, "name=x"))


def test_a_damaged_config_yaml_names_the_file_and_line(tmp_path):
    (tmp_path / "config.yaml").write_text("seed: 1\ntrain: {steps: [1, 2\n")
    with pytest.raises(RunDirError, match=r"config\.yaml is not valid YAML \(line \d+, column \d+\)"):
        read_run_config(tmp_path)


def test_a_finished_run_resumed_says_complete_and_prints_its_results(tmp_path, capsys):
    summary = train(tiny(tmp_path, "name=done", "control.enabled=true", "control.kind=imitation"))
    out = capsys.readouterr().out.rstrip().splitlines()
    last = "\n".join(out[-5:])
    assert f"before RL {summary['accuracy_before_rl']:.3f}" in last and "after RL" in last and "control" in last
    assert str(tmp_path / "done" / "report.html") in last
    written = (tmp_path / "done" / "summary.json").stat().st_mtime_ns
    again = train(run_dir=tmp_path / "done", resume=True)
    assert again == summary
    assert (tmp_path / "done" / "summary.json").stat().st_mtime_ns == written
    assert "already complete" in capsys.readouterr().out
