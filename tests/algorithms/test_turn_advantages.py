"""Turn-level advantage estimators: tree (TreeOPSD), progress (SPA), turn_feedback (ours), explore_group (EAPO).

Batches are built from trajectories given as lists of turn texts: the prefix hash of turn t is a hash of
the texts up to t, while the slow references compare the texts themselves (the definition, not the hash).
Each estimator: hand values, a slow loop reference on random branching batches, the property the paper
relies on, invalid samples, tokens outside turns, missing extras.
"""

from __future__ import annotations

import math
import random
import re
import zlib

import pytest
import torch

from ascent.algorithms import ADVANTAGES, AdvantageInput
from ascent.algorithms.turn_advantages import (
    ExploreGroupParams,
    ProgressParams,
    TreeParams,
    TurnFeedbackParams,
    progress_contributions,
    tree_values,
)
from ascent.config import load_config
from ascent.config.schema import AlgorithmConfig
from ascent.typed import ConfigError

CFG = AlgorithmConfig()
RAW = TreeParams(normalize=False)
"""Tree credit without the std division."""
TURN = ("tree", "progress", "turn_feedback", "explore_group")
TOK = 2
"""Sampled tokens per turn; each turn is followed by one observation token, and a row starts with one prompt token."""


def make_batch(trajs, rewards, groups=None, valid=None, kinds=None, feedback=None) -> AdvantageInput:
    """trajs[i] = list of turn texts. Layout per row: 1 prompt token, then per turn TOK sampled tokens and
    1 observation token; padding after. kinds / feedback: per-turn lists (defaults: exploratory turns,
    then a task turn last; feedback NaN)."""
    n, m = len(trajs), max(len(t) for t in trajs)
    width = 1 + (TOK + 1) * m + 1
    turn_index = torch.full((n, width), -1, dtype=torch.long)
    mask = torch.zeros(n, width)
    prefix = torch.full((n, m), -1, dtype=torch.long)
    kind = torch.full((n, m), -1, dtype=torch.long)
    fb = torch.full((n, m), float("nan"))
    for i, texts in enumerate(trajs):
        for t, _ in enumerate(texts):
            start = 1 + (TOK + 1) * t
            turn_index[i, start : start + TOK] = t
            mask[i, start : start + TOK] = 1.0
            prefix[i, t] = zlib.crc32("\x00".join(texts[: t + 1]).encode())
            kind[i, t] = kinds[i][t] if kinds else int(t < len(texts) - 1)
            if feedback is not None:
                fb[i, t] = feedback[i][t]
    r = torch.tensor(rewards, dtype=torch.float32)
    v = ~torch.isnan(r) if valid is None else torch.tensor(valid, dtype=torch.bool)
    g = torch.zeros(n, dtype=torch.long) if groups is None else torch.tensor(groups, dtype=torch.long)
    extras = {"turn_index": turn_index, "turn_prefix": prefix, "turn_kind": kind, "turn_rewards": fb}
    return AdvantageInput(rewards=r, valid=v, group_index=g, mask=mask, extras=extras)


def run(spec, inp, params=None):
    """The estimator of `spec` (`name` or `name(key=value, ...)`, resolved by the registry), or `name` with
    `params` (a params instance) passed directly."""
    if params is not None:
        return ADVANTAGES.get(spec)(inp, CFG, params=params)
    return ADVANTAGES.resolve(spec)(inp, CFG)


def per_turn(adv: torch.Tensor, inp: AdvantageInput) -> list[list[float]]:
    """(N, T) token advantages -> per row, the advantage of each turn (checking all its tokens agree)."""
    out = []
    for i in range(adv.shape[0]):
        row = []
        for t in range(int(inp.extras["turn_index"][i].max()) + 1):
            vals = adv[i][inp.extras["turn_index"][i] == t]
            assert torch.all(vals == vals[0]), "tokens of one turn must share its advantage"
            row.append(float(vals[0]))
        out.append(row)
    return out


# ---------------------------------------------------------------------------------------------------------
# slow references
# ---------------------------------------------------------------------------------------------------------
def group_std(i, rewards, groups, valid):
    vals = [rewards[j] for j in range(len(rewards)) if groups[j] == groups[i] and valid[j]]
    mu = sum(vals) / len(vals)
    if len(vals) < 2 or all(x == vals[0] for x in vals):
        return 0.0
    return math.sqrt(sum((x - mu) ** 2 for x in vals) / (len(vals) - 1))


def node(i, depth, trajs, rewards, groups, valid):
    """(mean outcome, count) of the valid trajectories of i's group whose first depth+1 turns equal i's
    (depth -1: root)."""
    key = trajs[i][: depth + 1]
    members = [
        j
        for j in range(len(trajs))
        if groups[j] == groups[i] and valid[j] and len(trajs[j]) > depth and trajs[j][: depth + 1] == key
    ]
    return sum(rewards[j] for j in members) / len(members), len(members)


def tree_ref(trajs, rewards, groups, valid, normalize, eps=CFG.std_eps):
    out = []
    for i, texts in enumerate(trajs):
        if not valid[i]:
            out.append([0.0] * len(texts))
            continue
        sd = group_std(i, rewards, groups, valid)
        row = [
            node(i, t, trajs, rewards, groups, valid)[0] - node(i, t - 1, trajs, rewards, groups, valid)[0]
            for t in range(len(texts))
        ]
        out.append([0.0 if sd == 0 else a / (sd + eps if normalize else 1.0) for a in row])
    return out


def progress_ref(trajs, rewards, groups, valid, k):
    out = []
    for i, texts in enumerate(trajs):
        if not valid[i]:
            out.append([0.0] * len(texts))
            continue
        prev, row = node(i, -1, trajs, rewards, groups, valid)[0], []
        for t in range(len(texts)):
            m, n = node(i, t, trajs, rewards, groups, valid)
            p = rewards[i] if t == len(texts) - 1 else (n * m + k * prev) / (n + k)
            row.append(p - prev)
            prev = p
        out.append(row)
    return out


def grpo_seq_ref(rewards, groups, valid, eps=CFG.std_eps):
    out = []
    for i in range(len(rewards)):
        vals = [rewards[j] for j in range(len(rewards)) if groups[j] == groups[i] and valid[j]]
        out.append(
            0.0 if not valid[i] else (rewards[i] - sum(vals) / len(vals)) / (group_std(i, rewards, groups, valid) + eps)
        )
    return out


def turn_feedback_ref(feedback, rewards, groups, valid, lam, tau):
    base = grpo_seq_ref(rewards, groups, valid)
    out = []
    for i, f in enumerate(feedback):
        known = [x for x in f if not math.isnan(x)]
        f = [sum(known) / len(known) if math.isnan(x) and known else (0.0 if math.isnan(x) else x) for x in f]
        s = (base[i] > 0) - (base[i] < 0)
        e = [math.exp(s * x / tau) for x in f]
        w = [(1 - lam) + lam * len(f) * x / sum(e) for x in e]
        out.append([base[i] * x for x in w])
    return out


def pool_of(values, kinds, groups, valid, i, k):
    """values[j][u] of every turn of kind k in the valid trajectories of trajectory i's group."""
    return [
        values[j][u]
        for j in range(len(kinds))
        if groups[j] == groups[i] and valid[j]
        for u in range(len(kinds[j]))
        if kinds[j][u] == k
    ]


def explore_ref(kinds, feedback, rewards, groups, valid, coef, eps=CFG.std_eps):
    ret = [[rewards[i] + coef * (0.0 if math.isnan(x) else x) for x in f] for i, f in enumerate(feedback)]
    out = [[0.0] * len(f) for f in feedback]
    for i, row in enumerate(kinds):
        for t, k in enumerate(row):
            if not valid[i] or k < 0:
                continue
            pool = pool_of(ret, kinds, groups, valid, i, k)
            mu = sum(pool) / len(pool)
            sd = (
                0.0
                if len(pool) < 2 or all(x == pool[0] for x in pool)
                else math.sqrt(sum((x - mu) ** 2 for x in pool) / (len(pool) - 1))
            )
            out[i][t] = 0.0 if sd == 0 else (ret[i][t] - mu) / (sd + eps)
    return out


def random_batch(seed, groups=3, per_group=5, max_turns=4, alphabet="ab"):
    """Trajectories whose turns are drawn from a tiny alphabet, so groups branch and share prefixes."""
    rng = random.Random(seed)
    trajs, rewards, gidx, valid, kinds, fb = [], [], [], [], [], []
    for g in range(groups):
        for _ in range(per_group):
            k = rng.randint(1, max_turns)
            trajs.append([rng.choice(alphabet) for _ in range(k)])
            rewards.append(float(rng.choice([0.0, 0.5, 1.0])))
            gidx.append(g)
            valid.append(rng.random() > 0.15)
            kinds.append([rng.choice([0, 1]) for _ in range(k)])
            fb.append([rng.choice([0.0, 1.0, -1.0, float("nan")]) for _ in range(k)])
    return trajs, rewards, gidx, valid, kinds, fb


# hand example: A, B, C share turn "s1"; A, B share "s2"; D branches at once. Root value 1/2.
HAND_TRAJS = [["s1", "s2", "x"], ["s1", "s2", "y"], ["s1", "s3", "z"], ["s4", "w"]]
HAND_REWARDS = [1.0, 0.0, 1.0, 0.0]


# ---------------------------------------------------------------------------------------------------------
# tree (TreeOPSD)
# ---------------------------------------------------------------------------------------------------------
def test_tree_hand_values():
    inp = make_batch(HAND_TRAJS, HAND_REWARDS)
    values = tree_values(inp)
    expect_values = [[2 / 3, 1 / 2, 1.0], [2 / 3, 1 / 2, 0.0], [2 / 3, 1.0, 1.0], [0.0, 0.0, math.nan]]
    assert torch.allclose(values, torch.tensor(expect_values, dtype=torch.float64), equal_nan=True)
    adv = per_turn(run("tree", inp, RAW), inp)
    expect = [[1 / 6, -1 / 6, 1 / 2], [1 / 6, -1 / 6, -1 / 2], [1 / 6, 1 / 3, 0.0], [-1 / 2, 0.0]]
    for got, want in zip(adv, expect):
        assert got == pytest.approx(want, abs=1e-6)
    sd = math.sqrt(1 / 3)  # std of (1, 0, 1, 0)
    for got, want in zip(per_turn(run("tree", inp), inp), expect):
        assert got == pytest.approx([w / (sd + CFG.std_eps) for w in want], abs=1e-6)


@pytest.mark.parametrize("normalize", [False, True])
@pytest.mark.parametrize("seed", range(4))
def test_tree_matches_slow_loop(seed, normalize):
    trajs, rewards, groups, valid, _, _ = random_batch(seed)
    inp = make_batch(trajs, rewards, groups, valid)
    got = per_turn(run("tree", inp, TreeParams(normalize=normalize)), inp)
    for g, w in zip(got, tree_ref(trajs, rewards, groups, valid, normalize)):
        assert g == pytest.approx(w, abs=1e-5)


@pytest.mark.parametrize("seed", range(3))
def test_tree_values_are_means_of_backed_up_outcomes(seed):
    trajs, rewards, groups, valid, _, _ = random_batch(seed)
    values = tree_values(make_batch(trajs, rewards, groups, valid))
    for i, texts in enumerate(trajs):
        for t in range(len(texts)):
            want = node(i, t, trajs, rewards, groups, valid)[0] if valid[i] else math.nan
            assert float(values[i, t]) == pytest.approx(want, abs=1e-12, nan_ok=True)


def test_tree_turn_shared_by_all_gets_zero():
    trajs = [["plan", "a", "x"], ["plan", "b"], ["plan", "a", "y"], ["plan", "c", "z"]]
    inp = make_batch(trajs, [1.0, 0.0, 0.5, 0.7])
    for spec in ("tree", "tree(normalize=false)"):
        adv = per_turn(run(spec, inp), inp)
        assert [row[0] for row in adv] == [0.0] * 4  # exactly
        assert any(abs(row[1]) > 0 for row in adv)


def test_tree_single_turn_distinct_is_grpo_and_dr_grpo():
    trajs = [["a"], ["b"], ["c"], ["d"], ["e"], ["f"]]
    inp = make_batch(trajs, [1.0, 0.0, 0.0, 1.0, 0.3, 0.9], groups=[0, 0, 0, 1, 1, 1])
    assert torch.allclose(run("tree", inp), run("grpo", inp), atol=1e-6)
    assert torch.allclose(run("tree", inp, RAW), run("dr_grpo", inp), atol=1e-6)


def test_tree_telescopes_to_outcome_minus_group_mean_for_unique_histories():
    inp = make_batch(HAND_TRAJS, HAND_REWARDS)
    for row, r in zip(per_turn(run("tree", inp, RAW), inp), HAND_REWARDS):
        assert sum(row) == pytest.approx(r - 0.5, abs=1e-6)


# ---------------------------------------------------------------------------------------------------------
# progress (SPA)
# ---------------------------------------------------------------------------------------------------------
def test_progress_hand_values():
    inp = make_batch(HAND_TRAJS, HAND_REWARDS)
    c = progress_contributions(inp, CFG, ProgressParams(prior=1.0))
    # A: p0 = (3 * 2/3 + 1/2) / 4 = 5/8; p1 = (2 * 1/2 + 5/8) / 3 = 13/24; p2 = 1.
    # D: p0 = (0 + 1/2) / 2 = 1/4; p1 = 0.
    assert c[0].tolist() == pytest.approx([1 / 8, -1 / 12, 11 / 24], abs=1e-12)
    assert c[3, :2].tolist() == pytest.approx([-1 / 4, -1 / 4], abs=1e-12)
    assert float(c[3, 2]) == 0.0


@pytest.mark.parametrize("k", [0.0, 1.0, 3.0])
@pytest.mark.parametrize("seed", range(4))
def test_progress_matches_slow_loop(seed, k):
    trajs, rewards, groups, valid, _, _ = random_batch(seed)
    inp = make_batch(trajs, rewards, groups, valid)
    got = per_turn(run("progress", inp, ProgressParams(prior=k, normalize=False)), inp)
    ref = progress_ref(trajs, rewards, groups, valid, k)
    for i, (g, w) in enumerate(zip(got, ref)):
        flat = group_std(i, rewards, groups, valid) == 0
        assert g == pytest.approx([0.0] * len(w) if flat or not valid[i] else w, abs=1e-5)


@pytest.mark.parametrize("k", [0.0, 0.5, 1.0, 4.0])
@pytest.mark.parametrize("seed", range(4))
def test_progress_contributions_sum_to_outcome_minus_baseline(seed, k):
    trajs, rewards, groups, valid, _, _ = random_batch(seed, max_turns=6)
    inp = make_batch(trajs, rewards, groups, valid)
    c = progress_contributions(inp, CFG, ProgressParams(prior=k))  # (N, M) float64
    for i in range(len(trajs)):
        if not valid[i]:
            assert torch.all(c[i] == 0)
            continue
        baseline = node(i, -1, trajs, rewards, groups, valid)[0]
        assert float(c[i].sum()) == pytest.approx(rewards[i] - baseline, abs=1e-12)
    # and the token-level advantages (float32, unnormalised) carry the same sums
    adv = per_turn(run("progress", inp, ProgressParams(prior=k, normalize=False)), inp)
    for i, row in enumerate(adv):
        flat = group_std(i, rewards, groups, valid) == 0
        want = 0.0 if flat or not valid[i] else rewards[i] - node(i, -1, trajs, rewards, groups, valid)[0]
        assert sum(row) == pytest.approx(want, abs=1e-5)


def test_progress_prior_zero_is_tree_when_histories_are_unique():
    inp = make_batch(HAND_TRAJS, HAND_REWARDS)
    assert torch.allclose(run("progress(prior=0)", inp), run("tree", inp), atol=1e-6)


def test_progress_prior_spreads_credit_past_the_branch():
    trajs = [["a", "b", "c", "d"], ["x", "y", "z", "w"]]  # branch at turn 0, unique afterwards
    inp = make_batch(trajs, [1.0, 0.0])
    sharp = per_turn(run("progress(prior=0, normalize=false)", inp), inp)[0]
    spread = per_turn(run("progress", inp, ProgressParams(prior=1.0, normalize=False)), inp)[0]
    assert sharp == pytest.approx([0.5, 0.0, 0.0, 0.0])
    assert spread == pytest.approx(
        [0.25, 0.125, 0.0625, 0.0625]
    )  # halves toward the outcome, the last turn closes the gap
    assert sum(spread) == pytest.approx(0.5)


# ---------------------------------------------------------------------------------------------------------
# turn_feedback
# ---------------------------------------------------------------------------------------------------------
def test_turn_feedback_hand_values():
    inp = make_batch([["a", "b"], ["c", "d"]], [1.0, 0.0], feedback=[[0.0, 1.0], [0.0, 1.0]])
    adv = per_turn(run("turn_feedback(strength=1, temperature=1)", inp), inp)
    a = 0.5 / (math.sqrt(0.5) + CFG.std_eps)  # GRPO of (1, 0)
    e = math.e
    assert adv[0] == pytest.approx(
        [a * 2 / (1 + e), a * 2 * e / (1 + e)], abs=1e-6
    )  # success: credit to the well-rated turn
    assert adv[1] == pytest.approx(
        [-a * 2 * e / (1 + e), -a * 2 / (1 + e)], abs=1e-6
    )  # failure: blame on the badly rated turn


@pytest.mark.parametrize("lam,tau", [(0.5, 1.0), (1.0, 0.3), (0.2, 2.0)])
@pytest.mark.parametrize("seed", range(3))
def test_turn_feedback_matches_slow_loop(seed, lam, tau):
    trajs, rewards, groups, valid, _, fb = random_batch(seed)
    inp = make_batch(trajs, rewards, groups, valid, feedback=fb)
    got = per_turn(run("turn_feedback", inp, TurnFeedbackParams(strength=lam, temperature=tau)), inp)
    for g, w in zip(got, turn_feedback_ref(fb, rewards, groups, valid, lam, tau)):
        assert g == pytest.approx(w, abs=1e-5)


@pytest.mark.parametrize("fill", [0.0, 3.5, float("nan")])
def test_turn_feedback_equal_feedback_is_the_outcome_estimator(fill):
    trajs, rewards, groups, valid, _, _ = random_batch(7)
    inp = make_batch(trajs, rewards, groups, valid, feedback=[[fill] * len(t) for t in trajs])
    for lam in (0.5, 1.0):
        assert torch.equal(run("turn_feedback", inp, TurnFeedbackParams(strength=lam)), run("grpo", inp))


def test_turn_feedback_keeps_sign_and_trajectory_credit():
    trajs, rewards, groups, valid, _, fb = random_batch(3)
    inp = make_batch(trajs, rewards, groups, valid, feedback=fb)
    adv = per_turn(run("turn_feedback", inp, TurnFeedbackParams(strength=1.0, temperature=0.5)), inp)
    base = per_turn(run("grpo", inp), inp)
    for a, b in zip(adv, base):
        assert sum(a) == pytest.approx(sum(b), abs=1e-5)  # mean weight 1
        assert all((x > 0) == (y > 0) and (x < 0) == (y < 0) for x, y in zip(a, b))


# ---------------------------------------------------------------------------------------------------------
# explore_group (Exploration-Aware EAPO)
# ---------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("coef", [0.0, 0.5])
@pytest.mark.parametrize("seed", range(4))
def test_explore_group_matches_slow_loop(seed, coef):
    trajs, rewards, groups, valid, kinds, fb = random_batch(seed)
    inp = make_batch(trajs, rewards, groups, valid, kinds=kinds, feedback=fb)
    got = per_turn(run("explore_group", inp, ExploreGroupParams(step_coef=coef, step_norm="pool")), inp)
    for g, w in zip(got, explore_ref(kinds, fb, rewards, groups, valid, coef)):
        assert g == pytest.approx(w, abs=1e-5)


def explore_ref_outcome(kinds, feedback, rewards, groups, valid, coef, eps=CFG.std_eps):
    """step_norm=outcome: the outcome standardised in the (group, kind) pool, c f_t centred there, not divided."""
    out = explore_ref(kinds, [[0.0] * len(f) for f in feedback], rewards, groups, valid, 0.0, eps)
    f = [[0.0 if math.isnan(x) else coef * x for x in row] for row in feedback]
    for i, row in enumerate(kinds):
        for t, k in enumerate(row):
            if not valid[i] or k < 0:
                continue
            pool = pool_of(f, kinds, groups, valid, i, k)
            out[i][t] += f[i][t] - sum(pool) / len(pool)
    return out


@pytest.mark.parametrize("coef", [0.0, 0.05, 0.5])
@pytest.mark.parametrize("seed", range(4))
def test_explore_group_outcome_norm_matches_slow_loop(seed, coef):
    trajs, rewards, groups, valid, kinds, fb = random_batch(seed)
    inp = make_batch(trajs, rewards, groups, valid, kinds=kinds, feedback=fb)
    got = per_turn(run("explore_group", inp, ExploreGroupParams(step_coef=coef)), inp)  # step_norm=outcome
    for g, w in zip(got, explore_ref_outcome(kinds, fb, rewards, groups, valid, coef)):
        assert g == pytest.approx(w, abs=1e-5)


def test_explore_group_step_coef_sets_the_scale_only_with_outcome_norm():
    # one group, every trajectory right (a flat outcome): two searches then the answer; the searches' rewards differ
    inp = make_batch(
        [["s", "x", "a"], ["t", "y", "a"], ["u", "z", "a"]],
        [1.0, 1.0, 1.0],
        kinds=[[1, 1, 0]] * 3,
        feedback=[[2.0, 0.0, 0.0], [-1.0, 0.0, 0.0], [5.0, 1.0, 0.0]],
    )

    def adv(coef, norm):
        return per_turn(run("explore_group", inp, ExploreGroupParams(step_coef=coef, step_norm=norm)), inp)

    small, big = adv(0.01, "outcome"), adv(0.1, "outcome")
    mean = (2.0 + 0.0 - 1.0 + 0.0 + 5.0 + 1.0) / 6  # the exploratory pool's mean step reward
    assert small[0][0] == pytest.approx(0.01 * (2.0 - mean))
    assert [x * 10 for row in small for x in row] == pytest.approx([x for row in big for x in row])
    assert [row[2] for row in big] == [0.0, 0.0, 0.0]  # the answers' pool: flat outcome, no step reward
    # the pool form: the spread is c f's alone, so c = 0.01 and c = 0.1 give the same full-scale advantages
    a, b = adv(0.01, "pool"), adv(0.1, "pool")
    assert [x for row in a for x in row] == pytest.approx([x for row in b for x in row], abs=1e-3)
    assert max(abs(x) for row in a for x in row) > 1.0
    with pytest.raises(ValueError, match="step_norm"):
        ExploreGroupParams(step_norm="std")


def test_explore_group_hand_values():
    # trajectory 0: search, search, answer (r = 1); trajectory 1: answer at once (r = 0).
    inp = make_batch([["s", "s2", "a"], ["b"]], [1.0, 0.0], kinds=[[1, 1, 0], [0]])
    adv = per_turn(run("explore_group", inp), inp)
    z = 0.5 / (math.sqrt(0.5) + CFG.std_eps)
    assert adv == [[0.0, 0.0, pytest.approx(z)], [pytest.approx(-z)]]  # the exploratory pool is flat (both r = 1)


def test_explore_group_normalises_the_kinds_separately():
    trajs, rewards, groups, valid, kinds, fb = random_batch(11, per_group=8)
    fb = [[0.0 if math.isnan(x) else x for x in row] for row in fb]
    cfg = ExploreGroupParams(step_coef=1.0, step_norm="pool")
    inp = make_batch(trajs, rewards, groups, valid, kinds=kinds, feedback=fb)
    adv = per_turn(run("explore_group", inp, cfg), inp)
    # each (group, kind) pool: mean 0 and unbiased std ~1 (or all 0 when flat)
    for g in set(groups):
        for k in (0, 1):
            pool = [
                adv[i][t]
                for i in range(len(trajs))
                if groups[i] == g and valid[i]
                for t in range(len(trajs[i]))
                if kinds[i][t] == k
            ]
            if len(pool) > 1 and any(pool):
                mu = sum(pool) / len(pool)
                assert mu == pytest.approx(0.0, abs=1e-5)
                assert math.sqrt(sum((x - mu) ** 2 for x in pool) / (len(pool) - 1)) == pytest.approx(1.0, abs=1e-4)
    # scaling and shifting the step rewards of the task turns leaves the exploratory advantages unchanged
    fb2 = [[x if kinds[i][t] == 1 else 10.0 * x - 3.0 + (i % 3) for t, x in enumerate(row)] for i, row in enumerate(fb)]
    adv2 = per_turn(
        run("explore_group", make_batch(trajs, rewards, groups, valid, kinds=kinds, feedback=fb2), cfg), inp
    )
    explore = [(i, t) for i in range(len(trajs)) for t in range(len(trajs[i])) if kinds[i][t] == 1]
    task = [(i, t) for i in range(len(trajs)) for t in range(len(trajs[i])) if kinds[i][t] == 0 and valid[i]]
    assert [adv2[i][t] for i, t in explore] == [adv[i][t] for i, t in explore]
    assert any(abs(adv2[i][t] - adv[i][t]) > 1e-3 for i, t in task)


def test_explore_group_turn_without_kind_gets_zero():
    inp = make_batch([["s", "a"], ["b", "c"]], [1.0, 0.0], kinds=[[1, -1], [0, 0]])
    adv = per_turn(run("explore_group", inp), inp)
    assert adv[0][1] == 0.0


# ---------------------------------------------------------------------------------------------------------
# all four: invalid samples, tokens outside turns, missing or malformed extras
# ---------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", TURN)
def test_invalid_samples_get_zero_and_do_not_count(name):
    trajs, rewards, groups, valid, kinds, fb = random_batch(5)
    valid = [True] * len(trajs)
    valid[2] = valid[7] = False
    rewards = list(rewards)
    rewards[2] = float("nan")
    inp = make_batch(trajs, rewards, groups, valid, kinds=kinds, feedback=fb)
    adv = run(name, inp)
    assert torch.all(adv[2] == 0) and torch.all(adv[7] == 0)
    keep = [i for i in range(len(trajs)) if valid[i]]
    sub = make_batch(
        [trajs[i] for i in keep],
        [rewards[i] for i in keep],
        [groups[i] for i in keep],
        kinds=[kinds[i] for i in keep],
        feedback=[fb[i] for i in keep],
    )
    sub_adv = run(name, sub)
    for row, i in enumerate(keep):
        width = sub_adv.shape[1]
        assert torch.allclose(adv[i, :width], sub_adv[row], atol=1e-6)


@pytest.mark.parametrize("name", TURN)
def test_tokens_outside_turns_get_zero(name):
    trajs, rewards, groups, valid, kinds, fb = random_batch(2)
    inp = make_batch(trajs, rewards, groups, valid, kinds=kinds, feedback=fb)
    inp.mask[:, 0] = 1.0  # a stray mask-1 prompt token outside every turn still gets 0
    adv = run(name, inp)
    outside = inp.extras["turn_index"] < 0
    assert torch.all(adv[outside] == 0)
    assert adv[~outside].abs().sum() > 0
    inp.mask[:, 1] = 0.0  # and a turn token with mask 0 gets 0
    assert torch.all(run(name, inp)[:, 1] == 0)


@pytest.mark.parametrize(
    "name,key",
    [
        ("tree", "turn_prefix"),
        ("tree", "turn_index"),
        ("progress", "turn_prefix"),
        ("turn_feedback", "turn_rewards"),
        ("turn_feedback", "turn_index"),
        ("explore_group", "turn_kind"),
        ("explore_group", "turn_index"),
    ],
)
def test_missing_extra_is_named(name, key):
    inp = make_batch(HAND_TRAJS, HAND_REWARDS)
    del inp.extras[key]
    with pytest.raises(ValueError, match=rf"{name}.*{key}"):
        run(name, inp)


def test_explore_group_needs_turn_rewards_only_with_a_step_coefficient():
    inp = make_batch(HAND_TRAJS, HAND_REWARDS)
    del inp.extras["turn_rewards"]
    run("explore_group", inp)
    with pytest.raises(ValueError, match="turn_rewards"):
        run("explore_group(step_coef=1)", inp)


@pytest.mark.parametrize("name", TURN)
def test_malformed_extras_are_rejected(name):
    inp = make_batch(HAND_TRAJS, HAND_REWARDS)
    for key in ("turn_prefix", "turn_kind", "turn_rewards"):
        inp.extras[key] = inp.extras[key][:, :2]  # turn_index names turn 2, the per-turn extras stop at 1
    with pytest.raises(ValueError, match="names turn 2"):
        run(name, inp)
    inp = make_batch(HAND_TRAJS, HAND_REWARDS)
    inp.extras["turn_index"] = inp.extras["turn_index"][:, :-1]
    with pytest.raises(ValueError, match="turn_index"):
        run(name, inp)


def test_tree_rejects_gaps_and_bad_knobs():
    inp = make_batch(HAND_TRAJS, HAND_REWARDS)
    inp.extras["turn_prefix"][0, 1] = -1
    with pytest.raises(ValueError, match="turn t without turn t-1"):
        run("tree", inp)
    for spec, what in [
        ("progress(prior=-1)", "prior must be >= 0"),
        ("turn_feedback(strength=1.5)", "strength must be in"),
        ("turn_feedback(strength=-0.1)", "strength must be in"),
        ("turn_feedback(temperature=0)", "temperature must be > 0"),
    ]:
        with pytest.raises(ConfigError, match=what):
            ADVANTAGES.resolve(spec)
        with pytest.raises(ConfigError, match=rf"algorithm.advantage {spec.split('(')[0]}: {what}"):
            load_config("default", [f"algorithm.advantage={spec}"])
    inp = make_batch(HAND_TRAJS, HAND_REWARDS)
    inp.extras["turn_kind"][0, 0] = 2
    with pytest.raises(ValueError, match="turn_kind"):
        run("explore_group", inp)


@pytest.mark.parametrize("name", TURN)
def test_registered_with_requirements(name):
    fn = ADVANTAGES.get(name)
    assert "turn_index" in fn.requires
    assert fn.__doc__.strip() and not re.search(
        r"#\d", fn.__doc__
    )  # papers cited by name (docs/references.md), not by number
    assert ADVANTAGES.entry(name).params is not None


@pytest.mark.parametrize("name", TURN)
def test_flat_groups_get_zero(name):
    inp = make_batch(HAND_TRAJS, [0.7] * 4, feedback=[[1.0, 0.0, 2.0], [0.0, 1.0, 1.0], [3.0, 0.0, 1.0], [1.0, 0.0]])
    assert torch.all(run(name, inp) == 0)
