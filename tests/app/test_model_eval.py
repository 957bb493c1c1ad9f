"""`ascent eval` beyond run directories (ascent.app.model_eval): an exported run evaluated as a plain Hugging Face
folder gives the run's own final evaluation exactly (greedy strict and lenient accuracy, completion length,
pass@k), on its task or another, with a breakdown by a row field, a table and a JSON file."""

from __future__ import annotations

import json

import pytest
import torch

from ascent.app.model_eval import model_overrides
from ascent.app.pipeline import train
from ascent.app.runs import RunDirError
from ascent.cli import main
from ascent.config import load_config
from tests.conftest import TINY

RUN = TINY + [
    "name=evalme",
    "model.hidden_size=64",
    "model.intermediate_size=128",
    "data.task=addition(digits=1, teacher_carry_drop=0)",
    "data.num_eval=24",
    "model.lora.enabled=true",
    "model.lora.alpha=8",
    "model.lora.target_modules=[q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj]",
    "warmstart.steps=300",  # the adapters learn to add about half the sums: answers differ from row to row
    "warmstart.batch_size=32",
    "warmstart.eval_every=0",
    "warmstart.optim.lr=1e-2",
    "train.steps=2",
    "train.prompts_per_step=4",
    "rollout.samples_per_prompt=4",
    "train.optim.lr=3e-4",
    "eval.pass_k=4",
    "eval.lenient=last_number",
    "eval.batch_size=10",
    "eval.by=a",  # the run's own breakdown by the first operand, in summary.json
]


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    root = tmp_path_factory.mktemp("model_eval")
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        summary = train(load_config("default", RUN + [f"output_dir={root}"]))
    finally:
        torch.set_num_threads(before)
    assert main(["export", str(root / "evalme"), str(root / "hf")]) == 0
    return root / "evalme", root / "hf", summary


def test_eval_of_an_exported_folder_reproduces_the_runs_final_evaluation(exported, tmp_path, capsys, one_thread):
    run_dir, folder, summary = exported
    capsys.readouterr()
    out = tmp_path / "eval.json"
    args = ["eval", str(folder), "--recipe", str(run_dir / "config.yaml"), "--out", str(out), "--by", "a"]
    assert main(args) == 0
    printed = json.loads(capsys.readouterr().out)
    assert json.loads(out.read_text()) == printed
    assert printed["model"] == str(folder.resolve()) and printed["rows"] == 24
    for key in ("accuracy", "completion_len", "pass@1", "pass@4"):
        assert printed[key] == summary[f"{key}_after_rl"], key
    assert printed["accuracy_lenient"] == summary["accuracy_after_rl_lenient"]
    assert 0 < printed["accuracy"] < 1 and printed["pass@4"] > printed["pass@1"]  # not a vacuous comparison
    groups = printed["by_a"]
    assert sum(g["n"] for g in groups.values()) == 24 and set(groups) <= {str(a) for a in range(10)}
    assert sum(g["n"] * g["accuracy"] for g in groups.values()) == pytest.approx(24 * printed["accuracy"])
    for a, group in groups.items():  # eval.by=a: the run's summary holds the same breakdown (before and after RL)
        assert summary[f"accuracy_a_{a}_after_rl"] == group["accuracy"], a
        assert summary[f"accuracy_lenient_a_{a}_after_rl"] == group["accuracy_lenient"], a
        assert f"accuracy_a_{a}_before_rl" in summary  # (TINY runs no control)
    assert not any(k.startswith("accuracy_a_") for k in summary if k[len("accuracy_a_") :].split("_")[0] not in groups)


def test_the_same_folder_on_another_task_and_as_a_run(exported, capsys, one_thread):
    run_dir, folder, summary = exported
    capsys.readouterr()
    task = "addition(digits=1, teacher_carry_drop=0.0)"
    assert main(["eval", str(folder), "--task", task, "data.num_eval=24", "eval.pass_k=0"]) == 0
    on_task = json.loads(capsys.readouterr().out)
    assert on_task["task"] == task and on_task["accuracy"] == summary["accuracy_after_rl"]
    assert "pass@1" not in on_task and "accuracy_lenient" not in on_task  # addition has no lenient grader
    assert main(["eval", str(run_dir), "--task", "addition(digits=2)", "data.num_eval=30", "eval.pass_k=0"]) == 0
    other = json.loads(capsys.readouterr().out)
    assert other["rows"] == 30 and other["checkpoint"].endswith("step_000002")
    assert main(["eval", str(run_dir), "--recipe", "default"]) == 2
    assert "is evaluated with its own config.yaml; --recipe is for a model folder" in capsys.readouterr().err


def test_what_is_no_model_is_a_clear_error(tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    assert main(["eval", str(tmp_path / "empty")]) == 2
    assert "nor a Hugging Face model folder (no config.json)" in capsys.readouterr().err
    with pytest.raises(RunDirError, match="neither a run directory"):
        model_overrides(tmp_path / "empty", None)
    assert main(["eval", "--task", "addition", "--by", "nope", "data.num_eval=4", "eval.pass_k=0", *TINY]) == 2
    assert "--by nope: the task's held-out rows have no field 'nope'" in capsys.readouterr().err
    assert main(["train", *TINY, "eval.by=nope", f"output_dir={tmp_path}", "name=byno"]) == 2  # before any training
    assert "eval.by nope: the task's held-out rows have no field 'nope'" in capsys.readouterr().err
    assert not (tmp_path / "byno" / "checkpoints").exists()
