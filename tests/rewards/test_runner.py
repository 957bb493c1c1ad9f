"""RewardRunner robustness (raising, NaN, wrong count, hanging, no opinion), weighting, fields, built-ins and
reward spec resolution. User rewards are written to files by the tests; nothing is registered globally."""

from __future__ import annotations

import logging
import math
import sys
import textwrap
import time
import uuid

import pytest
import torch

from ascent.rewards import REWARDS, RewardRunner, RewardSpecError, resolve_reward

USER_REWARDS = textwrap.dedent(
    """
    import math
    import threading

    RELEASE = threading.Event()
    CALLS = []

    def raises(prompts, completions, **kw):
        raise RuntimeError("reward exploded")

    def nan_second(prompts, completions, **kw):
        return [1.0, math.nan, 0.5, 0.0][: len(completions)]

    def inf_and_text(prompts, completions, **kw):
        return [float("inf"), "not a number", 2, 0.25]

    def too_few(prompts, completions, **kw):
        return [1.0] * (len(completions) - 1)

    def not_a_list(prompts, completions, **kw):
        return 1.0

    def hang(prompts, completions, **kw):
        # a hang from the runner's point of view; released by the test so no thread outlives it
        RELEASE.wait(5)
        return [1.0] * len(completions)

    def some_none(prompts, completions, **kw):
        return [1.0, None, 0.0, None]

    def half_none(prompts, completions, **kw):
        return [1.0, None, 0.5, None]

    def doubles(prompts, completions, **kw):
        return [2.0, 4.0, None, None]

    def length(prompts, completions, **kw):
        return [float(len(c)) for c in completions]

    def record(prompts, completions, **kw):
        fields = {k: list(v) for k, v in kw.items()}
        CALLS.append({"prompts": list(prompts), "completions": list(completions), **fields})
        return [0.0] * len(completions)

    NOT_CALLABLE = 3
    """
)

PROMPTS = ["p0", "p1", "p2", "p3"]
COMPS = ["a", "bb", "ccc", "dddd"]
FIELDS = [{}, {}, {}, {}]


@pytest.fixture
def rfile(tmp_path):
    path = tmp_path / "r.py"
    path.write_text(USER_REWARDS)
    return lambda fn: f"{path}:{fn}"


@pytest.fixture
def rmodule(tmp_path, monkeypatch):
    """A uniquely named importable module holding the user rewards; `name:function` specs."""
    name = f"ascent_test_rewards_{uuid.uuid4().hex[:8]}"
    pkg = tmp_path / "mods"
    pkg.mkdir()
    (pkg / f"{name}.py").write_text(USER_REWARDS)
    monkeypatch.syspath_prepend(str(pkg))
    yield lambda fn: f"{name}:{fn}"
    sys.modules.pop(name, None)


def runner_logs(caplog):
    return [r for r in caplog.records if r.name == "ascent.rewards.runner" and r.levelno >= logging.WARNING]


# ---------------------------------------------------------------------------------------------------------
# failures
# ---------------------------------------------------------------------------------------------------------
def test_raising_reward_invalidates_and_warns_once(rfile, caplog):
    runner = RewardRunner([rfile("raises")])
    with caplog.at_level(logging.WARNING, logger="ascent.rewards.runner"):
        first = runner.score(PROMPTS, COMPS, FIELDS)
        second = runner.score(PROMPTS, COMPS, FIELDS)
    for res in (first, second):
        assert not res.valid.any()
        assert torch.isnan(res.rewards).all()
        assert res.stats["reward/failed_frac"] == 1.0
        assert res.stats["reward/no_opinion_frac"] == 0.0
        assert res.stats["reward/errors"] == 1.0
    logs = runner_logs(caplog)
    assert len(logs) == 1
    text = logs[0].getMessage()
    assert "raises" in text and "RuntimeError" in text and "reward exploded" in text  # with the traceback
    assert len(runner.failure_log) == 2  # every failure is recorded, only the first is logged


def test_failure_log_names_the_exception(rfile):
    runner = RewardRunner([rfile("raises")])
    runner.score(PROMPTS, COMPS, FIELDS)
    assert "RuntimeError: reward exploded" in runner.failure_log[0]


def test_raising_reward_via_module_spec(rmodule):
    res = RewardRunner([rmodule("raises")]).score(PROMPTS, COMPS, FIELDS)
    assert res.stats["reward/failed_frac"] == 1.0 and not res.valid.any()


def test_nan_for_one_sample(rfile, caplog):
    with caplog.at_level(logging.WARNING, logger="ascent.rewards.runner"):
        res = RewardRunner([rfile("nan_second")]).score(PROMPTS, COMPS, FIELDS)
    assert res.valid.tolist() == [True, False, True, True]
    assert res.rewards[[0, 2, 3]].tolist() == [1.0, 0.5, 0.0]
    assert math.isnan(res.rewards[1].item())
    assert res.stats["reward/failed_frac"] == 0.25
    assert res.stats["reward/no_opinion_frac"] == 0.0
    assert len(runner_logs(caplog)) == 1


def test_inf_and_non_numeric_values_fail_only_their_samples(rfile):
    res = RewardRunner([rfile("inf_and_text")]).score(PROMPTS, COMPS, FIELDS)
    assert res.valid.tolist() == [False, False, True, True]
    assert res.rewards[2:].tolist() == [2.0, 0.25]
    assert res.stats["reward/failed_frac"] == 0.5


@pytest.mark.parametrize("fn", ["too_few", "not_a_list"])
def test_wrong_number_of_values_invalidates_all(rfile, fn):
    runner = RewardRunner([rfile(fn)])
    res = runner.score(PROMPTS, COMPS, FIELDS)
    assert not res.valid.any() and torch.isnan(res.rewards).all()
    assert res.stats["reward/failed_frac"] == 1.0
    assert ("3 values for 4" if fn == "too_few" else "float values for 4") in runner.failure_log[0]


def test_hanging_reward_times_out(rfile):
    runner = RewardRunner([rfile("hang")], timeout_s=0.2)
    release = runner.fns[0].__globals__["RELEASE"]
    try:
        start = time.monotonic()
        res = runner.score(PROMPTS, COMPS, FIELDS)
        elapsed = time.monotonic() - start
    finally:
        release.set()
    assert elapsed < 1.5, elapsed  # 0.2 s timeout plus overhead on a loaded machine, far below the 5 s hang
    assert not res.valid.any()
    assert res.stats["reward/failed_frac"] == 1.0
    assert "timed out" in runner.failure_log[0]


def test_none_is_no_opinion_not_failure(rfile, caplog):
    with caplog.at_level(logging.WARNING, logger="ascent.rewards.runner"):
        res = RewardRunner([rfile("some_none")]).score(PROMPTS, COMPS, FIELDS)
    assert res.valid.tolist() == [True, False, True, False]
    assert res.rewards[0].item() == 1.0 and res.rewards[2].item() == 0.0
    assert torch.isnan(res.rewards[[1, 3]]).all()
    assert res.stats["reward/no_opinion_frac"] == 0.5
    assert res.stats["reward/failed_frac"] == 0.0
    assert res.stats["reward/errors"] == 0.0
    assert runner_logs(caplog) == []


# ---------------------------------------------------------------------------------------------------------
# several rewards
# ---------------------------------------------------------------------------------------------------------
def test_weighted_sum_and_no_opinion_fallback(rfile, rmodule):
    # A = [1, None, 0.5, None] (weight 1), B = [2, 4, None, None] (weight 0.5)
    #   sample 0: 1*1 + 0.5*2 = 2; sample 1: only B -> 0.5*4 = 2; sample 2: only A -> 0.5; sample 3: no opinion
    runner = RewardRunner([rfile("half_none"), rmodule("doubles")], weights=[1.0, 0.5])
    res = runner.score(PROMPTS, COMPS, FIELDS)
    assert res.valid.tolist() == [True, True, True, False]
    assert res.rewards[:3].tolist() == [2.0, 2.0, 0.5]
    assert math.isnan(res.rewards[3].item())
    assert res.components.shape == (4, 2)
    assert res.components[0].tolist() == [1.0, 2.0]
    assert torch.isnan(res.components[1, 0]) and torch.isnan(res.components[2, 1])
    assert res.stats["reward/no_opinion_frac"] == 0.25
    assert res.stats["reward/failed_frac"] == 0.0
    # per-reward means over the samples each had an opinion on
    assert res.stats[f"reward/{rfile('half_none')}"] == pytest.approx(0.75)
    assert res.stats[f"reward/{rmodule('doubles')}"] == pytest.approx(3.0)


def test_a_zero_weight_reward_is_only_logged(rfile, rmodule):
    """`reward=[a, verifier] reward_weights=[1, 0]` (train on a, watch the verifier): where a has no opinion the
    sample stays out of the loss, it does not get a reward of 0 because the verifier had an opinion; a failure of
    the watched reward skips nothing; its mean is still logged."""
    # A = [1, None, 0.5, None] (weight 1), B = [2, 4, None, None] (weight 0)
    res = RewardRunner([rfile("half_none"), rmodule("doubles")], weights=[1.0, 0.0]).score(PROMPTS, COMPS, FIELDS)
    assert res.valid.tolist() == [True, False, True, False]
    assert res.rewards[[0, 2]].tolist() == [1.0, 0.5] and torch.isnan(res.rewards[[1, 3]]).all()
    assert res.stats["reward/no_opinion_frac"] == 0.5
    assert res.stats[f"reward/{rmodule('doubles')}"] == pytest.approx(3.0)
    res = RewardRunner([rfile("length"), rfile("raises")], weights=[1.0, 0.0]).score(PROMPTS, COMPS, FIELDS)
    assert res.valid.all() and res.rewards.tolist() == [1.0, 2.0, 3.0, 4.0]
    assert res.stats["reward/failed_frac"] == 0.0


def test_default_weights_are_one(rfile):
    res = RewardRunner([rfile("length"), rfile("nan_second")]).score(PROMPTS, COMPS, FIELDS)
    # length [1, 2, 3, 4] + [1, NaN(fail), 0.5, 0] -> sample 1 invalid (a reward failed on it)
    assert res.valid.tolist() == [True, False, True, True]
    assert res.rewards[[0, 2, 3]].tolist() == [2.0, 3.5, 4.0]
    assert res.stats["reward/failed_frac"] == 0.25


def test_failure_of_one_reward_invalidates_even_if_other_scores(rfile):
    res = RewardRunner([rfile("length"), rfile("raises")], weights=[1.0, 1.0]).score(PROMPTS, COMPS, FIELDS)
    assert not res.valid.any()
    assert res.components[:, 0].tolist() == [1.0, 2.0, 3.0, 4.0]


def test_row_fields_reach_function_as_keyword_lists(rfile):
    runner = RewardRunner([rfile("record")])
    fields = [{"answer": "1", "level": 3}, {"answer": "2"}, {"answer": "3", "level": 5}, {"answer": None}]
    runner.score(PROMPTS, COMPS, fields)
    (call,) = runner.fns[0].__globals__["CALLS"]
    assert call["prompts"] == PROMPTS and call["completions"] == COMPS
    assert call["answer"] == ["1", "2", "3", None]
    assert call["level"] == [3, None, 5, None]  # missing keys become None
    assert set(call) == {"prompts", "completions", "answer", "level"}


# ---------------------------------------------------------------------------------------------------------
# built-ins
# ---------------------------------------------------------------------------------------------------------
def test_exact_answer():
    fn = REWARDS.get("exact_answer")
    assert fn(["q"] * 5, [" 42 \n", "42.0", "4 2", "42", "7"], answer=["42", "42", "42", 42, None]) == [
        1.0,
        0.0,
        0.0,
        1.0,
        None,
    ]
    assert fn(["q"], ["42"]) == [None]  # no answer column: no opinion


def test_last_number():
    fn = REWARDS.get("last_number")
    out = fn(
        ["q"] * 5,
        ["the sum is 1,234", "12 then 13", "no digits", "x = -3.0", "about 0.5."],
        answer=["1234", "12", "5", "-3", "0.5"],
    )
    assert out == [1.0, 0.0, 0.0, 1.0, 1.0]
    assert fn(["q"], ["7"], answer=["seven"]) == [None]  # non-numeric answer: no opinion
    assert fn(["q"], ["7"]) == [None]


def test_math_verify():
    fn = REWARDS.get("math_verify")
    comps = ["\\boxed{42}", "41", "The answer is 1/2", "$\\frac{1}{2}$", "x"]
    answers = ["42", "42", "0.5", "0.5", None]
    assert fn(["q"] * 5, comps, answer=answers) == [1.0, 0.0, 1.0, 1.0, None]


def test_builtins_through_runner():
    runner = RewardRunner(["exact_answer", "last_number"], weights=[1.0, 0.5])
    res = runner.score(["1+1="] * 3, ["2", "so 2", "3"], [{"answer": "2"}] * 3)
    # exact [1, 0, 0] + 0.5 * last [1, 1, 0]
    assert res.rewards.tolist() == [1.5, 0.5, 0.0]
    assert res.valid.all()


# ---------------------------------------------------------------------------------------------------------
# resolve_reward
# ---------------------------------------------------------------------------------------------------------
def test_resolve_registered_and_specs(rfile, rmodule):
    assert resolve_reward("exact_answer") is REWARDS.get("exact_answer")
    assert resolve_reward(rfile("length"))(["p"], ["abc"]) == [3.0]
    assert resolve_reward(rmodule("length"))(["p"], ["ab"]) == [2.0]


def one_line_spec_error(spec: str) -> str:
    with pytest.raises(RewardSpecError) as info:
        resolve_reward(spec)
    msg = str(info.value)
    assert "\n" not in msg
    return msg


def test_resolve_unknown_name_lists_names():
    msg = one_line_spec_error("exact_anwser")
    assert "exact_anwser" in msg
    for name in ("exact_answer", "last_number", "math_verify"):
        assert name in msg
    assert "module:function" in msg and "file.py:function" in msg


def test_resolve_missing_file(tmp_path):
    msg = one_line_spec_error(f"{tmp_path / 'missing.py'}:fn")
    assert "missing.py" in msg and "does not exist" in msg


def test_resolve_file_without_function(rfile):
    msg = one_line_spec_error(rfile("nope"))
    assert "r.py" in msg and "'nope'" in msg
    assert "'NOT_CALLABLE'" in one_line_spec_error(rfile("NOT_CALLABLE"))


def test_resolve_module_without_function(rmodule):
    msg = one_line_spec_error(rmodule("nope"))
    assert "'nope'" in msg and rmodule("").rstrip(":") in msg
    assert "'dumps_nope'" in one_line_spec_error("json:dumps_nope")


def test_resolve_unimportable_module():
    msg = one_line_spec_error("no_such_module_xyz_123:fn")
    assert "no_such_module_xyz_123" in msg and "cannot be imported" in msg


def test_resolve_file_that_fails_to_import(tmp_path):
    path = tmp_path / "broken.py"
    path.write_text("raise ValueError('bad import')\n")
    msg = one_line_spec_error(f"{path}:fn")
    assert "broken.py" in msg and "ValueError" in msg and "bad import" in msg


def test_runner_resolves_at_construction(tmp_path):
    with pytest.raises(RewardSpecError):
        RewardRunner(["exact_answer", f"{tmp_path / 'gone.py'}:f"])


def test_spec_arguments_win_over_same_named_columns():
    from ascent.rewards.runner import RewardRunner

    runner = RewardRunner(["overlong(max_len=10, cache_len=4)"])
    fields = [{"max_len": 1000, "completion_tokens": n} for n in (6, 8, 11)]  # a column named like the knob
    scores = runner.score(["p"] * 3, ["a"] * 3, fields)
    assert scores.components[:, 0].tolist() == [0.0, -0.5, -1.0]  # the spec's max_len=10, not the rows' 1000
