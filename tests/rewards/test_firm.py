"""FIRM's edit critics (ascent/rewards/firm.py) and their Base-and-Bonus combination (CME): the encoding, learning a
criterion from scored edits, the saved folder, the registered reward and CME's values against the plain sum."""

from __future__ import annotations

import random

import pytest
import torch

from ascent.rewards import firm
from ascent.rewards.runner import resolve_reward
from ascent.rewards.shaping import base_and_bonus
from ascent.typed import ConfigError

VOCAB = ["river", "stone", "light", "cloud", "green", "quiet"]


def _edits(rng: random.Random, n: int):
    """(source, instruction, output, execution, consistency) of edits of varied quality, scored exactly."""
    rows = []
    for _ in range(n):
        a, b = rng.sample(VOCAB, 2)
        src = [rng.choice([w for w in VOCAB if w != a]) for _ in range(4)]
        for i in rng.sample(range(4), rng.randint(1, 2)):
            src[i] = a
        pe, pc = rng.random(), rng.random()
        out = [
            (b if rng.random() < pe else w) if w == a else (w if rng.random() < pc else rng.choice(VOCAB)) for w in src
        ]
        tgt = [i for i, w in enumerate(src) if w == a]
        rest = [i for i, w in enumerate(src) if w != a]
        ex = sum(out[i] == b for i in tgt) / len(tgt)
        co = sum(out[i] == src[i] for i in rest) / len(rest)
        rows.append((" ".join(src), f"replace {a} with {b}", " ".join(out), ex, co))
    return rows


def test_encode_pads_cuts_and_maps_unknown_words():
    critic = firm.EditCritic(VOCAB, max_instruction=3, max_len=3)
    ids = critic.encode(["River stone"], ["replace river with stone"], ["stone stone light cloud"])
    unk, river, stone, light = 1, critic.index["river"], critic.index["stone"], critic.index["light"]
    assert ids.tolist() == [[river, stone, 0, stone, stone, light, unk, river, unk]]


def test_critic_learns_execution_from_scored_edits():
    rows = _edits(random.Random(0), 800)
    critic = firm.EditCritic(VOCAB, max_instruction=4, max_len=4, hidden=32)
    firm.fit_critic(critic, *[[r[k] for r in rows] for k in range(3)], [r[3] for r in rows], epochs=300)
    test = _edits(random.Random(1), 300)
    pred = critic.score(*[[r[k] for r in test] for k in range(3)])
    mae = sum(abs(p - r[3]) for p, r in zip(pred, test)) / len(test)
    mean = sum(r[3] for r in test) / len(test)
    base = sum(abs(mean - r[3]) for r in test) / len(test)
    assert mae < 0.5 * base  # well below predicting the mean
    right = critic.score(["river stone"], ["replace river with light"], ["light stone"])[0]
    wrong = critic.score(["river stone"], ["replace river with light"], ["river stone"])[0]
    assert right > 0.7 and wrong < 0.3


def test_saved_critic_scores_through_the_registered_reward_and_cme(tmp_path):
    torch.manual_seed(0)
    ex, co = firm.EditCritic(VOCAB, 4, 4, 8), firm.EditCritic(VOCAB, 4, 4, 8)
    pe = firm.save_critic(ex, tmp_path / "ex", "execution")
    pc = firm.save_critic(co, tmp_path / "co", "consistency")
    rex, rco = resolve_reward(f"edit_critic(path={str(pe)!r})"), resolve_reward(f"edit_critic(path={str(pc)!r})")
    fields = {"source": ["river stone", None], "instruction": ["replace river with light", "x"]}
    got = rex(["", ""], ["light stone", "y"], **fields)
    assert got[0] == pytest.approx(ex.score(["river stone"], ["replace river with light"], ["light stone"])[0])
    assert got[1] is None  # no source: no score
    e, c = got[0], rco([""], ["light stone"], **{k: v[:1] for k, v in fields.items()})[0]
    cme = base_and_bonus([""], ["light stone"], base=rex, bonus=rco, alpha=0.5, **{k: v[:1] for k, v in fields.items()})
    assert cme[0] == pytest.approx(e * (0.5 + 0.5 * c), abs=1e-6)


def test_cme_orders_a_damaging_edit_below_a_clean_one_where_the_sum_ties():
    # execution 1 with consistency 0 and execution 0 with consistency 1 tie under the sum (1 = 1);
    # CME (alpha 0.5) gives the failed edit 0 whatever its consistency, the damaging one 0.5, the clean one 1
    e, c = [1.0, 0.0, 1.0], [0.0, 1.0, 1.0]
    cme = base_and_bonus([""] * 3, ["a", "b", "c"], base=lambda p, o, **_: e, bonus=lambda p, o, **_: c, alpha=0.5)
    assert cme == [0.5, 0.0, 1.0]
    assert [x + y for x, y in zip(e, c)] == [1.0, 1.0, 2.0]


def test_bad_critic_folder_is_a_one_line_error(tmp_path):
    with pytest.raises(ConfigError, match="is not an edit critic"):
        firm.EditCriticReward(str(tmp_path))
    (tmp_path / firm.META_FILE).write_text('{"format": "other"}')
    with pytest.raises(ConfigError, match="not an ascent-edit-critic v1 manifest"):
        firm.load_critic(tmp_path)


def test_initial_weights_depend_on_the_seed_only():
    torch.manual_seed(1)
    a = firm.EditCritic(VOCAB, 4, 4, 8, seed=3)
    torch.manual_seed(2)  # a different global RNG state: the same weights
    b = firm.EditCritic(VOCAB, 4, 4, 8, seed=3)
    c = firm.EditCritic(VOCAB, 4, 4, 8, seed=4)
    sa, sb, sc = a.state_dict(), b.state_dict(), c.state_dict()
    assert all(torch.equal(sa[k], sb[k]) for k in sa)
    assert not all(torch.equal(sa[k], sc[k]) for k in sa)


# QMA: the plan critic (checklist items scored one by one), the prompt-free quality critic, and their combination.


def test_checklist_plans_the_toy_instruction():
    assert firm.checklist("Replace river with stone") == ["has stone where river", "no river"]
    assert firm.checklist("paint it red") == ["paint it red"]


def test_quality_critic_learns_a_repetition_the_pooled_critic_cannot_see():
    # quality = 1 - share of adjacent identical pairs: an interaction between positions
    rng = random.Random(0)

    def outs(n):
        rows = []
        for _ in range(n):
            w = [rng.choice(VOCAB) for _ in range(4)]
            for i in range(1, 4):
                if rng.random() < 0.3:
                    w[i] = w[i - 1]
            rows.append((" ".join(w), 1 - sum(w[i] == w[i + 1] for i in range(3)) / 3))
        return rows

    train, test = outs(800), outs(300)
    q = firm.QualityCritic(VOCAB, max_len=4, hidden=32)
    firm.fit_critic(q, [""] * len(train), [""] * len(train), [o for o, _ in train], [y for _, y in train], epochs=200)
    pooled = firm.EditCritic(VOCAB, max_instruction=1, max_len=4, hidden=32)
    firm.fit_critic(pooled, [""] * len(train), [""] * len(train), [o for o, _ in train], [y for _, y in train], 200)
    mean = sum(y for _, y in test) / len(test)
    base = sum(abs(mean - y) for _, y in test) / len(test)
    mae_q = sum(abs(p - y) for p, (_, y) in zip(q.score([""] * 300, [""] * 300, [o for o, _ in test]), test)) / 300
    mae_p = sum(abs(p - y) for p, (_, y) in zip(pooled.score([""] * 300, [""] * 300, [o for o, _ in test]), test))
    assert mae_q < 0.5 * base and mae_q < 0.5 * (mae_p / 300)


def test_plan_and_quality_critics_score_through_the_registry_and_qma(tmp_path):
    plan = firm.EditCritic(VOCAB + list(firm.PLAN_WORDS), 4, 4, 8, seed=1)
    quality = firm.QualityCritic(VOCAB, max_len=4, hidden=8, seed=2)
    pp = firm.save_critic(plan, tmp_path / "plan", "alignment_item")
    pq = firm.save_critic(quality, tmp_path / "quality", "quality")
    loaded, meta = firm.load_critic(pq)
    assert isinstance(loaded, firm.QualityCritic) and meta["arch"] == "quality"
    al = resolve_reward(f"plan_critic(path={str(pp)!r})")
    qu = resolve_reward(f"quality_critic(path={str(pq)!r})")
    fields = {"source": ["river stone"], "instruction": ["replace river with light"]}
    a = al([""], ["light stone"], **fields)[0]
    items = plan.score(["river stone"] * 2, ["has light where river", "no river"], ["light stone"] * 2)
    assert a == pytest.approx(sum(items) / 2, abs=1e-6)  # the mean of the checklist items' scores
    q = qu([""], ["light stone"])[0]
    assert q == pytest.approx(quality.score([""], [""], ["light stone"])[0], abs=1e-6)
    assert qu([""], ["light stone"], source=["anything"], instruction=["else"])[0] == pytest.approx(q)  # prompt-free
    qma = base_and_bonus([""], ["light stone"], base=al, bonus=qu, alpha=0.5, **fields)[0]
    assert qma == pytest.approx(a * (0.5 + 0.5 * q), abs=1e-6)  # the authors' ins * (0.5 + 0.5 quality)
