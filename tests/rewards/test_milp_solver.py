"""The solver-verified MILP reward (ascent/rewards/milp_solver.py) and the opt_modelling task: correct models score 1,
wrong, unsafe and garbage ones 0 with the reason recorded, nothing is ever executed, integrality changes the optimum,
and the task's answers agree with HiGHS."""

from __future__ import annotations

import random

import pytest

from ascent.config.schema import DataConfig
from ascent.rewards import resolve_reward
from ascent.rewards.lp_solver import LPParseError, lp_solver
from ascent.rewards.milp_solver import MilpRewardParams, parse_milp, solve_milp, verify
from ascent.tasks import load_task
from ascent.tasks.opt_modelling import OptModellingParams, model_teacher, opt_rows

# max 5x + 4y, 6x + 4y <= 24, x + 2y <= 6: LP optimum 21 at (3, 1.5); integer optimum 20 at (4, 0)
INT_MODEL = "maximize 5x + 4y\nsubject to\n6x + 4y <= 24\nx + 2y <= 6\nint x, y"
LP_MODEL = "maximize 5x + 4y\n6x + 4y <= 24\nx + 2y <= 6"


def test_integrality_changes_the_optimum_by_hand():
    assert solve_milp(parse_milp(INT_MODEL)) == ("optimal", 20.0)
    assert solve_milp(parse_milp(LP_MODEL)) == ("optimal", 21.0)
    # binaries: max 3a + 2b + 4c, 2a + 2b + 3c <= 4 -> a, b (5) or c alone (4) or a + ... : optimum 5
    assert solve_milp(parse_milp("max 3a+2b+4c\n2a+2b+3c<=4\nbin a,b,c")) == ("optimal", 5.0)
    # without `bin`: a, b, c >= 0 continuous: 4/3 c... best ratio a (1.5 per unit): 2a = 4 -> 6
    assert solve_milp(parse_milp("max 3a+2b+4c\n2a+2b+3c<=4")) == ("optimal", 6.0)
    # minimisation with general integers and a free variable
    m = parse_milp("minimize 2x + 3y + z\nx + y >= 2.5\nz >= -1\ngeneral x y\nfree z")
    assert m.integers == {"x", "y"} and solve_milp(m) == ("optimal", 5.0)


@pytest.mark.parametrize(
    "text, answer, reward, reason",
    [
        (INT_MODEL, "20", 1.0, "ok"),
        ("Here is my model.\n```\n" + INT_MODEL + "\n```", "20", 1.0, "ok"),
        (LP_MODEL, "20", 0.0, "wrong_objective"),  # forgot the integrality: optimum 21
        ("max x + y\nx - y <= 1\nint x, y", "20", 0.0, "unbounded"),
        ("max x\nx <= 2\nx >= 3\nint x", "2", 0.0, "infeasible"),
        ("import os\nos.system('rm -rf /')\nmax x\nx <= 1", "1", 0.0, "code_rejected"),
        ("```python\nm.addVar(vtype=GRB.INTEGER)\n```", "1", 0.0, "code_rejected"),
        ("max __import__('os').getpid()\nx <= 1", "1", 0.0, "code_rejected"),
        ("the answer is 20", "20", 0.0, "unparsable"),
        ("max 5x + 4y\n6x + 4y <= 24\nint x, q", "20", 0.0, "unparsable"),  # q is not in the model
        ("max x * y\nx <= 1", "1", 0.0, "unparsable"),  # not linear
        ("max 1e12x\nx <= 1", "1", 0.0, "too_large"),
        (INT_MODEL, None, None, "no_answer"),
        (INT_MODEL, "twenty", None, "no_answer"),
    ],
)
def test_verdicts(text, answer, reward, reason):
    v = verify(text, answer)
    assert (v.reward, v.reason) == (reward, reason)


def test_prose_is_not_taken_for_code_and_garbage_never_raises():
    prose = "We return the best plan: each class of product is a variable.\n" + INT_MODEL
    assert verify(prose, "20").reason == "ok"
    for junk in ["", "\x00\x01", "max", "max +", "max 3x\n<= <= 4", "min x\nx >= 1\nbin", "max x\n" + "x<=1\n" * 200]:
        assert verify(junk, "1").reward == 0.0
    assert verify("a" * 30_000, "1").reason == "too_large"
    assert verify("max " + "+".join(f"x{i}" for i in range(60)) + "\nx0 <= 1", "1").reason == "too_large"
    with pytest.raises(LPParseError, match="declared but not in the model"):
        parse_milp("max x\nx <= 1\nbin y")


def test_registered_reward_records_reasons():
    r = resolve_reward("milp_solver(rtol=0.001)")
    out = r(["p"] * 4, [INT_MODEL, LP_MODEL, "import os", INT_MODEL], answer=["20", "20", "1", None])
    assert out == [1.0, 0.0, 0.0, None]
    assert [v.reason for v in r.last_verdicts] == ["ok", "wrong_objective", "code_rejected", "no_answer"]
    m = r.metrics()
    assert m["milp/ok_frac"] == 0.25 and m["milp/wrong_objective_frac"] == 0.25 and m["milp/code_rejected_frac"] == 0.25
    assert r(["p"], [INT_MODEL], answer=["20"]) == [1.0] and len(r.cache) == 4  # cached verdicts are reused
    with pytest.raises(ValueError, match="time_limit_s"):
        MilpRewardParams(time_limit_s=0)


def test_opt_modelling_rows_agree_with_highs_and_need_integrality():
    rows = opt_rows(40, seed=3, params=OptModellingParams())
    assert {r["kind"] for r in rows} == {"whole", "pick"} and len({r["prompt"] for r in rows}) == 40
    for r in rows:
        assert verify(r["model"], r["answer"]).reason == "ok"  # the brute-force answer is HiGHS's optimum
        relaxed = r["model"].rsplit("\n", 1)[0]
        assert verify(relaxed, r["answer"]).reason == "wrong_objective"  # dropping int/bin changes the optimum
    teach, rng = model_teacher(0.5), random.Random(0)
    dropped = sum(not teach(r, rng).endswith(("int x,y", "bin a,b,c")) for r in rows * 10)
    assert 150 <= dropped <= 250  # about half of 400


def test_opt_modelling_task_wiring():
    task = load_task(DataConfig(task="opt_modelling", num_train=30, num_eval=10), seed=0)
    assert task.reward == "milp_solver" and len(task.train) == 30 and len(task.eval) == 10
    assert not {r["prompt"] for r in task.train} & {r["prompt"] for r in task.eval}
    ids = task.tokenizer(task.train[0]["model"])["input_ids"]
    assert task.tokenizer.decode(ids, skip_special_tokens=True) == task.train[0]["model"]
    prose = load_task(DataConfig(task="opt_modelling(style=prose)", num_train=5, num_eval=2), seed=0)
    assert prose.tokenizer is None and "Write the model" in prose.train[0]["prompt"]


def test_sdrl_gated_diversity_gates_on_the_milp_reward():
    r = resolve_reward("gated_diversity(matcher='milp_solver')")
    other = INT_MODEL.replace("int x, y", "integer x y")  # the same model, written differently
    out = r(["p"] * 3, [INT_MODEL, other, LP_MODEL], answer=["20"] * 3, group=[0, 0, 0])
    assert out[2] == 0.0 and out[0] > 1.0 and out[1] > 1.0  # the relaxed model gets nothing, the right ones a bonus


def test_opt_modelling_blend_rows_are_lps_that_need_both_constraints():
    rows = opt_rows(40, seed=3, params=OptModellingParams(kinds=["blend"]))
    assert {r["kind"] for r in rows} == {"blend"} and len({r["prompt"] for r in rows}) == 40
    answers = [r["answer"] for r in rows]
    assert lp_solver(["p"] * 40, [r["model"] for r in rows], answers) == [1.0] * 40  # HiGHS agrees with the rows
    dropped = [r["model"].rsplit("\n", 1)[0] for r in rows]  # the teacher's mistake: parses, solves, wrong optimum
    assert lp_solver(["p"] * 40, dropped, answers) == [pytest.approx(0.3)] * 40
    assert any(float(a) != int(float(a)) for a in answers)  # continuous optima, not integer ones
    # by hand: max 3x+5y s.t. 2x+y<=12, x+3y<=15 -> vertex x=4.2, y=3.6: 30.6; without the second row: y=12 -> 60
    assert lp_solver(["p"] * 2, ["max 3x+5y\n2x+1y<=12\n1x+3y<=15", "max 3x+5y\n2x+1y<=12"], ["30.6"] * 2) == [
        1.0,
        pytest.approx(0.3),
    ]
    teach, rng = model_teacher(0.0, 0.5), random.Random(0)
    short = sum(teach(r, rng).count("\n") == 1 for r in rows * 10)
    assert 150 <= short <= 250  # about half of 400 leave out the second constraint


def test_opt_modelling_blend_task_wiring():
    task = load_task(DataConfig(task="opt_modelling(kinds=[blend])", num_train=30, num_eval=10), seed=0)
    assert task.reward == "lp_solver" and len(task.train) == 30
    assert "blend profit" in task.train[0]["prompt"] and "int" not in task.train[0]["model"]
    ids = task.tokenizer(task.train[0]["model"])["input_ids"]
    assert task.tokenizer.decode(ids, skip_special_tokens=True) == task.train[0]["model"]
    assert load_task(DataConfig(task="opt_modelling", num_train=5, num_eval=2), seed=0).reward == "milp_solver"
    with pytest.raises(ValueError, match="drawn alone"):
        OptModellingParams(kinds=["blend", "whole"])
