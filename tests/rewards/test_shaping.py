"""Shaped rewards (ascent/rewards/shaping.py, constraints.py, lp_solver.py): hand-computed values, the property
each paper relies on, and each reward run through RewardRunner from a spec string with keyword arguments."""

from __future__ import annotations

import math
import random
from dataclasses import replace

import pytest
import torch

from ascent.app.pipeline import reward_specs
from ascent.config import load_config
from ascent.rewards import REWARDS, RewardRunner
from ascent.rewards.constraints import CONSTRAINTS, check, constraints_reward
from ascent.rewards.lp_solver import LPParseError, lp_solver, parse_linear, parse_lp, solve_lp
from ascent.rewards.shaping import (
    answer_once,
    base_and_bonus,
    brier,
    ccc,
    concordance,
    confidence,
    darl,
    distance,
    format_reward,
    gated_diversity,
    levenshtein,
    overlong,
    parse_confidence,
)
from ascent.tasks import load_task

NEW = [
    "confidence",
    "brier",
    "ccc",
    "darl",
    "gated_diversity",
    "base_and_bonus",
    "format",
    "overlong",
    "answer_once",
    "constraints",
    "lp_solver",
]


def test_all_registered():
    """Each name is registered to the very function whose values this file checks by hand (a names-only check
    would pass with a name bound to the wrong function); the runner cases below check them by name as well."""
    functions = {
        "confidence": confidence,
        "brier": brier,
        "ccc": ccc,
        "darl": darl,
        "gated_diversity": gated_diversity,
        "base_and_bonus": base_and_bonus,
        "format": format_reward,
        "overlong": overlong,
        "answer_once": answer_once,
        "constraints": constraints_reward,
        "lp_solver": lp_solver,
    }
    assert list(functions) == NEW
    assert {name: REWARDS.get(name) for name in NEW} == functions


def _p(n: int) -> list[str]:
    return ["q"] * n


# ------------------------------------------------------------------------------------------- helpers


def test_parse_confidence_forms():
    assert parse_confidence("12\nconfidence: 0.8") == 0.8
    assert parse_confidence("Confidence level = 85") == 0.85
    assert parse_confidence("confidence: 70%") == pytest.approx(0.7)
    assert parse_confidence("<confidence> 0.3 </confidence>") == 0.3
    assert parse_confidence("confidence: 0.2 ... confidence: 0.9") == 0.9  # the last statement counts
    assert parse_confidence("confidence: 250") is None
    assert parse_confidence("I have confidence in 3 things") is None


def _dp_levenshtein(a, b) -> int:
    prev = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        cur = [i]
        for j, cb in enumerate(b, 1):
            cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (ca != cb)))
        prev = cur
    return prev[-1]


def test_levenshtein_matches_dynamic_programming():
    rng = random.Random(0)
    for _ in range(300):
        a = [rng.choice("abcde") for _ in range(rng.randrange(0, 150))]
        b = [rng.choice("abcdef") for _ in range(rng.randrange(0, 150))]
        assert levenshtein(a, b) == _dp_levenshtein(a, b)
    assert distance("", "") == 0.0 and distance("a b", "") == 1.0


# --------------------------------------------------------------------------------------- confidence (ConfClip)


def test_confidence_hand_values():
    comps = ["12 confidence: 0.8", "13 confidence: 0.8", "12", "12", "12"]
    lp = [None, None, math.log(0.5), None, None]
    out = confidence(_p(5), comps, answer=["12", "12", "12", "12", None], completion_logprob=lp)
    assert out[:4] == pytest.approx([1.4, -0.4, 1.25, 1.0])  # 1+.5*.8, -.5*.8, 1+.5*exp(log .5), no confidence
    assert out[4] is None
    # source="verbal" ignores the log-prob; the matcher is a keyword
    assert confidence(_p(1), ["12"], answer=["12"], completion_logprob=[math.log(0.5)], source="verbal") == [1.0]
    assert confidence(
        _p(2), ["12 confidence: 1", "x 12 confidence: 1"], answer=["12", "12"], matcher="exact_answer"
    ) == [1.5, -0.5]


def test_confidence_orders_correct_over_wrong_and_by_confidence():
    cs = [0.0, 0.2, 0.5, 0.9, 1.0]
    right = confidence(_p(5), [f"7 confidence: {c}" for c in cs], answer=["7"] * 5)
    wrong = confidence(_p(5), [f"8 confidence: {c}" for c in cs], answer=["7"] * 5)
    assert min(right) > max(wrong)
    assert right == sorted(right) and wrong == sorted(wrong, reverse=True)  # confident-correct up, confident-wrong down


# --------------------------------------------------------------------------------------- brier (CalibSFT)


def test_brier_hand_values():
    comps = ["12 confidence: 0.8", "13 confidence: 0.8", "12 <confidence>60%</confidence>", "12", "13"]
    out = brier(_p(5), comps, answer=["12"] * 5)
    assert out == pytest.approx([0.96, -0.64, 0.84, 0.0, -1.0])
    assert brier(_p(1), ["12"], answer=["12"], completion_logprob=[math.log(0.9)]) == pytest.approx([1 - 0.01])


def test_brier_is_a_proper_scoring_rule():
    """For a question solved with probability p, the expected reward is maximised by stating c = p."""
    grid = [i / 20 for i in range(21)]
    for p in [0.0, 0.1, 0.35, 0.5, 0.8, 1.0]:
        expected = []
        for c in grid:
            right, wrong = brier(_p(2), [f"5 confidence: {c}", f"6 confidence: {c}"], answer=["5", "5"])
            expected.append(p * right + (1 - p) * wrong)
        assert grid[max(range(len(grid)), key=expected.__getitem__)] == pytest.approx(p, abs=0.025)


# ------------------------------------------------------------------------------------------- ccc (CCC)


def _slow_ccc(x, y) -> float:
    n = len(x)
    mx, my = sum(x) / n, sum(y) / n
    vx = sum((a - mx) ** 2 for a in x) / n
    vy = sum((b - my) ** 2 for b in y) / n
    cov = sum((a - mx) * (b - my) for a, b in zip(x, y)) / n
    return 2 * cov / (vx + vy + (mx - my) ** 2)


def test_ccc_formula_matches_slow_reference():
    rng = random.Random(1)
    for _ in range(20):
        x = [rng.uniform(-5, 5) for _ in range(7)]
        y = [rng.uniform(-5, 5) for _ in range(7)]
        assert concordance(x, y) == pytest.approx(_slow_ccc(x, y))
    assert concordance([1, 2, 3], [2, 3, 4]) == pytest.approx(4 / 7)


def test_ccc_perfect_agreement_is_one():
    comps = ["10", "the value is 20", "35.5"]
    assert ccc(_p(3), comps, answer=["10", "20", "35.5"], attribution="batch") == [1.0, 1.0, 1.0]
    assert ccc(_p(3), comps, answer=["10", "20", "35.5"]) == pytest.approx([0.0, 0.0, 0.0])  # nothing to improve


def test_ccc_leave_one_out_hand_values():
    # CCC([1,2,3],[2,3,4]) = 4/7; without sample 0 or 2: 1/3, without sample 1: 2/3
    out = ccc(_p(5), ["1", "2", "3", "no number", "9"], answer=["2", "3", "4", "5", None])
    assert out[:3] == pytest.approx([4 / 7 - 1 / 3, 4 / 7 - 2 / 3, 4 / 7 - 1 / 3])
    assert out[3] == 0.0  # unparsable: left out of the CCC, `unparsable` (0)
    assert out[4] is None  # no answer
    loo_ref = [
        _slow_ccc([1, 2, 3], [2, 3, 4])
        - _slow_ccc([a for j, a in enumerate([1, 2, 3]) if j != i], [b for j, b in enumerate([2, 3, 4]) if j != i])
        for i in range(3)
    ]
    assert out[:3] == pytest.approx(loo_ref)
    assert ccc(_p(2), ["1", "x"], answer=["1", "2"], unparsable=-1.0)[1] == -1.0


def test_ccc_slot_attribution():
    # groups 0,0,1,1: slot 0 = samples 0 and 2, slot 1 = samples 1 and 3
    out = ccc(_p(4), ["1", "5", "3", "3"], answer=["1", "1", "3", "3"], group=[0, 0, 1, 1], attribution="slot")
    assert out[0] == out[2] == 1.0
    assert out[1] == out[3] == pytest.approx(_slow_ccc([5, 3], [1, 3]))
    with pytest.raises(ValueError, match="group"):
        ccc(_p(1), ["1"], answer=["1"], attribution="slot")


def test_ccc_anchor_attribution_hand_values():
    # 3 prompts x 2 rollouts; targets 1, 2, 4; group means of the predictions: 1.5, 2, 5
    comps, answer, group = ["1", "2", "2", "2", "4", "6"], ["1", "1", "2", "2", "4", "4"], [0, 0, 1, 1, 2, 2]
    out = ccc(_p(6), comps, answer=answer, group=group, attribution="anchor")
    # rollout 0 of prompt 0: x = [1, 2, 5], y = [1, 2, 4] -> means 8/3, 7/3; var x 26/9, var y 14/9,
    # cov 19/9: CCC = 2 (19/9) / (26/9 + 14/9 + 1/9) = 38/41
    assert out[0] == pytest.approx(38 / 41)
    assert out[0] == pytest.approx(_slow_ccc([1, 2, 5], [1, 2, 4]))
    assert out[1] == pytest.approx(_slow_ccc([2, 2, 5], [1, 2, 4]))  # the same anchors, its own prediction
    assert out[4] == pytest.approx(_slow_ccc([4, 1.5, 2], [4, 1, 2]))
    assert out[0] > out[1]  # the rollout that predicted its own target better is rewarded more
    with pytest.raises(ValueError, match="group"):
        ccc(_p(1), ["1"], answer=["1"], attribution="anchor")


# ------------------------------------------------------------------------------------------- darl (DARL)


REF = "the cat sat on the mat"
DARL_COMPS = ["the cat sat on the mat", "the cat sat on a mat", "a dog ran far away now"]


def test_darl_hand_values_group_band():
    # deviations from the group: (1/6 + 1)/2 = 7/12 for the first two (inside [0.2, 0.6]), 1 for the third (outside)
    out = darl(_p(3), DARL_COMPS, answer=[REF] * 3, group=[0, 0, 0])
    assert out == pytest.approx([1.0 + 0.2, 5 / 6 + 0.2, 0.0])
    # a narrower band excludes 7/12: no bonus anywhere, the reward is the reference similarity
    assert darl(_p(3), DARL_COMPS, answer=[REF] * 3, group=[0, 0, 0], hi=0.5) == pytest.approx([1.0, 5 / 6, 0.0])


def test_darl_reference_band_and_singletons():
    # deviation from the reference: 0 (a copy, below lo), 1/6 (inside [0.1, 0.6]), 1 (too far)
    out = darl(_p(3), DARL_COMPS, answer=[REF] * 3, against="reference", lo=0.1)
    assert out == pytest.approx([1.0, 5 / 6 + 0.2, 0.0])
    # a prompt sampled once has no group to deviate from: no bonus
    assert darl(_p(2), DARL_COMPS[:2], answer=[REF] * 2, group=[0, 1]) == pytest.approx([1.0, 5 / 6])
    # another base reward, by name
    assert darl(_p(2), ["4", "so 4"], answer=["4", "4"], group=[0, 0], base="last_number", lo=0.4, hi=0.6) == [1.2, 1.2]


# ------------------------------------------------------------------------------------------ gated_diversity (SDRL)


def test_gated_diversity_hand_values():
    comps = ["x y 4", "x y 4", "5", "a b 4", "c d 4", "4", "9"]
    out = gated_diversity(_p(7), comps, answer=["4"] * 7, group=[0, 0, 0, 1, 1, 2, 2])
    # identical correct pair: across 0, within 0; distinct pair: within 2/3 -> 1 + .5 * (.5 * 2/3); lone correct: 1 + .5
    assert out == pytest.approx([1.0, 1.0, 0.0, 1 + 1 / 6, 1 + 1 / 6, 1.5, 0.0])


def test_gated_diversity_strategies():
    comps = ["strategy: exact 4", "Strategy: heuristic 4", "strategy: exact 4", "strategy: heuristic 3"]
    out = gated_diversity(_p(4), comps, answer=["4"] * 4, group=[0] * 4)
    # sample 0: peers 1 (other strategy) and 2 (same, identical): across 1/2, within 0
    assert out == pytest.approx([1.125, 1.5, 1.125, 0.0])


def test_gated_diversity_wrong_never_gets_bonus_and_diverse_beats_identical():
    rng = random.Random(2)
    words = ["alpha", "beta", "gamma", "delta"]
    for _ in range(30):
        comps = [" ".join(rng.choice(words) for _ in range(3)) + f" {rng.choice([4, 5])}" for _ in range(6)]
        out = gated_diversity(_p(6), comps, answer=["4"] * 6, group=[0, 0, 0, 1, 1, 1])
        for c, r in zip(comps, out):
            assert (r == 0.0) if c.endswith("5") else (r >= 1.0)
    diverse = gated_diversity(_p(2), ["first route 4", "other path 4"], answer=["4", "4"], group=[0, 0])
    same = gated_diversity(_p(2), ["first route 4", "first route 4"], answer=["4", "4"], group=[0, 0])
    assert min(diverse) > max(same)


# ------------------------------------------------------------------------------------------ base_and_bonus (FIRM)


def test_base_and_bonus_hand_values_and_zero_base():
    out = base_and_bonus(_p(4), ["12", "the answer is 12", "13", "x"], answer=["12", "12", "12", "12"])
    assert out == [1.0, 0.5, 0.0, 0.0]  # base last_number, bonus format, alpha 0.5
    assert base_and_bonus(_p(2), ["12", "the answer is 12"], answer=["12", "12"], alpha=0.2) == pytest.approx(
        [1.0, 0.2]
    )
    # zero base: zero reward whatever the bonus
    for alpha in (0.0, 0.3, 1.0):
        assert base_and_bonus(_p(2), ["13", "13"], answer=["12", "12"], bonus="format", alpha=alpha) == [0.0, 0.0]
    # specs with arguments for both parts
    out = base_and_bonus(
        _p(2),
        ["7 apples", "7"],
        answer=["7", "7"],
        base="last_number",
        bonus="format(pattern='\\\\d+ apples')",
        alpha=0.0,
    )
    assert out == [1.0, 0.0]
    with pytest.raises(ValueError):
        base_and_bonus(_p(1), ["1"], answer=["1"], alpha=1.5)


# ------------------------------------------------------------------------------------------- format, overlong


def test_format_values():
    assert format_reward(_p(4), ["42", " -3.5\n", "the answer is 4", ""]) == [1.0, 1.0, 0.0, 0.0]
    assert format_reward(_p(2), ["<a>1</a>", "1"], pattern=r"<a>\d+</a>") == [1.0, 0.0]


def test_overlong_regions_and_continuity():
    out = overlong(_p(6), [""] * 6, completion_tokens=[0, 6, 7, 8, 10, 11], max_len=10, cache_len=4)
    assert out == pytest.approx([0.0, 0.0, -0.25, -0.5, -1.0, -1.0])
    eps = 1e-9
    f = lambda n: overlong(_p(1), [""], completion_tokens=[n], max_len=10, cache_len=4)[0]  # noqa: E731
    assert f(6 + eps) == pytest.approx(f(6), abs=1e-6)  # continuous at L_max - L_cache
    assert f(10 + eps) == pytest.approx(f(10), abs=1e-6)  # and at L_max
    assert overlong(_p(1), [""]) == [None]
    with pytest.raises(ValueError):
        overlong(_p(1), [""], completion_tokens=[1], max_len=4, cache_len=8)


def test_answer_once_values():
    completions = [
        "3 + 5 = 8. The answer is 8.",
        "The answer is 8. The answer is 8. The answer is 8",  # the smollm2-arith seed-0 loop, cut at the cap
        "The answer is 8. The final answer is: **9**",  # two statements, different numbers
        "8 apples. So 8.",  # never stated: answer_is's business, not this penalty's
        "",
    ]
    assert answer_once(_p(5), completions) == [0.0, -1.0, -1.0, 0.0, 0.0]
    assert answer_once(_p(2), completions[:2], penalty=0.25) == [0.0, -0.25]
    with pytest.raises(ValueError, match="penalty >= 0"):
        answer_once(_p(1), [""], penalty=-1)


@pytest.mark.parametrize("recipe", ["smollm2-arith", "smollm2-gsm8k"])
def test_llm_recipes_charge_running_into_the_cap_and_repeating_the_answer(recipe):
    """The recipes' summed reward: a clean correct completion 1; the same answer repeated, or cut at the cap, 0 or
    less; held-out correctness is the first reward alone (answer_is), so the penalties never change accuracy."""
    cfg = load_config(recipe)
    cap = cfg.rollout.max_new_tokens
    assert cfg.reward[1].startswith(f"overlong(max_len={cap}, cache_len=")  # the ramp ends at the rollout cap
    specs = reward_specs(cfg, load_task(replace(cfg.data, num_eval=5, num_train=20), 0))
    assert specs == ["answer_is", cfg.reward[1], "answer_once"]
    runner = RewardRunner(specs, None, 30.0)
    clean, looped = "5 + 3 = 8. The answer is 8.", "5 + 3 = 8." + " The answer is 8." * 12
    fields = [{"answer": "8", "completion_tokens": n} for n in (12, cap, cap - 8, cap)]
    got = runner.score(["q"] * 4, [clean, looped, clean, clean], fields)
    assert got.components[:, 0].tolist() == [1.0, 1.0, 1.0, 1.0]  # strict correctness, what evaluation reads
    totals = got.rewards.tolist()
    assert totals[0] == 1.0 and totals[1] == -1.0 and totals[3] == 0.0
    assert 0.0 < totals[2] < 1.0  # inside the ramp: charged, less than at the cap


# ------------------------------------------------------------------------------- constraints (Ren et al. 2025)


def test_constraints_share_satisfied():
    text = "hello world, this is fine"
    cons = [
        {"type": "max_words", "value": 5},
        {"type": "contains", "value": "WORLD"},
        {"type": "no_commas"},
        {"type": "starts_with", "value": "hello"},
        {"type": "ends_with", "value": "fine"},
        {"type": "lowercase"},
        {"type": "regex", "value": r"\bis\b"},
        {"type": "min_words", "value": 6},
    ]
    assert constraints_reward(_p(1), [text], constraints=[cons]) == [0.75]
    assert constraints_reward(_p(1), [text], constraints=[cons], aggregate="all") == [0.0]
    assert constraints_reward(_p(1), [text], constraints=[cons[:2]], aggregate="all") == [1.0]
    assert constraints_reward(
        _p(1), [text], constraints=[[{"type": "contains", "value": "WORLD", "case_sensitive": True}]]
    ) == [0.0]
    assert constraints_reward(_p(3), [text] * 3, constraints=[None, [], '[{"type": "no_commas"}]']) == [None, None, 0.0]


def test_constraints_unknown_type_is_a_clear_error():
    with pytest.raises(ValueError, match="valid types: contains"):
        check("x", {"type": "shout"})
    with pytest.raises(ValueError, match="needs a 'value'"):
        check("x", {"type": "contains"})
    runner = RewardRunner(["constraints"])
    res = runner.score(["q"], ["x"], [{"constraints": [{"type": "shout"}]}])
    assert not res.valid[0] and "unknown constraint type 'shout'" in runner.failure_log[0]
    assert "max_words" in CONSTRAINTS.names()


# ------------------------------------------------------------------------------------------ lp_solver (SIRL)


LP_OK = "I model it as:\nmaximize 3x + 2y\nsubject to\n  x + y <= 4\n  x + 3y <= 6\n"  # x=4, y=0: 12
LP_MIN = "```lp\nmin cost = 2a + 3*b\ns.t.\nc1: a + b >= 4\n0 <= a <= 1\nend\n```\nDone."  # a=1, b=3: 11
LP_EQ = "maximize x + 2y\nx + y = 3\ny <= 2"  # y=2, x=1: 5
LP_INFEASIBLE = "maximize x + y\nx + y <= 4\nx >= 5"
LP_UNBOUNDED = "maximize x + y\nx - y <= 4"


def test_lp_parse_and_solve_hand_solved():
    assert solve_lp(parse_lp(LP_OK)) == ("optimal", pytest.approx(12.0))
    assert solve_lp(parse_lp(LP_MIN)) == ("optimal", pytest.approx(11.0))
    assert solve_lp(parse_lp(LP_EQ)) == ("optimal", pytest.approx(5.0))
    assert solve_lp(parse_lp("minimize x + 1\nfree x\nx >= -3")) == ("optimal", pytest.approx(-2.0))
    assert parse_linear("2 x1 - x2*0.5 - 3") == ({"x1": 2.0, "x2": -0.5}, -3.0)
    for bad in ["3x 2y", "3 +", "x ** 2", "x / 2"]:
        with pytest.raises(LPParseError):
            parse_linear(bad)


def test_lp_solver_scores():
    comps = [LP_OK, LP_MIN, LP_EQ, LP_INFEASIBLE, LP_UNBOUNDED, "no idea", LP_OK, LP_OK]
    answers = ["12", "11", "5", "12", "12", "12", "13", None]
    out = lp_solver(_p(8), comps, answer=answers)
    assert out[:7] == pytest.approx([1.0, 1.0, 1.0, 0.1, 0.1, 0.0, 0.3]) and out[7] is None
    weights = dict(parse_weight=0.2, feasible_weight=0.3, objective_weight=0.5)
    assert lp_solver(_p(3), [LP_OK, LP_OK, LP_UNBOUNDED], answer=["12", "1", "1"], **weights) == pytest.approx(
        [1.0, 0.5, 0.2]
    )


def test_lp_solver_never_raises_on_garbage():
    rng = random.Random(3)
    alphabet = "maximizeMINsubjectto xy0123456789+-*/<>=≤:\n.,()e"
    garbage = [
        "",
        "maximize",
        "maximize\n",
        "maximize x\nx <= 1e999",
        "max 1e400x",
        "maximize x\nthis is prose",
        "min x\nfree 3",
        "maximize 0x\n0 <= -1",
    ]
    garbage += ["".join(rng.choice(alphabet) for _ in range(rng.randrange(1, 60))) for _ in range(300)]
    garbage += ["maximize " + "".join(rng.choice(alphabet) for _ in range(rng.randrange(1, 60))) for _ in range(300)]
    out = lp_solver(_p(len(garbage)), garbage, answer=["1"] * len(garbage))
    assert all(any(v == pytest.approx(t) for t in (0.0, 0.1, 0.3, 1.0)) for v in out)
    assert out[:8] == pytest.approx([0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.1])


# ------------------------------------------------------------------------------------------- through the runner


RUNNER_CASES = [
    (
        "confidence(weight=0.25, matcher='last_number')",
        ["5 confidence: 0.8", "6 confidence: 0.8"],
        [{"answer": "5"}] * 2,
        [1.2, -0.2],
    ),
    ("brier(source='verbal', missing_penalty=0.5)", ["5 confidence: 0.8", "5"], [{"answer": "5"}] * 2, [0.96, 0.5]),
    ("ccc(attribution='batch')", ["1", "2", "3"], [{"answer": a} for a in ("2", "3", "4")], [4 / 7] * 3),
    (
        "darl(lo=0.1, hi=0.9, bonus=0.5, against='reference')",
        ["a b c d", "a b c x"],
        [{"answer": "a b c d"}] * 2,
        [1.0, 1.25],
    ),
    (
        "gated_diversity(bonus=1.0, across_weight=0.0)",
        ["p q 4", "r s 4", "3"],
        [{"answer": "4"}] * 3,
        [1 + 2 / 3, 1 + 2 / 3, 0.0],
    ),
    (
        "base_and_bonus(base='exact_answer', bonus='format', alpha=0.25)",
        ["4", "04x"],
        [{"answer": "4"}, {"answer": "04x"}],
        [1.0, 0.25],
    ),
    ("format(pattern='[a-z]+')", ["abc", "ab1"], [{}, {}], [1.0, 0.0]),
    (
        "overlong(max_len=10, cache_len=4)",
        ["", "", ""],
        [{"completion_tokens": n} for n in (5, 8, 12)],
        [0.0, -0.5, -1.0],
    ),
    ("answer_once(penalty=0.5)", ["The answer is 2.", "The answer is 2. The answer is 2."], [{}, {}], [0.0, -0.5]),
    (
        "constraints(aggregate='mean')",
        ["one two"],
        [{"constraints": [{"type": "max_words", "value": 1}, {"type": "contains", "value": "two"}]}],
        [0.5],
    ),
    (
        "lp_solver(rtol=0.01, parse_weight=0.0)",
        [LP_OK, LP_UNBOUNDED],
        [{"answer": "12.05"}, {"answer": "1"}],
        [0.9, 0.0],
    ),
]


@pytest.mark.parametrize(
    "spec,completions,fields,expected", RUNNER_CASES, ids=[c[0].split("(")[0] for c in RUNNER_CASES]
)
def test_through_runner_with_spec_arguments(spec, completions, fields, expected):
    n = len(completions)
    fields = [
        {
            "group": i % 2 if spec.startswith("darl") else 0,
            "completion_logprob": -0.1,
            "finished": True,
            "completion_tokens": 3,
            **f,
        }
        for i, f in enumerate(fields)
    ]
    runner = RewardRunner([spec, "format"], weights=[1.0, 0.0])
    res = runner.score(["q"] * n, completions, fields)
    assert runner.failure_log == []
    assert res.valid.all()
    assert res.components[:, 0].tolist() == pytest.approx(expected, abs=1e-6)
    assert torch.allclose(res.rewards, torch.tensor(expected, dtype=torch.float32), atol=1e-6)


def test_all_new_rewards_covered_by_runner_cases():
    assert {c[0].split("(")[0] for c in RUNNER_CASES} == set(NEW)
