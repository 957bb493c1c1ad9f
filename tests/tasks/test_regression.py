"""The numeric-regression task (`ascent.tasks.regression`, `sum_regression`) and its `closeness` grader: the rows'
values, the imbalance, the teacher's shrinkage toward the mean, and the reward by hand."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from ascent.config.schema import DataConfig
from ascent.rewards import REWARDS
from ascent.rewards.builtin import closeness
from ascent.tasks import DataError, load_task
from ascent.tasks.regression import row, shrink_teacher, tenths


def test_rows_are_real_valued_sums_with_a_rare_tail():
    task = load_task(DataConfig(task="sum_regression", num_eval=200, num_train=2000), seed=0)
    assert len(task.train) == 2000 and len(task.eval) == 200
    assert task.reward == "closeness"
    held = {r["prompt"] for r in task.eval}
    assert len(held) == 200 and not held & {r["prompt"] for r in task.train}  # distinct, never trained on
    for r in task.train[:300] + task.eval:
        a, b = r["a"], r["b"]
        assert r["prompt"] == f"{a // 10}.{a % 10}+{b // 10}.{b % 10}="
        assert float(r["answer"]) == pytest.approx(a / 10 + b / 10)
        assert r["part"] == ("tail" if a + b > 78 else "head")
    parts = Counter(r["part"] for r in task.train)
    assert 0.1 < parts["tail"] / 2000 < 0.35  # the minority (tail=0.2)
    none = load_task(DataConfig(task="sum_regression(tail=0)", num_eval=50, num_train=500), seed=0)
    assert all(r["part"] == "head" and max(r["a"], r["b"]) <= 39 for r in none.train + none.eval)


def test_task_is_deterministic_and_checks_its_size():
    cfg = DataConfig(task="sum_regression", num_eval=50, num_train=300)
    assert load_task(cfg, seed=1).train == load_task(cfg, seed=1).train
    with pytest.raises(DataError, match="distinct problems"):
        load_task(DataConfig(task="sum_regression(tail=0)", num_eval=600), seed=0)
    with pytest.raises(ValueError, match="teacher_shrink"):
        load_task(DataConfig(task="sum_regression(teacher_shrink=2)", num_eval=10), seed=0)


def test_teacher_shrinks_toward_the_mean_by_hand():
    r = row(70, 80)  # 7.0 + 8.0 = 15.0
    assert r["answer"] == "15.0" and r["part"] == "tail"
    always = shrink_teacher(mean=50.0, shrink=0.5, rate=1.0)
    assert always(r, random.Random(0)) == "10.0"  # 5.0 + 0.5 (15.0 - 5.0)
    assert always(row(20, 10), random.Random(0)) == "4.0"  # 3.0 pulled up toward 5.0
    assert shrink_teacher(50.0, 0.5, 0.0)(r, random.Random(0)) == "15.0"
    half = shrink_teacher(50.0, 0.5, 0.5)
    rng = random.Random(0)
    outs = Counter(half(r, rng) for _ in range(2000))
    assert set(outs) == {"10.0", "15.0"} and 900 < outs["10.0"] < 1100
    assert tenths(7) == "0.7" and tenths(198) == "19.8"


def test_closeness_by_hand():
    out = closeness(["p"] * 5, ["6.8", "it is 7.3", "x", "26.8", "1"], ["6.8", "6.8", "6.8", "6.8", None])
    assert out == [1.0, 0.95, 0.0, 0.0, None]  # exact, 0.5 off of 10, no number, beyond the scale, no answer
    assert closeness(["p"], ["5"], ["6.8"], scale=2) == [pytest.approx(0.1)]
    assert closeness(["p"], ["5"]) == [None]
    with pytest.raises(ValueError, match="scale"):
        closeness(["p"], ["5"], ["6.8"], scale=0)
    assert REWARDS.entry("closeness") is not None
