"""Agentic rewards: hand-computed values for each, the TRACE reference's monotone tightening and its
state round trip through the runner (what resume relies on)."""

from __future__ import annotations

import json
import math

import pytest

from ascent.rewards import REWARDS, RewardRunner
from ascent.rewards.agentic import Trace, eapo_turn_rewards, igpo_turn_rewards, token_f1
from ascent.rewards.meta_tags import tag_scores


def info(answer=None, supported=None, calls=0, retrieved=(), opened=()):
    out = {"num_tool_calls": calls, "docs_retrieved": list(retrieved), "docs_opened": list(opened)}
    if answer is not None:
        out["answer"] = answer
    if supported is not None:
        out["supported"] = supported
    return out


def call(name, **args):
    return f"<tool_call>{json.dumps({'name': name, 'arguments': args})}</tool_call>"


def test_answer_em_and_f1():
    em, f1 = REWARDS.get("answer_em"), REWARDS.get("answer_f1")
    infos = [info("The Silthar-Labs."), info("Silthar Works"), {}, None]
    texts = [None, None, ["<answer>nope</answer>"], None]
    comps = ["", "", "", "single turn <answer> silthar labs </answer>"]
    gold = ["Silthar Labs"] * 4
    assert em([""] * 4, comps, answer=gold, agent_info=infos, agent_turn_texts=texts) == [1.0, 0.0, 0.0, 1.0]
    assert f1([""] * 4, comps, answer=gold, agent_info=infos, agent_turn_texts=texts) == [1.0, 0.5, 0.0, 1.0]
    assert em([""], [""], answer=[None], agent_info=[info("x")]) == [None]
    assert em([""], ["no answer at all"], answer=["x"]) == [0.0]
    assert token_f1("w x y z", "y z v") == pytest.approx(2 * 0.5 * (2 / 3) / (0.5 + 2 / 3))
    assert token_f1("An Apple", "apple") == 1.0, "articles and case are normalised away"


def trace_batch(calls, correct):
    return dict(
        prompts=[""] * len(calls),
        completions=[""] * len(calls),
        answer=["A"] * len(calls),
        agent_info=[info("A" if ok else "B", calls=c) for c, ok in zip(calls, correct)],
    )


def test_trace_reward_values_and_monotone_reference():
    t = Trace(ref=3.0, rate=0.5, floor=1.0)
    # r = min(1, (ref + 1) / (c + 1)) for correct episodes, 0 for wrong ones
    assert t(**trace_batch([2, 4, 8, 0], [True, True, True, False])) == pytest.approx([1.0, 4 / 5, 4 / 9, 0.0])
    assert t.ref == 3.0, "the correct episodes' mean (14/3) is above the reference: it does not loosen"
    refs = [t.ref]
    for calls in ([6, 6], [1, 1], [9, 9], [0, 0], [5, 5]):
        t(**trace_batch(calls, [True, True]))
        refs.append(t.ref)
    assert refs == pytest.approx([3.0, 3.0, 2.0, 2.0, 1.0, 1.0]), (
        "ref <- max(floor, min(ref, (ref + mean) / 2)): only tightens, down to the floor"
    )


def test_trace_reference_initialisation():
    t = Trace(floor=0.0)
    assert t.ref is None
    out = t(**trace_batch([2, 4, 6], [True, True, False]))
    # ref = mean over correct = 3 before scoring: (3+1)/(2+1) -> 1, (3+1)/(4+1) = 0.8, wrong -> 0
    assert out == pytest.approx([1.0, 0.8, 0.0])
    assert t.ref == pytest.approx(3.0)
    fixed = Trace(ref=1.0, floor=1.0)
    assert fixed(**trace_batch([1, 3], [True, True])) == pytest.approx([1.0, 0.5])
    with pytest.raises(ValueError, match="rate"):
        Trace(rate=0.0)


def test_trace_warmup_scores_correctness_then_starts_the_reference():
    t = Trace(warmup=2, rate=0.5, floor=1.0)
    assert t(**trace_batch([4, 2, 0], [True, True, False])) == [1.0, 1.0, 0.0]
    assert t(**trace_batch([6, 6], [True, True])) == [1.0, 1.0] and t.ref is None, "no reference during the warm-up"
    # third batch: ref starts at its correct episodes' mean (3), then r = min(1, 4 / (c + 1))
    assert t(**trace_batch([1, 5, 2], [True, True, False])) == pytest.approx([1.0, 4 / 6, 0.0])
    assert t.ref == pytest.approx(3.0) and t.batches == 3
    with pytest.raises(ValueError, match="warmup"):
        Trace(warmup=-1)


def test_trace_state_survives_through_the_runner():
    a = RewardRunner(["answer_em", "trace(rate=1.0)"])
    b = RewardRunner(["answer_em", "trace(rate=1.0)"])
    assert a.fns[1] is not b.fns[1], "each runner owns its stateful reward"
    batches = [trace_batch([5, 7], [True, True]), trace_batch([2, 2], [True, False]), trace_batch([3, 1], [True, True])]

    def score(r, x):
        fields = [{"answer": g, "agent_info": i} for g, i in zip(x["answer"], x["agent_info"])]
        return r.score(x["prompts"], x["completions"], fields).rewards.tolist()

    score(a, batches[0])
    b.load_state_dict(a.state_dict())
    assert b.state_dict() == a.state_dict() == {"1:trace(rate=1.0)": {"ref": 6.0, "batches": 1}}
    for x in batches[1:]:
        assert score(a, x) == score(b, x)
    assert a.fns[1].ref == b.fns[1].ref == 2.0


def test_source_consistency():
    sc = REWARDS.get("source_consistency")
    texts = [
        ["<answer>X</answer><source>external</source>"],
        ["<answer>X</answer> <source>external</source>"],
        ["<answer>X</answer><source>internal</source>"],
        ["<answer>X</answer><source>Internal</source>"],
        ["<answer>X</answer>"],
        ["I give up"],
        ["<answer>X</answer><source>external</source>"],
    ]
    infos = [
        info("X", True),
        info("X", False),
        info("X", False),
        info("X", True),
        info("X", True),
        info(None, False),
        {"answer": "X"},
    ]
    assert sc([""] * 7, [""] * 7, agent_info=infos, agent_turn_texts=texts) == [1.0, 0.0, 1.0, 0.0, 0.0, 0.0, None]
    assert sc([""], [""], agent_info=[info("X", True)], agent_turn_texts=[["<answer>X</answer>"]], missing=0.5) == [0.5]


def test_citation_rubric_two_hops():
    cr, cg = REWARDS.get("citation_rubric"), REWARDS.get("c_grpo")
    ev, titles = ["doc-001", "doc-007"], ["Kalo Miran", "Silthar Labs"]
    seen = info("Velmor", calls=3, retrieved=["doc-001", "doc-003"], opened=["doc-007"])
    full = ["I found Silthar Labs", "<answer>Velmor</answer> <cite>doc-001, doc-007</cite>"]
    partial = ["<answer>Velmor</answer> <cite>doc-001 doc-009</cite>"]  # one seen doc + one unseen; no bridge named
    unseen = ["Silthar Labs <cite>doc-007</cite>", "<answer>Nobody</answer>"]
    last_hop = ["Silthar Labs", "<answer>Velmor</answer> <cite>doc-007</cite>"]  # hop 1 only: 1 of 2, connected
    unnamed = ["<answer>Velmor</answer> <cite>doc-001, doc-007</cite>"]  # both cited, the bridge never named
    wrong = ["I found Silthar Labs", "<answer>Nobody</answer> <cite>doc-001, doc-007</cite>"]  # hop 0 not connected
    texts = [full, partial, unseen, last_hop, unnamed, wrong]
    infos = [seen, seen, info("Nobody", retrieved=["doc-001"]), seen, seen, {**seen, "answer": "Nobody"}]
    kw = dict(
        answer=["Velmor"] * 6,
        evidence=[ev] * 6,
        evidence_titles=[titles] * 6,
        agent_info=infos,
        agent_turn_texts=texts,
    )
    # an item counts only when its entities are named, its document cited and seen, and it connects to the answer
    assert cr([""] * 6, [""] * 6, **kw) == pytest.approx([1.0, 0.0, 0.0, 0.5, 0.0, 0.0])
    assert cr([""], [""], evidence=[None]) == [None]
    # C-GRPO: (1 - a) o + a o R_rubric, the rubric gated by correctness
    assert cg([""] * 6, [""] * 6, alpha=0.3, **kw) == pytest.approx([1.0, 0.7, 0.0, 0.85, 0.7, 0.0])
    with pytest.raises(ValueError, match="alpha"):
        cg([""], [""], answer=["x"], alpha=2.0)


def test_evidence_recall():
    er = REWARDS.get("evidence_recall")
    out = er(
        [""] * 3,
        [""] * 3,
        evidence=[["a", "b", "c"], ["a"], []],
        agent_info=[info(retrieved=["a", "x"], opened=["c"]), info(), info()],
    )
    assert out[:2] == pytest.approx([2 / 3, 0.0]) and out[2] is None


def test_igpo_turn_rewards_and_total_gain():
    assert igpo_turn_rewards([0.1, 0.4, 0.3, None], [0.0, 0.0, 1.0]) == pytest.approx([0.3, -0.1, 1.0])
    assert igpo_turn_rewards([0.2, None], [0.5]) == [0.5], "a turn no observation followed keeps its step reward"
    total = REWARDS.get("igpo")
    assert total(["", ""], ["", ""], agent_answer_probs=[[0.1, 0.4, 0.3, None], [0.5]]) == pytest.approx([0.2, 0.0])
    with pytest.raises(ValueError, match="agent.turn_rewards=igpo"):
        total([""], [""])


def test_meta_tags():
    s = call("search", query="a")
    texts = [
        "<plan>search then open</plan><explore>" + s,
        "<explore>" + s,
        "<reflect>that failed</reflect>" + call("open", doc_id="d"),
        "<answer>A</answer>",
    ]
    infos = [
        {"tool_calls": 1, "tool_errors": 0},
        {"tool_calls": 1, "tool_errors": 1},
        {"tool_calls": 1, "tool_errors": 0},
        {"answer": "A"},
    ]
    # plan in turn 0 + success: 1; explore new call: 1; explore repeated call: -1; reflect after a tool error: 1
    assert tag_scores(texts, infos, success=True) == [1.0, 1.0, -1.0, 1.0]
    assert tag_scores(texts, infos, success=False) == [0.0, 1.0, -1.0, 1.0]
    assert tag_scores(["<reflect>hm</reflect>" + s, "<reflect/>"], [{"tool_calls": 1, "tool_errors": 0}, {}], True) == [
        0.0,
        0.0,
    ]
    mt = REWARDS.get("meta_tags")
    out = mt(
        ["", "", ""],
        ["", "", ""],
        answer=["A", "A", "A"],
        agent_info=[{"answer": "A"}, {"answer": "A"}, None],
        agent_turn_texts=[texts, ["<answer>A</answer>"], None],
        agent_turn_infos=[infos, [{}], None],
    )
    assert out[:2] == pytest.approx([(1 + 1 - 1 + 1) / 4, 0.0]) and out[2] is None


def test_round_discount():
    rd = REWARDS.get("round_discount")
    fields = dict(
        answer=["A", "A", "A", "A"],
        agent_info=[{"answer": "A"}, {"answer": "A"}, {"answer": "B"}, {}],
        agent_turns=[[(0, 1)], [(0, 1), (2, 3), (4, 5)], [(0, 1), (2, 3)], [(0, 1), (2, 3)]],
        agent_finish_reason=["done", "done", "done", "max_turns"],
    )
    assert rd([""] * 4, [""] * 4, gamma=0.5, **fields) == pytest.approx([1.0, 0.25, 0.0, 0.0])
    assert rd([""], ["<answer>A</answer>"], gamma=0.5, answer=["A"]) == [1.0], "single-turn rows: 0 rounds"
    f1 = rd(
        [""],
        [""],
        gamma=0.9,
        reward="answer_f1",
        answer=["x y"],
        agent_info=[{"answer": "x"}],
        agent_turns=[[(0, 1), (1, 2)]],
        agent_finish_reason=["done"],
    )
    assert f1 == pytest.approx([0.9 * (2 * 1 * 0.5 / 1.5)])
    with pytest.raises(ValueError, match="gamma"):
        rd([""], [""], gamma=0.0)


def test_eapo_turn_rewards_hand_values():
    # exploratory turns earn log q_{t+1} - log q_t; the task turn (kind 0) and a turn without observation earn 0
    got = eapo_turn_rewards([0.1, 0.4, 0.5, None], [1, 1, 0])
    assert got == pytest.approx([math.log(4.0), math.log(1.25), 0.0])
    assert eapo_turn_rewards([0.3, None, 0.9], [1, 1]) == [0.0, 0.0], "no observation after turn 0: no gain"
    # an observation that makes the gold answer less likely is penalised by the same log ratio
    assert eapo_turn_rewards([0.8, 0.2], [1]) == pytest.approx([math.log(0.25)])
    # floored probabilities keep the reward finite
    assert eapo_turn_rewards([0.0, 1.0], [1]) == pytest.approx([-math.log(1e-6)])


def test_eapo_reward_is_bounded_by_the_remaining_uncertainty():
    # r_t <= -log q_t: exploring when the answer is already clear earns (almost) nothing, exploring when it is
    # uncertain can earn much more; the sum over a chain of explorations telescopes to log q_last - log q_first
    assert eapo_turn_rewards([0.99, 1.0], [1])[0] == pytest.approx(-math.log(0.99))
    assert eapo_turn_rewards([0.01, 1.0], [1])[0] == pytest.approx(-math.log(0.01))
    probs = [0.05, 0.2, 0.1, 0.7]
    assert sum(eapo_turn_rewards(probs, [1, 1, 1])) == pytest.approx(math.log(0.7 / 0.05))
    with pytest.raises(ValueError, match="turns \\+ 1"):
        eapo_turn_rewards([0.1, 0.2], [1, 1])
