"""EAPO's outcome-consistent co-evolution (`evidence_rm(outcome=...)`), its learnable scorer `evidence_lr`, the
`evidence_tree` explorer's evidence point, and the `needle` task."""

from __future__ import annotations

import random

import pytest

from ascent.config.schema import DataConfig
from ascent.rewards import resolve_reward
from ascent.rewards.evidence import evidence_nodes
from ascent.rewards.evidence_lr import EvidenceLR
from ascent.rollout.evidence_tree import EvidenceTreeParams, evidence_point
from ascent.tasks import load_task


def test_evidence_lr_update_by_hand():
    rm = EvidenceLR(ngram=1, lr=0.5, l2=0.0, buckets=1 << 20)
    assert rm(["a1 ?a"], ["a1"]) == [0.5]  # w = 0: no opinion
    rm.update(["a1 ?a"], ["a1"], [1.0])  # features b, e:a, e:1, q:a; gradient (0.5 - 1) on each: w = +0.25
    assert rm.score_one("a1 ?a", "a1") == pytest.approx(1 / (1 + 2.718281828459045 ** (-1.0)))
    assert rm.score_one("c1 ?c", "b1") == pytest.approx(1 / (1 + 2.718281828459045 ** (-0.5)))  # b, e:1 only
    state = rm.state_dict()
    again = EvidenceLR(ngram=1, lr=0.5, l2=0.0, buckets=1 << 20)
    again.load_state_dict(state)
    assert again.score_one("a1 ?a", "a1") == rm.score_one("a1 ?a", "a1")


def test_nodes_keep_only_outcome_consistent_evidence():
    ev = ["f9", "f9", "c4", "c4", "f9", None]
    out = [1.0, 0.0, 0.0, 0.0, 1.0, 1.0]
    keys = ["g", "g", "g", "g", "h", "h"]
    assert evidence_nodes(ev, out, keys, True) == [(2, 0.0), (4, 1.0)]
    assert evidence_nodes(ev, out, keys, False) == [(0, 0.5), (2, 0.0), (4, 1.0)]


def test_coevolution_learns_from_outcomes_and_reports_agreement():
    """The scorer starts without an opinion (reward 0 everywhere); after co-evolving on batches where the quoted
    needle is right and another pair is wrong, it scores the needle above a wrong pair on a new haystack, and the
    group-relative reward follows."""
    r = resolve_reward("evidence_rm(scorer=evidence_lr,outcome=answer_em)")
    rng = random.Random(0)
    for _ in range(30):
        prompts, comps, answers, groups = [], [], [], []
        for g in range(4):
            keys = rng.sample("abcdefgh", 4)
            vals = [str(rng.randrange(10)) for _ in keys]
            x = " ".join(k + v for k, v in zip(keys, vals)) + f" ?{keys[0]}"
            for j in range(4):
                e = keys[0] + vals[0] if j < 2 else keys[j] + vals[j]
                comps.append(f"<evidence>{e}</evidence><answer>{e[1]}</answer>")
                prompts.append(x), answers.append(vals[0]), groups.append(g)
        first = r(prompts, comps, answer=answers, group=groups)
    assert r.metrics()["evidence_rm/outcome_agreement"] > 0.9
    x = "p1 q2 r3 s4 ?r"
    got = r([x] * 2, ["<evidence>r3</evidence>", "<evidence>q2</evidence>"], answer=["3", "3"], group=[0, 0])
    assert got[0] > 0 > got[1]
    assert len(first) == 16


def test_coevolution_needs_a_scorer_that_learns():
    with pytest.raises(ValueError, match="cannot learn"):
        resolve_reward("evidence_rm(scorer=answer_em,outcome=answer_em)")


def test_evidence_point_on_the_needle_tokenizer():
    data = load_task(DataConfig(task="needle(num_rows=300)", num_eval=50), 0)
    tok = data.tokenizer
    ids = tok("<evidence>f9</evidence><answer>9</answer>", add_special_tokens=False)["input_ids"]
    assert evidence_point([tok.decode([t]) for t in ids], EvidenceTreeParams().close) == 4
    assert evidence_point([tok.decode([t]) for t in ids[:3]], "</evidence>") == 0


def test_needle_rows_and_teacher():
    data = load_task(DataConfig(task="needle(num_rows=400,pairs=6)", num_eval=50), 0)
    for row in data.train[:100]:
        pairs, question = row["prompt"].split(" ")[:-1], row["prompt"].split(" ")[-1]
        assert len(pairs) == 6 and row["needle"] in pairs and question == "?" + row["needle"][0]
        assert row["answer"] == row["needle"][1]
    rng, row = random.Random(0), data.train[0]
    taught = [data.teacher(row, rng) for _ in range(400)]
    right = sum(t.startswith(f"<evidence>{row['needle']}<") for t in taught) / len(taught)
    assert 0.4 < right < 0.6
    assert resolve_reward("answer_em")([row["prompt"]], [taught[0]], answer=[row["answer"]]) in ([0.0], [1.0])
