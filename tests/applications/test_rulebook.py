"""Rulebook-informed RL (Bogdoll et al. 2024, arXiv:2402.04168): the rule rewards by hand, the grid-driving world's
dynamics on scripted drives, and learning: the rulebook agent breaks fewer rules than the plain-reward agent and,
unlike the same rules without the exception, still gets past a stopped vehicle."""

from __future__ import annotations

import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

from ascent.applications.rulebook import (
    DRIVING_REWARDS,
    FORWARD,
    LEFT,
    RIGHT,
    WAIT,
    DrivingConfig,
    DrivingEvent,
    GridDriving,
    QLearningParams,
    RulebookParams,
    Situation,
    evaluate,
    held_out_situations,
    q_learning,
)
from ascent.typed import ConfigError


@pytest.mark.parametrize(
    "event, plain, rulebook, static",
    [
        # progress 1 - time 0.1 in the ego lane: no rule broken
        (DrivingEvent(1, 1, False, False, False), 0.9, 0.9, 0.9),
        # oncoming lane outside an exception: lane penalty 20 in full
        (DrivingEvent(1, 2, False, False, False), 0.9, 0.9 - 20, 0.9 - 20),
        # oncoming lane inside the exception: coefficient 0.1 -> 2
        (DrivingEvent(1, 2, False, False, True), 0.9, 0.9 - 2, 0.9 - 20),
        # shoulder inside the exception: off-road 40 * 0.1
        (DrivingEvent(1, 0, False, False, True), 0.9, 0.9 - 4, 0.9 - 40),
        # finish: + 10
        (DrivingEvent(1, 1, False, True, False), 10.9, 10.9, 10.9),
        # collision while waiting: - 60 - 0.1
        (DrivingEvent(0, 1, True, False, False), -60.1, -60.1, -60.1),
    ],
)
def test_rule_rewards_by_hand(event, plain, rulebook, static):
    got = [DRIVING_REWARDS.resolve(n)(event) for n in ("plain", "rulebook", "static_rulebook")]
    assert got == pytest.approx([plain, rulebook, static])


def drive(env: GridDriving, situation: Situation, actions: list[int]):
    env.reset(seed=0, options={"situation": situation})
    out = []
    for a in actions:
        _, r, term, trunc, info = env.step(a)
        out.append((r, info["event"], info["violation"]))
        if term or trunc:
            break
    return out


def test_passing_a_stopped_vehicle_is_one_exception_step_and_no_violation():
    env = GridDriving("rulebook")  # length 14, activation 2
    steps = drive(env, Situation("stopped", stopped=6), [FORWARD] * 5 + [LEFT, RIGHT] + [FORWARD] * 6)
    events = [e for _, e, _ in steps]
    assert events[-1].finished and not any(e.collision for e in events)
    assert [e.row for e in events[4:8]] == [1, 2, 1, 1]  # beside the stopped vehicle at column 6 in row 2
    assert [e.exception for e in events[3:7]] == [True, True, True, False]  # columns 4, 5, 6 then 7
    assert sum(v for _, _, v in steps) == 0
    assert steps[5][0] == pytest.approx(1 - 0.1 - 0.1 * 20)  # the one step in the oncoming lane, scaled down
    plain = [r for r, _, _ in drive(GridDriving("plain"), Situation("stopped", stopped=6), [FORWARD] * 5 + [LEFT])]
    assert plain[-1] == pytest.approx(0.9)


def test_collisions_end_the_episode():
    env = GridDriving("plain")
    hit = drive(env, Situation("stopped", stopped=3), [FORWARD] * 5)
    assert len(hit) == 3 and hit[-1][1].collision and hit[-1][0] == pytest.approx(1 - 0.1 - 60)
    # the oncoming car at column 4 moves 1 left per step; the ego enters row 2 at column 1 (car now at 3), waits:
    # the car reaches column 2, then 1 (the ego's cell)
    car = drive(env, Situation("clear", oncoming=4), [LEFT, WAIT, WAIT, WAIT])
    assert [e.collision for _, e, _ in car] == [False, False, True]
    # swapping cells head-on is a collision too: ego (1, 2) -> (2, 2) while the car goes 2 -> 1
    swap = drive(env, Situation("clear", oncoming=3), [LEFT, FORWARD])
    assert swap[-1][1].collision
    # the slow lead vehicle moves every second step: driving on at full speed runs into it
    slow = drive(env, Situation("slow", lead=2), [FORWARD] * 4)
    assert slow[-1][1].collision and len(slow) == 3


def test_violations_outside_the_exception_are_counted():
    steps = drive(GridDriving("rulebook"), Situation("clear"), [RIGHT, FORWARD, LEFT, LEFT, RIGHT])
    assert [e.row for _, e, _ in steps] == [0, 0, 1, 2, 1]
    assert [v for _, _, v in steps] == [True, True, False, True, False]
    assert [r for r, _, _ in steps][:2] == pytest.approx([0.9 - 40] * 2)


def test_the_environment_passes_gymnasiums_checker_and_rejects_bad_actions():
    env = GridDriving()
    check_env(env, skip_render_check=True)
    env.reset(seed=0)
    with pytest.raises(ValueError, match="action must be one of"):
        env.step(7)


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda: DrivingConfig(length=5), "need length >= 8"),
        (lambda: DrivingConfig(p_situation=(0.5, 0.5, 0.5)), "p_situation"),
        (lambda: RulebookParams(coeff=2.0), "coeff must be in"),
        (lambda: RulebookParams(lane=-1.0), "weights must be >= 0"),
        (lambda: QLearningParams(alpha=0.0), "alpha"),
    ],
)
def test_bad_settings_fail_with_one_clear_line(make, message):
    with pytest.raises(ConfigError, match=message):
        make()


def test_rulebook_agent_breaks_fewer_rules_and_still_passes_stopped_vehicles():
    tests = held_out_situations(120, 1)
    scores = {
        name: evaluate(q_learning(GridDriving(name), 0, QLearningParams(episodes=1500)), tests)
        for name in ("plain", "rulebook", "static_rulebook")
    }
    plain, rule, static = scores["plain"], scores["rulebook"], scores["static_rulebook"]
    assert rule.violations < 0.25 * plain.violations and plain.violations > 1
    assert rule.by_situation["stopped"]["success"] > 0.9
    assert static.by_situation["stopped"]["success"] < 0.5  # no exception: it stays behind the stopped vehicle
    assert rule.exception_steps > 0 and static.exception_steps == 0
    assert np.isclose(rule.collision, 0.0, atol=0.05)
