"""The label-free constraint-wise reward model (ascent/rewards/constraint_rm.py, Ren et al. 2025): features by hand,
the pseudo-label construction, learning from pseudo-labels alone, the saved folder and the registered reward."""

from __future__ import annotations

import math
import random

import pytest
import torch

from ascent.rewards import constraint_rm as crm
from ascent.rewards.constraints import check
from ascent.rewards.runner import resolve_reward
from ascent.typed import ConfigError

WORDS = ["river", "stone", "light", "cloud"]


def test_pair_features_by_hand():
    f = crm.pair_features({"type": "starts_with", "value": "River"}, "river of stone, Light")
    assert f[:3] == [1.0, 1.0, 0.0]  # occurs, starts, does not end (case folded)
    counts = f[3 : 3 + 2 * len(crm.THRESHOLDS)]
    assert counts == [0.0] * len(counts)  # no number in the constraint: no count indicators
    assert f[-5:] == [1.0, 1.0, 1.0, 0.0, 1.0]  # comma, an upper-case letter, a lower-case letter, not empty, bias
    g = crm.pair_features({"type": "max_words", "value": 3}, "a b c d e")
    words = g[3 : 3 + len(crm.THRESHOLDS)]
    # 5 words - 3 = 2: the indicators "count - value >= t" hold for t <= 2
    assert words == [float(t <= 2) for t in crm.THRESHOLDS]


def test_pseudo_labels_grow_the_instruction_one_constraint_at_a_time():
    c1, c2 = {"type": "contains", "value": "river"}, {"type": "no_commas"}
    asked = []

    def respond(cs):
        asked.append(list(cs))
        return f"answer{len(cs)}"

    cw, hol = crm.pseudo_labels([[c1, c2]], respond)
    assert asked == [[], [c1], [c1, c2]]  # every prefix answered once
    assert cw == [(c1, "answer1", 1), (c1, "answer0", 0), (c2, "answer2", 1), (c2, "answer1", 0)]
    assert hol == [([c1], "answer1", 1), ([c1], "answer0", 0), ([c1, c2], "answer2", 1), ([c1, c2], "answer1", 0)]


def _respond(rng: random.Random):
    """A responder that follows each asked constraint with probability 0.6, otherwise writes anything."""

    def respond(cs):
        words = [rng.choice(WORDS) for _ in range(rng.randint(1, 6))]
        for c in cs:
            if rng.random() < 0.6:
                if c["type"] == "contains":
                    words.insert(rng.randrange(len(words) + 1), c["value"])
                elif c["type"] == "not_contains":
                    words = [w for w in words if w != c["value"]] or ["stone" if c["value"] != "stone" else "light"]
                elif c["type"] == "max_words":
                    words = words[: c["value"]]
        return " ".join(words)

    return respond


def _instructions(rng: random.Random, n: int):
    pool = [{"type": t, "value": w} for t in ("contains", "not_contains") for w in WORDS]
    pool += [{"type": "max_words", "value": v} for v in (2, 3)]
    out = []
    while len(out) < n:
        cs = rng.sample(pool, 2)
        if not {c["value"] for c in cs if c["type"] == "contains"} & {
            c["value"] for c in cs if c["type"] == "not_contains"
        }:
            out.append(cs)
    return out


def test_classifier_learns_the_checkers_from_pseudo_labels_alone():
    torch.manual_seed(0)
    rng = random.Random(0)
    cw, _ = crm.pseudo_labels(_instructions(rng, 300), _respond(rng))
    wrong = sum(lab != check(y, c) for c, y, lab in cw) / len(cw)
    assert wrong > 0.2  # the labels are noisy: a checker would disagree with many of them
    model = crm.ConstraintClassifier()
    crm.fit(model, [c for c, _, _ in cw], [y for _, y, _ in cw], [lab for *_, lab in cw])
    rng = random.Random(1)
    test = [(c, _respond(rng)(cs if rng.random() < 0.5 else [])) for cs in _instructions(rng, 200) for c in cs]
    probs = model.prob([c for c, _ in test], [y for _, y in test])
    agree = sum((p > 0.5) == check(y, c) for p, (c, y) in zip(probs, test)) / len(test)
    assert agree > 0.85  # far above its noisy labels' own agreement (1 - wrong)
    assert agree > 1 - wrong + 0.1


def test_holistic_logit_is_the_sum_of_the_constraint_logits():
    torch.manual_seed(0)
    hol = crm.HolisticClassifier()
    hol.inner.weight.data.normal_()
    cs = [{"type": "contains", "value": "river"}, {"type": "max_words", "value": 3}]
    whole = hol.logits([cs], ["river stone"])
    parts = hol.inner.logits(cs, ["river stone"] * 2)
    assert torch.allclose(whole, parts.sum().reshape(1))


def test_saved_folder_scores_through_the_registered_reward(tmp_path):
    model = crm.ConstraintClassifier()
    torch.manual_seed(0)
    model.weight.data.normal_()
    crm.save(model, tmp_path / "rm", {"examples": 0})
    cs = [{"type": "contains", "value": "river"}, {"type": "no_commas"}]
    probs = model.prob(cs, ["the river, here"] * 2)
    mean = resolve_reward(f"constraint_rm(path={str(tmp_path / 'rm')!r})")
    prod = resolve_reward(f"constraint_rm(path={str(tmp_path / 'rm')!r}, aggregate='all')")
    out = mean(["", ""], ["the river, here", "x"], constraints=[cs, []])
    assert out[0] == pytest.approx(sum(probs) / 2, abs=1e-6) and out[1] is None
    assert prod([""], ["the river, here"], constraints=[cs])[0] == pytest.approx(math.prod(probs), abs=1e-6)


def test_bad_folder_and_aggregate_are_one_line_errors(tmp_path):
    with pytest.raises(ConfigError, match="is not a constraint reward model"):
        crm.ConstraintRewardModel(str(tmp_path))
    crm.save(crm.ConstraintClassifier(), tmp_path / "rm")
    with pytest.raises(ConfigError, match="aggregate must be"):
        crm.ConstraintRewardModel(str(tmp_path / "rm"), aggregate="max")
    with pytest.raises(ValueError, match="unknown constraint type 'shout'"):
        crm.ConstraintClassifier().prob([{"type": "shout"}], ["x"])
