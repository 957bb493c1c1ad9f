"""RAPO's steerable step-level reward `rapo_step`: the turn classes on a hand-written episode, the reference values
of the reward with and without the gate, the cap, and the one-line errors."""

from __future__ import annotations

import pytest

from ascent.rewards import REWARDS, resolve_reward
from ascent.rewards.steerable import classify_turns


def call(name: str, **args: str) -> str:
    import json

    return f"<tool_call>{json.dumps({'name': name, 'arguments': args})}</tool_call>"


TEXTS = [
    call("search", query="Kalo Miran"),  # new lead, new lines: exploration
    call("search", query="Kalo Miran"),  # exact repeat: redundant
    call("search", query="Velmor Ltd"),  # a name the first result named, new lines: verification
    call("search", query="founders"),  # new lead but nothing new came back: redundant
    call("open", doc_id="doc-009"),  # a document listed earlier, new text: verification
    "<answer>Velmor Ltd</answer>",
]
OBS = [
    "<tool_response>\n[doc-003] Kalo Miran: works at Velmor Ltd\n</tool_response>",
    "<tool_response>\n[doc-003] Kalo Miran: works at Velmor Ltd\n</tool_response>",
    "<tool_response>\n[doc-009] Velmor Ltd: a company in Osk\n</tool_response>",
    "<tool_response>\n[doc-009] Velmor Ltd: a company in Osk\n</tool_response>",
    "<tool_response>\nVelmor Ltd is a company in Osk founded in 1950.\n</tool_response>",
    None,
]


def test_turn_classes():
    assert classify_turns(TEXTS, OBS) == [
        "exploration",
        "redundant",
        "verification",
        "redundant",
        "verification",
        None,
    ]
    assert classify_turns(["no call here"], ["Error: no tool call"]) == [None]


def score(spec: str, correct: bool, texts=TEXTS, obs=OBS) -> float:
    fn = resolve_reward(spec)
    return fn(["q"], ["c"], agent_turn_texts=[texts], agent_observation_texts=[obs], agent_info=[{"correct": correct}])[
        0
    ]


def test_reference_values_gate_and_cap():
    # 1 exploration, 2 verifications, 2 redundant: 0.1 + 0.2 - 0.4 = -0.1 when correct; -0.4 when wrong (gated)
    assert score("rapo_step", True) == pytest.approx(-0.1)
    assert score("rapo_step", False) == pytest.approx(-0.4)
    assert score("rapo_step(gated=false)", False) == pytest.approx(-0.1)
    # steering: verification worth 0.5, at most 1 counted; redundancy free
    assert score("rapo_step(verify=0.5,cap=1,redundant=0.0)", True) == pytest.approx(0.1 + 0.5)
    fn = resolve_reward("rapo_step")
    fn(
        ["q", "q"],
        ["c", "c"],
        agent_turn_texts=[TEXTS, TEXTS[-1:]],
        agent_observation_texts=[OBS, OBS[-1:]],
        agent_info=[{"correct": True}, {"correct": True}],
    )
    assert fn.metrics() == {
        "rapo_step/exploration_per_episode": 0.5,
        "rapo_step/verification_per_episode": 1.0,
        "rapo_step/redundant_per_episode": 1.0,
    }
    assert REWARDS.entry("rapo_step").provenance.fidelity == "reduced"


def test_bad_inputs_fail_in_one_line():
    with pytest.raises(ValueError, match="redundant must be <= 0"):
        resolve_reward("rapo_step(redundant=0.5)")
    with pytest.raises(ValueError, match="needs agent_turn_texts"):
        resolve_reward("rapo_step")(["q"], ["c"])
