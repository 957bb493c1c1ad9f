"""What a run writes stays readable and keeps the answers hidden, whatever the data holds (the security probe's
findings 6 and 7): no bare NaN/Infinity in the report pages or JSON files, no hidden tests or reference
solutions in samples.jsonl unless asked, invalid UTF-8 and NaN in a JSONL file as a one-line error naming file
and line, prompts longer than the model's context left out with a count."""

from __future__ import annotations

import json
import math
import re

import pytest
import torch

from ascent.app.report import write_comparison_report, write_report
from ascent.cli import main
from ascent.policy.tokenizer import char_tokenizer
from ascent.rewards.runner import RewardResult
from ascent.rollout.types import RolloutBatch
from ascent.tasks import DataError
from ascent.tasks.base import TaskData, fit_to_context
from ascent.tasks.jsonl import read_jsonl
from ascent.trainer.samples import SampleLogger, StepSamples, read_samples


def strict(text: str):
    """json.loads that refuses NaN/Infinity, as a browser's JSON.parse does."""

    def refuse(name):
        raise ValueError(f"{name} is not JSON")

    return json.loads(text, parse_constant=refuse)


def step_record(fields: list[dict]) -> StepSamples:
    n, t = len(fields), 3
    batch = RolloutBatch(
        input_ids=torch.zeros(n, t, dtype=torch.long),
        attention_mask=torch.ones(n, t, dtype=torch.long),
        completion_mask=torch.ones(n, t),
        sampled_logprobs=torch.zeros(n, t),
        group_index=torch.arange(n),
        finished=torch.ones(n, dtype=torch.bool),
        prompts=["p"] * n,
        completions=["c"] * n,
        fields=fields,
    )
    rewards = torch.ones(n)
    scores = RewardResult(rewards=rewards, valid=torch.ones(n, dtype=torch.bool), components=rewards[:, None])
    return StepSamples(batch, scores, torch.zeros(n, t))


CODE_ROW = {
    "entry_point": "add",
    "tests": [{"args": [1, 2], "expected": 3}],
    "solution": "def add(a, b):\n    return a + b\n",
    "difficulty": math.nan,
}


def test_samples_leave_out_hidden_tests_unless_asked_and_never_write_nan(tmp_path):
    SampleLogger(tmp_path, 1, 4, 50.0, ["code_tests"]).log("rl", 1, step_record([dict(CODE_ROW)]))
    line = (tmp_path / "samples.jsonl").read_text()
    row = strict(line)
    assert row["fields"] == {"entry_point": "add", "difficulty": None} and row["hidden_fields"] == ["solution", "tests"]
    assert "expected" not in line and "return a + b" not in line
    asked = tmp_path / "asked"
    asked.mkdir()
    SampleLogger(asked, 1, 4, 50.0, ["code_tests"], hidden=True).log("rl", 1, step_record([dict(CODE_ROW)]))
    assert read_samples(asked)[0]["fields"]["tests"] == CODE_ROW["tests"]


def page_data(html: str):
    found = re.search(r'<script id="report-data" type="application/json">(.*?)</script>', html, re.S)
    return strict(found.group(1).replace("\\u003c", "<"))


def test_one_nan_does_not_blank_the_report_or_the_comparison_page(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (run / "summary.json").write_text('{"accuracy_after_rl": NaN, "loss": Infinity, "steps": 2}')
    (run / "metrics.jsonl").write_text('{"phase": "rl", "step": 1, "loss": NaN}\n')
    (run / "samples.jsonl").write_text(
        json.dumps({"phase": "rl", "step": 1, "prompt": "p", "completion": "c", "fields": {"d": math.nan}}) + "\n"
    )
    data = page_data(write_report(run).read_text())
    assert data["summary"]["accuracy_after_rl"] is None and data["summary"]["steps"] == 2
    root = tmp_path / "cmp"
    root.mkdir()
    page = write_comparison_report(root, {"variants": [{"variant": "a", "seeds": [0]}]})  # no accuracy_after_rl
    page_data(page.read_text())


def test_jsonl_with_invalid_utf8_or_nan_names_file_and_line(tmp_path):
    bad = tmp_path / "train.jsonl"
    bad.write_bytes(b'{"prompt": "1+1=", "answer": "2"}\n{"prompt": "caf\xe9", "answer": "x"}\n')
    with pytest.raises(DataError, match=r"train.jsonl:2: not UTF-8 text \(invalid continuation byte"):
        read_jsonl(bad)
    bad.write_text('{"prompt": "1+1=", "answer": "2", "difficulty": NaN}\n')
    with pytest.raises(DataError, match=r"train.jsonl:1: NaN is not a JSON value"):
        read_jsonl(bad)
    bad.write_bytes(b'{"prompt": "a\xe2\x80\xa8b", "answer": "2"}\n')  # U+2028 inside a string is one line
    assert read_jsonl(bad)[0]["prompt"] == "a\u2028b"


def test_prompts_longer_than_the_context_are_left_out_with_a_count():
    tok = char_tokenizer("abcdefghijklmnopqrstuvwxyz+=0123456789 ")

    def encode(text):
        return tok(text)["input_ids"]

    rows = [{"prompt": "1+1=", "answer": "2"}, {"prompt": "x" * 605, "answer": "?"}]
    task = TaskData(train=rows, eval=rows[:1], reward="exact_answer")
    kept, note = fit_to_context(task, encode, positions=256, max_new_tokens=16)
    assert kept.train == rows[:1] and kept.eval == rows[:1]
    assert note.startswith("prompts longer than the model's context left out: 1 of 2 training and 0 of 1 held-out")
    assert fit_to_context(kept, encode, positions=256, max_new_tokens=16) == (kept, None)
    with pytest.raises(DataError, match="no held-out prompt fits"):
        fit_to_context(TaskData(train=rows, eval=rows[1:], reward="exact_answer"), encode, 256, 16)


def test_a_run_says_how_many_prompts_did_not_fit(tmp_path, capsys):
    rows = [{"prompt": f"{a}+{a}=", "answer": str(2 * a)} for a in range(6)] + [{"prompt": "1+" * 300, "answer": "1"}]
    (tmp_path / "t.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    args = [
        "train",
        f"output_dir={tmp_path}",
        f"data.train={tmp_path / 't.jsonl'}",
        f"data.eval={tmp_path / 't.jsonl'}",
    ]
    args += ["warmstart.steps=0", "train.steps=1", "train.prompts_per_step=2", "rollout.samples_per_prompt=2"]
    args += ["eval.before=false", "control.enabled=false", "logging.progress=false", "model.hidden_size=32"]
    args += ["model.num_layers=1", "model.num_heads=2", "model.num_kv_heads=1", "model.intermediate_size=64"]
    assert main(args) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "left out: 1 of 7 training and 1 of 7 held-out" in out
    strict((tmp_path / "default" / "summary.json").read_text())
