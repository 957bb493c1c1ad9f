"""experiment_world: instrumented runs of variable simulated time, partial credit from the log, the durations the
agent collector hands to `duration_aware`."""

from __future__ import annotations

import random

import pytest

from ascent.agents.collector import turn_extras
from ascent.agents.trajectory import Trajectory, Turn
from ascent.envs.base import check_env
from ascent.envs.experiment_world import (
    PLANS,
    ExperimentEnv,
    ExperimentTask,
    expected_reward,
    expected_seconds,
    progress_credit,
    reward,
    simulate,
)

LARGE = ExperimentTask(name="housing", size="large")


def call(plan: str) -> str:
    return '<tool_call>{"name": "run_experiment", "arguments": {"plan": "%s"}}</tool_call>' % plan


def test_check_env_and_bad_input():
    check_env(ExperimentEnv(seed=0), LARGE)
    env = ExperimentEnv(seed=0)
    env.reset(LARGE)
    r = env.step(call("quantum"))
    assert not r.done and "unknown plan 'quantum'" in r.observation and r.info["duration"] == 0.0
    r = env.step("<answer>gbm</answer>")  # never ran gbm: nothing to submit
    assert r.done and r.reward == 0.0 and "no run of plan 'gbm'" in r.info["error"]
    with pytest.raises(ValueError, match="size must be one of"):
        ExperimentTask(name="x", size="huge")
    with pytest.raises(ValueError, match="partial_credit must be in"):
        ExperimentEnv(partial_credit=2.0)


def test_progress_lines_and_partial_credit():
    run = simulate("deep", random.Random(0))
    assert run.log.count("[progress]") == run.stages
    assert progress_credit("[progress] loaded data\nTraceback: stage 'trained model' failed", 0.2) == pytest.approx(
        0.05
    )
    failed = [r for r in (simulate("deep", random.Random(s)) for s in range(200)) if r.stages < 4]
    assert failed, "deep fails sometimes"
    for f in failed:
        assert reward(f, "large", 0.2) == pytest.approx(0.2 * f.stages / 4)
        assert reward(f, "large", 0.0) == 0.0
        assert f.seconds == pytest.approx(sum(PLANS["deep"].seconds[: f.stages + 1]))


@pytest.mark.parametrize("plan", list(PLANS))
def test_expected_reward_and_seconds_match_simulation(plan):
    rng, n = random.Random(1), 20_000
    runs = [simulate(plan, rng) for _ in range(n)]
    for size in ("small", "large"):
        mc = sum(reward(r, size, 0.2) for r in runs) / n
        assert mc == pytest.approx(expected_reward(plan, size, 0.2), abs=0.01)
    assert sum(r.seconds for r in runs) / n == pytest.approx(expected_seconds(plan), rel=0.02)


def test_the_slow_plan_is_best_on_large_data_and_worst_on_small():
    best = {s: max(PLANS, key=lambda p: expected_reward(p, s, 0.0)) for s in ("small", "large")}
    assert best == {"small": "gbm", "large": "deep"}
    assert expected_seconds("deep") > 5 * expected_seconds("linear")


def test_episode_durations_reach_the_advantage_extras():
    env = ExperimentEnv(seed=4)
    env.reset(LARGE)
    first = env.step(call("deep"))
    second = env.step(call("linear"))
    last = env.step("<answer>linear</answer>")
    assert last.info["duration"] == 0.0
    total = first.info["duration"] + second.info["duration"]
    assert total == pytest.approx(env.seconds)
    turns = [Turn(i, i + 1, "", "eos", info=r.info) for i, r in enumerate((first, second, last))]
    traj = Trajectory([0, 1, 2, 3], [0, 1, 1, 1], [0.0] * 4, 1, [], LARGE, 0, turns=turns)
    bare = Trajectory([0, 1], [0, 1], [0.0] * 2, 1, [], LARGE, 0, turns=[Turn(1, 2, "", "eos")])
    extras = turn_extras([traj, bare], 4, [[0.0] * 3, [0.0]])
    assert extras["durations"].tolist() == pytest.approx([total, 0.0])
