"""The offline `gsm8k` task (ascent.tasks.gsm8k): the shipped files and their license, the rows (answers, step
counts as difficulty), the prompt formats and their graders, the step filter, and a staged curriculum over it."""

from __future__ import annotations

import collections
import json
import re
from pathlib import Path

import pytest

from ascent.config import load_config
from ascent.config.schema import DataConfig
from ascent.data.samplers import field_bins
from ascent.rewards.builtin import answer_is, last_number
from ascent.tasks import DataError, load_task
from ascent.tasks.gsm8k import DATA_DIR, gsm8k_rows, worked_solution

ROOT = Path(__file__).resolve().parents[2]


def test_the_files_ship_with_the_package_and_their_license():
    assert (DATA_DIR / "LICENSE").read_text().startswith("MIT License\n\nCopyright (c) 2021 OpenAI")
    line = re.search(r'^"ascent.tasks" = (\[.*\])', (ROOT / "pyproject.toml").read_text(), re.MULTILINE)
    patterns = json.loads(line.group(1))  # [tool.setuptools.package-data]
    shipped = {p.relative_to(DATA_DIR.parents[1]) for pattern in patterns for p in DATA_DIR.parents[1].glob(pattern)}
    assert {Path("data/gsm8k") / f for f in ("train.jsonl.gz", "test.jsonl.gz", "LICENSE")} <= shipped


def test_rows_match_the_papers_splits_and_step_counts():
    train, test = gsm8k_rows("train"), gsm8k_rows("test")
    assert (len(train), len(test)) == (7473, 1319)
    steps = collections.Counter(r["steps"] for r in test)
    assert (steps[1], steps[2], steps[3]) == (65, 357, 364)  # the counts the data's README gives
    assert steps[0] == 18 and max(steps) == 8
    for r in train + test:
        float(r["answer"])  # every final answer is a number, normalised
        assert "," not in r["answer"] and r["difficulty"] == r["steps"]
    assert test[0]["prompt"].startswith("Janet’s ducks lay 16 eggs") and test[0]["answer"] == "18"
    assert test[0]["prompt"].endswith('end with "The answer is <number>."')
    assert {r["source"] for r in test[:2]} == {"gsm8k/test/1", "gsm8k/test/2"}


def test_the_teacher_writes_the_worked_solution_that_both_graders_accept():
    row = gsm8k_rows("train")[0]
    demo = worked_solution(row["solution"])
    assert "<<" not in demo and "####" not in demo and demo.endswith(f"The answer is {row['answer']}.")
    assert answer_is([""], [demo], answer=[row["answer"]]) == [1.0]
    assert last_number([""], [demo], answer=[row["answer"]]) == [1.0]


@pytest.mark.parametrize(
    "fmt,reward,suffix",
    [
        ("sentence", "answer_is", '<number>."'),
        ("plain", "math_verify", "?"),
        ("step_by_step", "answer_is", '<number>."'),
    ],
)
def test_prompt_formats_and_their_graders(fmt, reward, suffix):
    task = load_task(DataConfig(task=f"gsm8k(prompt_format={fmt})", num_eval=0), seed=0)
    assert (len(task.train), len(task.eval)) == (7473, 1319)
    assert task.reward == reward and task.lenient == "last_number"
    assert task.eval[1]["prompt"].endswith(suffix)


def test_step_filter_and_row_caps():
    task = load_task(DataConfig(task="gsm8k(steps=[1, 2])", num_eval=0, num_train=100), seed=3)
    assert len(task.eval) == 65 + 357 and len(task.train) == 100
    assert {r["steps"] for r in task.train + task.eval} == {1, 2}
    assert len(load_task(DataConfig(task="gsm8k", num_eval=300), seed=0).eval) == 300
    with pytest.raises(DataError, match=r"no GSM8K problem has \[42\] calculator steps"):
        load_task(DataConfig(task="gsm8k(steps=[42])"), seed=0)
    with pytest.raises(ValueError, match="steps must be a non-empty list"):
        load_config("default", ["data.task=gsm8k(steps=[])"])


def test_the_staged_sampler_bins_gsm8k_by_its_step_count():
    rows = load_task(DataConfig(task="gsm8k", num_eval=0), seed=0).train
    bins = field_bins(rows, "difficulty", 3)
    by_bin = collections.defaultdict(set)
    for r, b in zip(rows, bins):
        by_bin[b].add(r["steps"])
    assert sorted(by_bin) == [0, 1, 2]
    assert max(by_bin[0]) <= min(by_bin[1]) and max(by_bin[1]) <= min(by_bin[2])  # easier bins hold fewer steps
