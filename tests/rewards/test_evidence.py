"""`evidence_rm`: evidence spans extracted, scored by another reward, normalised within each group by hand; missing
evidence, a stateful scorer's state, bad specs."""

from __future__ import annotations

import math

import pytest

from ascent.rewards.evidence import evidence_of, group_relative
from ascent.rewards.grounding import bm25_coverage
from ascent.rewards.runner import RewardRunner, resolve_reward
from ascent.typed import ConfigError

NEEDLE = "the vault code is 4512"
COMPLETIONS = [
    "<evidence>the vault code is 4512</evidence> 4512",  # the whole needle
    "<evidence>code 4512</evidence> 4512",  # part of it
    "4512",  # a lucky guess: no evidence
    "<evidence>the weather was mild</evidence> 17",  # wrong evidence
]


def test_group_relative_evidence_reward_by_hand():
    reward = resolve_reward("evidence_rm(scorer='source_similarity(source_field=needle)')")
    prompts = ["long context ... what is the vault code?"] * 4
    out = reward(prompts, COMPLETIONS, needle=[NEEDLE] * 4, group=[0] * 4)
    s = [1.0, bm25_coverage([NEEDLE], ["code 4512"])[0], 0.0, bm25_coverage([NEEDLE], ["the weather was mild"])[0]]
    mean = sum(s) / 4
    std = math.sqrt(sum((v - mean) ** 2 for v in s) / 4)
    assert out == pytest.approx([(v - mean) / (std + 1e-6) for v in s])
    assert out[0] > out[1] > out[3] > out[2]  # the whole needle, part of it, a wrong span, no evidence (lucky guess)
    assert reward.metrics()["evidence_rm/found_frac"] == 0.75


def test_groups_are_normalised_separately_and_a_flat_group_gets_zero():
    assert group_relative([2.0, 4.0, 5.0, 5.0], [0, 0, 1, 1], scale=0.5) == pytest.approx([-0.5, 0.5, 0.0, 0.0], 1e-5)
    assert evidence_of("no tags here", r"<evidence>(.*?)</evidence>") is None
    assert evidence_of("<e>x</e><e> </e>", r"<e>(.*?)</e>") == "x"


def test_in_the_runner_next_to_the_outcome():
    runner = RewardRunner(["exact_answer", "evidence_rm(scorer='source_similarity(source_field=needle)', scale=0.5)"])
    rows = [{"answer": "4512", "needle": NEEDLE, "group": 0}] * 2
    result = runner.score(["q"] * 2, ["<evidence>the vault code is 4512</evidence>4512", "4512"], rows)
    assert result.components[:, 1].tolist() == pytest.approx([0.5, -0.5], abs=1e-5)


def test_a_stateful_scorer_travels_in_the_state(tmp_path):
    reward = resolve_reward("evidence_rm(scorer=peer_consensus)")
    assert reward.state_dict()["scorer"]["calls"] == 0
    reward(["q", "q"], ["<evidence>a</evidence>", "<evidence>a</evidence>"], group=[0, 0])
    assert reward.state_dict()["scorer"]["calls"] == 1


@pytest.mark.parametrize(
    "spec, message",
    [
        ("evidence_rm", "scorer must name"),
        ("evidence_rm(scorer=exact_answer, pattern='<e>.*</e>')", "needs a group"),
        ("evidence_rm(scorer=exact_answer, pattern='(')", "not a regular expression"),
        ("evidence_rm(scorer=nope)", "unknown reward 'nope'"),
    ],
)
def test_bad_specs(spec, message):
    with pytest.raises((ConfigError, ValueError), match=message):
        resolve_reward(spec)
