"""Robust subtask learning (Jothimurugan et al. 2023, arXiv:2302.02984): the min-over-successors game value by hand
on the deterministic doors game, the average-case optimum losing in the worst case, min == mean when the adversary
has no choice, Q-learning against the adversary reaching the robust optimum, and clear errors on bad input."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from ascent.classic.robust_subtask import (
    SUBTASK_LEARNERS,
    SubtaskGame,
    SubtaskQParams,
    doors_game,
    policy_value,
    solve,
)

G = 0.8


def test_game_values_by_hand():
    """No slip: the robust optimum walks to the far door B (T1 and T2 both 3 steps on), a 6-step cycle with bonuses at
    steps 2 and 5; the average-case optimum takes the near door A, where the adversary sends it to T2, 7 steps by the
    detour T1 -> start -> B -> T2: a 9-step cycle with bonuses at steps 1 and 8."""
    game = doors_game(slip=0.0, gamma=G)
    q_min, q_mean = solve(game, "min"), solve(game, "mean")
    robust_value = (G**2 + G**5) / (1 - G**6)
    near_worst = (G + G**8) / (1 - G**9)
    assert q_min.max(-1)[0, game.start] == pytest.approx(robust_value, abs=1e-8)
    assert q_min[0, game.start].argmax() == 1 and q_mean[0, game.start].argmax() == 0  # road to B / road to A
    assert policy_value(game, q_min.argmax(-1)) == pytest.approx(robust_value, abs=1e-8)
    assert policy_value(game, q_mean.argmax(-1)) == pytest.approx(near_worst, abs=1e-8)
    # and the other way round: over random task sequences the average-case policy is the better one
    assert policy_value(game, q_mean.argmax(-1), "mean") > policy_value(game, q_min.argmax(-1), "mean")


def test_min_equals_mean_when_the_adversary_has_no_choice():
    game = doors_game()
    single = dataclasses.replace(game, successors=((1,), (0,), (0,)))
    assert np.allclose(solve(single, "min"), solve(single, "mean"))
    assert not np.allclose(solve(game, "min"), solve(game, "mean"))


def test_learning_against_the_adversary_reaches_the_robust_optimum():
    game = doors_game()
    optimum = policy_value(game, solve(game, "min").argmax(-1))
    robust_q = SUBTASK_LEARNERS.resolve("robust(episodes=300)")(game, seed=0)
    average_q = SUBTASK_LEARNERS.resolve("average(episodes=300)")(game, seed=0)
    assert policy_value(game, robust_q.argmax(-1)) == pytest.approx(optimum, abs=1e-6)
    assert policy_value(game, average_q.argmax(-1)) < optimum - 0.05


def test_bad_input_says_what_to_change():
    game = doors_game()
    with pytest.raises(ValueError, match="rows summing to 1"):
        SubtaskGame(game.P * 2, game.R, game.goals, game.successors)
    with pytest.raises(ValueError, match="successors must be a non-empty list"):
        SubtaskGame(game.P, game.R, game.goals, ((), (0,), (0,)))
    with pytest.raises(ValueError, match="road lengths must be >= 1"):
        doors_game(far=0)
    with pytest.raises(ValueError, match="lr must be in"):
        SubtaskQParams(lr=0.0)
    with pytest.raises(ValueError, match="aggregate must be"):
        solve(game, "max")
