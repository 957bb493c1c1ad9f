"""PIBR (Lin et al. 2025, arXiv:2512.21024): programs that read each other's code, played in the sandbox; the unit
tests that reject broken code; iterated best response over code-reading programs reaching the optimum where plain
actions stay at a poor equilibrium; the LM operator's prompt."""

from __future__ import annotations

import pytest

from ascent.applications.program_br import (
    BR_ORACLES,
    GAMES,
    BRRequest,
    LMParams,
    MatrixGame,
    best_cell,
    constant,
    evaluate,
    pibr,
    prompt,
    reading,
)
from ascent.rewards.sandbox import bwrap_status
from ascent.typed import ConfigError

needs_sandbox = pytest.mark.skipif(not bwrap_status()[0], reason="bubblewrap is unavailable: model code never runs")


@needs_sandbox
def test_programs_read_each_other_and_are_scored_by_the_payoff_table():
    climbing = GAMES["climbing"]
    # player 1 reads player 0's code: it plays 0 against code that returns 0, else 1
    evs = evaluate(climbing, 0, [constant(0), constant(2)], reading(0, 0, 1))
    assert [e.actions for e in evs] == [(0, 0), (2, 1)]
    assert [e.utility for e in evs] == [11.0, 0.0]
    stag = GAMES["stag_hunt"]
    # the column player: hare against the row's stag gets 3, stag against the row's hare gets 0
    assert [evaluate(stag, 1, [constant(a)], constant(1 - a))[0].utility for a in (1, 0)] == [3.0, 0.0]


@needs_sandbox
@pytest.mark.parametrize(
    "source, failure",
    [
        ("def policy(opponent_source):\n    return 7\n", "not an action"),
        ("def policy(opponent_source):\n    return True\n", "not an action"),
        ("def strategy(opponent_source):\n    return 0\n", "on the opponent's code"),
        ("def policy(opponent_source):\n    return 1 / 0\n", "ZeroDivisionError"),
        ("def policy(opponent_source):\n    while True:\n        pass\n", "TimeoutError"),
        ("this is not python", "on the opponent's code"),
    ],
)
def test_broken_programs_fail_the_unit_tests_with_a_reason(source, failure):
    ev = evaluate(GAMES["penalty"], 0, [source], constant(0))[0]
    assert not ev.ok and ev.utility == -10.0
    assert any(failure in f for f in ev.failures), ev.failures


@needs_sandbox
def test_code_reading_best_responses_reach_the_optimum_where_plain_actions_stay_stuck():
    game = GAMES["penalty"]  # from (1, 1), payoff 2 each: no single player gains by switching action
    plain = pibr(game, BR_ORACLES.resolve("actions"), (1, 1), rounds=1)
    code = pibr(game, BR_ORACLES.resolve("scripted"), (1, 1), rounds=1)
    assert plain.welfare == [4.0, 4.0, 4.0]
    assert code.welfare == [4.0, 4.0, 20.0]  # player 0 writes a code-reading program, player 1 answers it
    assert "in opponent_source" in code.sources[0]


@needs_sandbox
def test_an_invalid_candidate_never_replaces_the_program():
    game = GAMES["coordination"]

    def written(request: BRRequest) -> list[str]:  # completions as a model writes them: prose, broken code
        return ["Sure! ```python\ndef policy(opponent_source):\n    return 9\n```", "I cannot do that."]

    res = pibr(game, written, (0, 0), rounds=1)
    assert res.accepted == 0 and res.valid == 0 and res.candidates == 4
    assert res.sources == [constant(0), constant(0)] and res.welfare == [2.0, 2.0, 2.0]


def test_best_cell_and_the_prompt_show_the_ego_its_own_payoffs():
    stag = GAMES["stag_hunt"]
    assert best_cell(stag, 0) == (0, 0) and best_cell(stag, 1) == (0, 0)
    text = prompt(BRRequest(stag, 1, constant(1), constant(0), "you got 3"))
    assert "you play 1, opponent plays 0: you get 3, opponent gets 0" in text
    assert "Feedback: you got 3" in text and text.count("```python") == 3  # two programs and the instruction


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda: MatrixGame("x", (((1, 0),), ((1, 0),)), ("a", "b")), "payoffs must be"),
        (lambda: LMParams(samples=0), "samples >= 1"),
    ],
)
def test_bad_settings_fail_with_one_clear_line(make, message):
    with pytest.raises(ConfigError, match=message):
        make()
