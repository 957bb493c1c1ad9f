"""CSRO (Hennes, Li, Schultz & Lanctot 2026, arXiv:2603.10098): matches between programs in the sandbox by hand,
the meta-game's Nash mixture, broken programs scored as losses, and PSRO with code best responses lowering
exploitability where iterated best response to the latest policy cycles."""

from __future__ import annotations

import numpy as np
import pytest

from ascent.applications.code_psro import (
    CSRO_ORACLES,
    CSRORequest,
    csro_prompt,
    nash,
    payoffs,
    psro,
    reference_programs,
)
from ascent.rewards.sandbox import bwrap_status
from ascent.typed import ConfigError

needs_sandbox = pytest.mark.skipif(not bwrap_status()[0], reason="bubblewrap is unavailable: model code never runs")
ROCK, PAPER, BEAT_LAST = reference_programs()[0], reference_programs()[1], reference_programs()[4]


@needs_sandbox
def test_matches_by_hand():
    m, errors = payoffs([ROCK, PAPER, BEAT_LAST], [ROCK, PAPER], rounds=4)
    # beat-last opens with 0 (rock): vs rock it ties once then plays paper (+3 of 4); vs paper it loses once, then
    # plays scissors (+3 - 1 = 2 of 4)
    assert m.tolist() == [[0.0, -1.0], [1.0, 0.0], [0.75, 0.5]]
    assert errors == [None, None, None]


@needs_sandbox
def test_broken_programs_lose_every_round_and_say_why():
    bad = [
        "def policy(my_moves, their_moves):\n    return 'rock'\n",
        "def policy(my_moves, their_moves):\n    return their_moves[-1]\n",  # IndexError on the first move
        "def policy(:\n",
    ]
    m, errors = payoffs(bad, [ROCK], rounds=3)
    assert m.tolist() == [[-1.0], [-1.0], [-1.0]]
    assert "not 0, 1 or 2" in errors[0] and "IndexError" in errors[1] and "SyntaxError" in errors[2]
    m, errors = payoffs([ROCK], bad[:1], rounds=3)  # the opponent's fault: no score either way
    assert m.tolist() == [[0.0]] and errors == [None]


def test_nash_of_rock_paper_scissors_is_uniform_and_of_a_dominated_game_pure():
    rps = np.array([[0, -1, 1], [1, 0, -1], [-1, 1, 0]], dtype=float)
    assert nash(rps) == pytest.approx([1 / 3] * 3, abs=1e-6)
    assert nash(np.array([[0.0, -1.0], [1.0, 0.0]])) == pytest.approx([0.0, 1.0], abs=1e-6)


@needs_sandbox
def test_psro_with_code_best_responses_lowers_exploitability_where_iterated_best_response_cycles():
    oracle = CSRO_ORACLES.resolve("scripted")
    meta = psro(oracle, iterations=4, meta="nash")
    last = psro(oracle, iterations=4, meta="last")
    assert meta.exploitability[0] == 1.0 and last.exploitability[0] == 1.0  # rock loses every round to paper
    assert meta.exploitability[-1] < 0.6
    assert last.exploitability == [1.0] * 5
    assert meta.added == 4 and meta.valid == meta.candidates == 4 * len(reference_programs())


def test_the_prompt_shows_the_weighted_opponents():
    text = csro_prompt(CSRORequest((ROCK, PAPER), (0.25, 0.75), 12))
    assert text.index("Weight 0.75") < text.index("Weight 0.25") and "12 rounds" in text
    with pytest.raises(ConfigError, match="meta in"):
        psro(CSRO_ORACLES.resolve("scripted"), 1, meta="uniform")
