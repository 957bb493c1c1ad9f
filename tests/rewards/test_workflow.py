"""FlowReasoner's workflow DSL and execution reward (`workflow_exec`) and the `workflow` task."""

from __future__ import annotations

import random

import pytest

from ascent.config.schema import DataConfig
from ascent.rewards import resolve_reward
from ascent.rewards.workflow import WorkflowReward, execute, noisy_add, parse_workflow
from ascent.tasks import load_task
from ascent.tasks.workflow import carries


def test_parse_accepts_the_dsl_and_rejects_the_rest():
    assert parse_workflow("solve") == ["solve"]
    assert parse_workflow("split > check") == ["split", "check"]
    assert parse_workflow("solve>check>check") == ["solve", "check", "check"]
    for bad in ["", "check", "solve>", "vote", "solve>check>check>check", "solvecheck", ">solve"]:
        assert parse_workflow(bad) is None, bad
    assert parse_workflow("solve>check>check>check", max_ops=4) == ["solve", "check", "check", "check"]


def test_worker_and_operators_by_hand():
    assert noisy_add(58, 67, 1.0, random.Random(0)) == 15  # both carries dropped: 5+6 -> 1, 8+7 -> 5
    assert noisy_add(999, 1, 0.0, random.Random(0)) == 1000
    assert execute(["split"], 958, 67, 1.0, random.Random(0)) == (1025, 3)  # one call per column, exact
    assert execute(["solve", "check"], 58, 67, 1.0, random.Random(0)) == (15, 2)  # a check that agrees: 1 call
    assert execute(["solve", "check"], 12, 34, 0.3, random.Random(0)) == (46, 2)  # no carry: nothing to drop


def test_reward_formula_by_hand():
    r = WorkflowReward(drop=0.0)
    got = r(
        ["x"] * 5, ["solve", "split", "solve>check", "vote", "split"], a=[58, 958, 58, 58, 5], b=[67, 67, 67, 67, 4]
    )
    assert got == pytest.approx([1 - 0.02 - 0.05, 1 - 0.02 - 0.15, 1 - 0.04 - 0.10, -0.5, 1 - 0.02 - 0.05])
    wrong = WorkflowReward(drop=1.0)(["x"], ["solve"], a=[58], b=[67])
    assert wrong == pytest.approx([0 - 0.02 - 0.05])
    assert WorkflowReward()(["x"], ["solve"]) == [None]  # no operands: no opinion


def test_check_repairs_a_dropped_carry_at_the_exact_rate():
    """17+25 has one carry, dropped w.p. 0.3: solve is right w.p. 0.7; solve>check (verify, re-solve and take the
    majority on disagreement) w.p. 0.7·(0.7 + 0.3·0.7) + 0.3·0.7·0.7 = 0.784 (worked out by hand)."""
    rng, n = random.Random(1), 20000
    solve = sum(execute(["solve"], 17, 25, 0.3, rng)[0] == 42 for _ in range(n)) / n
    check = sum(execute(["solve", "check"], 17, 25, 0.3, rng)[0] == 42 for _ in range(n)) / n
    assert solve == pytest.approx(0.7, abs=0.015)
    assert check == pytest.approx(0.784, abs=0.015)


def test_seeded_draws_and_state_round_trip():
    args = (["q"] * 64, ["solve"] * 64)
    kw = {"a": [5678] * 64, "b": [4567] * 64}
    one, two = WorkflowReward(seed=3), WorkflowReward(seed=3)
    assert one(*args, **kw) == two(*args, **kw)
    later = one(*args, **kw)
    resumed = WorkflowReward(seed=3)
    resumed.load_state_dict(two.state_dict())
    assert resumed(*args, **kw) == later
    assert len(set(later)) == 2  # a hard query: the worker is sometimes right, sometimes not
    assert resolve_reward("workflow_exec(drop=0.5,cost_weight=0.1)").params.cost_weight == 0.1


def test_bad_params_say_what_to_change():
    with pytest.raises(ValueError, match="drop"):
        WorkflowReward(drop=1.5)
    with pytest.raises(ValueError, match="teacher_workflows"):
        load_task(DataConfig(task="workflow(teacher_workflows=[vote])", num_eval=10), 0)


def test_task_rows_difficulty_and_teacher():
    data = load_task(DataConfig(task="workflow(num_rows=600)", num_eval=100), 0)
    assert len(data.eval) == 100 and len(data.train) <= 500
    assert not {r["prompt"] for r in data.eval} & {r["prompt"] for r in data.train}
    for r in data.eval + data.train:
        assert (carries(r["a"], r["b"]) > 0) == r["hard"] and len(str(r["a"])) == r["digits"]
        assert r["answer"] == str(r["a"] + r["b"])
    hard = sum(r["hard"] for r in data.train) / len(data.train)
    assert 0.4 < hard < 0.6
    rng = random.Random(0)
    taught = {data.teacher(data.train[0], rng) for _ in range(60)}
    assert taught == {"solve", "split", "solve>check"}
    ids = data.tokenizer("58+67=solve>check", add_special_tokens=False)["input_ids"]
    assert len(ids) == 9  # operator names are one token each


def test_hardness_is_visible_in_the_query():
    data = load_task(DataConfig(task="workflow(num_rows=400)", num_eval=50), 1)
    for r in data.train:
        assert r["hard"] == any(ch in "56789" for ch in r["prompt"][:-1])


def test_informed_teacher_writes_the_best_workflow():
    data = load_task(DataConfig(task="workflow(num_rows=200,teacher_best=1.0)", num_eval=20), 0)
    rng = random.Random(0)
    assert all(data.teacher(r, rng) == ("split" if r["hard"] else "solve") for r in data.train)
