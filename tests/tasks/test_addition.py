"""The addition task (`ascent.tasks.addition`): its train/held-out split, its parameters, and its teacher's
one systematic mistake."""

from __future__ import annotations

import random

import pytest

from ascent.config.schema import DataConfig
from ascent.tasks import DataError, load_task
from ascent.tasks.addition import AdditionParams, addition_teacher


# ---------------------------------------------------------------------------------------------------------
# the addition task and its teacher
# ---------------------------------------------------------------------------------------------------------
def test_addition_task_split_and_answers():
    task = load_task(DataConfig(task="addition(digits=2)", num_eval=200), seed=0)
    assert len(task.eval) == 200
    assert len(task.train) == 90 * 90 - 200  # every 2-digit pair, minus the held-out ones
    train_prompts = {r["prompt"] for r in task.train}
    eval_prompts = {r["prompt"] for r in task.eval}
    assert len(eval_prompts) == 200 and len(train_prompts) == len(task.train)  # no duplicates
    assert not train_prompts & eval_prompts
    for row in task.train[:500] + task.eval:
        a, b = int(row["a"]), int(row["b"])
        assert 10 <= a <= 99 and 10 <= b <= 99
        assert row["prompt"] == f"{a}+{b}="
        assert row["answer"] == str(a + b)
    assert task.reward == "exact_answer"


def test_addition_task_num_train_and_determinism():
    cfg = DataConfig(task="addition(digits=2)", num_eval=50, num_train=300)
    a, b = load_task(cfg, seed=1), load_task(cfg, seed=1)
    assert len(a.train) == 300 and len(a.eval) == 50
    assert a.train == b.train and a.eval == b.eval
    c = load_task(cfg, seed=2)
    assert [r["prompt"] for r in c.eval] != [r["prompt"] for r in a.eval]


def test_addition_task_num_eval_too_large():
    with pytest.raises(DataError, match="num_eval"):
        load_task(DataConfig(task="addition(digits=1)", num_eval=100), seed=0)


def test_unknown_task_lists_names():
    with pytest.raises(KeyError, match="addition"):
        load_task(DataConfig(task="multiplication"), seed=0)


def carries(a: int, b: int) -> bool:
    return (a % 10) + (b % 10) >= 10


def test_teacher_never_wrong_without_ones_carry():
    teach = addition_teacher(0.6)
    rng = random.Random(0)
    for a in range(10, 100):
        for b in range(10, 100, 7):
            if not carries(a, b):
                assert teach({"a": a, "b": b}, rng) == str(a + b)


def test_teacher_drops_carry_at_its_rate():
    teach = addition_teacher(0.6)
    pick = random.Random(1)
    rng = random.Random(2)
    wrong = 0
    draws = 2000
    for _ in range(draws):
        while True:
            a, b = pick.randrange(10, 100), pick.randrange(10, 100)
            if carries(a, b):
                break
        out = int(teach({"a": a, "b": b}, rng))
        assert out in (a + b, a + b - 10)  # when wrong, wrong by exactly -10
        wrong += out == a + b - 10
    # binomial std at p=0.6, n=2000: 0.011; 0.05 is > 4 sigma
    assert wrong / draws == pytest.approx(0.6, abs=0.05)


def test_teacher_without_mistakes():
    teach = addition_teacher(0.0)
    rng = random.Random(0)
    for a, b in [(17, 25), (99, 99), (55, 55), (10, 10), (19, 81)]:
        assert teach({"a": a, "b": b}, rng) == str(a + b)
    always = addition_teacher(1.0)
    assert always({"a": 17, "b": 25}, rng) == "32"  # the documented mistake: 17+25 -> 32
    assert always({"a": 12, "b": 25}, rng) == "37"


def test_column_teacher_drops_each_columns_carry_at_its_rate():
    from ascent.tasks.addition import column_teacher

    rng = random.Random(0)
    exact = column_teacher([0.0, 0.0])
    assert [exact({"a": a, "b": b}, rng) for a, b in [(999, 999), (58, 67), (100, 200)]] == ["1998", "125", "300"]
    teach = column_teacher([0.6, 0.97])
    counts = {}
    for _ in range(4000):
        out = teach({"a": 58, "b": 67}, rng)
        counts[out] = counts.get(out, 0) + 1
    assert set(counts) == {"125", "115", "25", "15"}  # 58+67: ones carry and tens carry, each kept or dropped
    ones_kept = (counts["125"] + counts["25"]) / 4000  # the tens digit says whether the ones carry was kept
    tens_kept = (counts["125"] + counts["115"]) / 4000
    assert abs(ones_kept - 0.4) < 0.03 and abs(tens_kept - 0.03) < 0.01
    assert teach({"a": 321, "b": 456}, rng) == "777"  # no carry: never wrong
    assert column_teacher([1.0])({"a": 17, "b": 25}, rng) == addition_teacher(1.0)({"a": 17, "b": 25}, rng) == "32"


def test_column_drop_checks_its_length_and_range():
    with pytest.raises(ValueError, match="column_drop"):
        AdditionParams(digits=2, column_drop=[0.1, 0.2, 0.3])
    with pytest.raises(ValueError, match="column_drop"):
        AdditionParams(digits=3, column_drop=[1.5])


def test_referee_rows_recast_sums_as_judging_tasks_with_the_teachers_blind_spot():
    """URPO's judging rows: `a+b=c?` -> `1` iff c = a + b, half of them wrong (the dropped carry where there is
    one); sums lose their `answer` under open_ended; the teacher judges with its own buggy arithmetic."""
    task = load_task(DataConfig(task="addition(referee_rows=0.5, open_ended=true)", num_eval=100), seed=0)
    judging = [r for r in task.train if r["prompt"].endswith("?")]
    sums = [r for r in task.train if not r["prompt"].endswith("?")]
    assert len(judging) == 4073 and len(sums) == 3927  # 8000 training rows, each a judging row with p = 0.5
    assert all(r["answer"] == ("1" if r["candidate"] == r["a"] + r["b"] else "0") for r in judging)
    assert sum(r["answer"] == "1" for r in judging) == 2002
    assert all("answer" not in r and r["gold"] == str(r["a"] + r["b"]) for r in sums)
    assert all(r["answer"] == str(r["a"] + r["b"]) and "?" not in r["prompt"] for r in task.eval)
    assert "?" in task.tokenizer.get_vocab() and "?" not in load_task(DataConfig(), seed=0).tokenizer.get_vocab()
    dropped = next(r for r in judging if r["answer"] == "0" and carries(r["a"], r["b"]))
    assert dropped["candidate"] == r_sum(dropped) - 10  # the teacher's own mistake, shown to the referee
    rng = random.Random(0)
    verdicts = [task.teacher(dropped, rng) for _ in range(1000)]  # it drops the carry 60% of the time: says 1
    assert verdicts.count("1") == 597
    assert task.teacher({"prompt": "11+22=33?", "a": 11, "b": 22, "candidate": 33}, rng) == "1"
    with pytest.raises(ValueError, match="referee_rows"):
        AdditionParams(referee_rows=1.0)


def r_sum(row: dict) -> int:
    return int(row["a"]) + int(row["b"])
