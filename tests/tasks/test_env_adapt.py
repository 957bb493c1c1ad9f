"""RLAnything's environment adaptation (ascent/tasks/env_adapt.py) and the addition task's variant generator:
variants one carry harder / easier, the authors' thresholds and promotion rule, the queue, exact resume."""

from __future__ import annotations

import random

import pytest
import torch

from ascent.data.samplers import SAMPLERS, SamplerContext
from ascent.tasks.addition import carries, sum_variant
from ascent.tasks.env_adapt import EnvAdaptParams, accepted


def sums(pairs):
    return [{"prompt": f"{a}+{b}=", "answer": str(a + b), "a": a, "b": b} for a, b in pairs]


def test_sum_variant_moves_one_carry_and_keeps_the_digits():
    rng = random.Random(0)
    for a, b in [(12, 34), (17, 25), (58, 67), (40, 50), (99, 11)]:
        row = sums([(a, b)])[0]
        for harder in (True, False):
            new = sum_variant(row, harder, rng)
            want = carries(a, b) + (1 if harder else -1)
            if want < 0 or want > 2:
                assert new is None
                continue
            assert new is not None and carries(new["a"], new["b"]) == want
            assert len(str(new["a"])) == 2 and len(str(new["b"])) == 2
            assert new["answer"] == str(new["a"] + new["b"]) and new["prompt"] == f"{new['a']}+{new['b']}="
            assert (new["a"] != a) + (new["b"] != b) == 1  # one operand changed
    assert sum_variant({"prompt": "1+2=3?", "answer": "1", "a": 1, "b": 2, "candidate": 3}, True, rng) is None


def test_promotion_rule_is_the_authors():
    assert accepted(True, 1.0, 0.2, 0.2, 0.8) and not accepted(True, 1.0, 0.19, 0.2, 0.8)
    assert not accepted(True, 0.8, 0.8, 0.2, 0.8)  # harder must lower the accuracy
    assert accepted(False, 0.0, 0.8, 0.2, 0.8) and not accepted(False, 0.0, 0.81, 0.2, 0.8)
    assert not accepted(False, 0.1, 0.1, 0.2, 0.8) and not accepted(True, 0.5, 0.0, 0.0, 0.8)  # after = 0: never


def make(rows, **kw):
    piece = SAMPLERS.resolve("env_adapt" + (f"({', '.join(f'{k}={v}' for k, v in kw.items())})" if kw else ""))
    return piece(SamplerContext(rows, seed=1, samples_per_prompt=4))


def observe(s, groups):
    rows = torch.tensor([r for r, xs in groups for _ in xs])
    rewards = torch.tensor([x for _, xs in groups for x in xs])
    s.observe(rows, rewards, torch.ones(len(rows), dtype=torch.bool))


def test_sampler_adds_variants_draws_and_judges_them():
    rows = sums([(17, 25), (19, 23), (28, 14), (36, 47), (15, 16), (29, 31)])  # one carry each: both ways exist
    s = make(rows, share=0.5)
    first = s.next(4).indices
    assert len(set(first)) == 4 and max(first) < 6
    a, b, c, d = first
    # acc 1.0 -> harder, 0.0 -> easier, 0.5 and 0.75 -> nothing (the authors' 0.8 / 0.2)
    observe(s, [(a, [1.0] * 4), (b, [0.0] * 4), (c, [1.0, 0.0, 1.0, 0.0]), (d, [1.0, 1.0, 1.0, 0.0])])
    made = [i for i in range(6, len(rows))]
    info = {i: s.info[i] for i in made}
    assert sorted((v["parent"], v["harder"], v["pre"]) for v in info.values()) == sorted(
        [(a, True, 1.0), (b, False, 0.0)]
    )
    for i, v in info.items():
        assert carries(rows[i]["a"], rows[i]["b"]) == carries(rows[v["parent"]]["a"], rows[v["parent"]]["b"]) + (
            1 if v["harder"] else -1
        )
    draw = s.next(4).indices
    assert draw[:2] == made[:2] and max(draw[2:]) < 6  # half the draw from the queue, oldest first
    assert s.metrics()["sampler/env_variants_drawn"] == 2.0
    hard = [i for i in made[:2] if info[i]["harder"]][0]
    # a harder variant whose accuracy fell from 1.0 to 0.5 is accepted; one at 0.0 would have been rejected
    observe(s, [(hard, [1.0, 0.0, 1.0, 0.0])])
    assert s.counts["accepted"] == 1 and hard not in s.dead
    other = [i for i in made[:2] if i != hard][0]
    observe(s, [(other, [0.0] * 4)])
    assert s.counts["rejected"] == 1 and other in s.dead
    # an accepted variant is adapted again like any task
    before = len(rows)
    observe(s, [(hard, [1.0] * 4)])
    assert len(rows) in (before, before + 1) and s.counts["accepted"] == 1


def test_sampler_state_restores_the_variants():
    rows = sums([(12, 34), (17, 25), (40, 50), (21, 32)])
    s = make(rows, share=1.0)
    draw = s.next(4).indices
    observe(s, [(i, [1.0] * 4) for i in draw])
    state = s.state_dict()
    rows2 = sums([(12, 34), (17, 25), (40, 50), (21, 32)])
    t = make(rows2, share=1.0)
    t.load_state_dict(state)
    assert rows2 == rows and t.next(4).indices == s.next(4).indices


def test_params_are_checked():
    with pytest.raises(ValueError, match="low < high"):
        EnvAdaptParams(low=0.8, high=0.2)
    with pytest.raises(ValueError, match="unknown generator"):
        EnvAdaptParams(generator="nope")
