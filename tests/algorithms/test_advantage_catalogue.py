"""Advantage estimators from recent papers: taco (TACO), success_adaptive (GUI-Libra), rapo (RAPO), maxrl
(MaxRL), sa_mrpo (SA-MRPO), tmn (TMN-Reweight), aem (AEM), exppo (ExPPO); the papers are in docs/references.md.
Knobs are each estimator's params dataclass, passed as `params=` or set in its spec (`maxrl(order=2)`).

For each: a slow loop reference (or hand values), the property the paper relies on, invalid samples, and a
one-step trainer smoke test.
"""

from __future__ import annotations

import json
import math
import random
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from ascent.algorithms import ADVANTAGES, AdvantageInput
from ascent.algorithms.advantages import (
    AemParams,
    ExppoParams,
    MaxrlParams,
    RapoParams,
    SaMrpoParams,
    SuccessAdaptiveParams,
    TacoParams,
    TmnParams,
)
from ascent.app.pipeline import prepare
from ascent.config import load_config
from ascent.config.schema import AlgorithmConfig
from ascent.rollout import make_engine
from ascent.trainer.rl import RLParts, RLTrainer
from ascent.typed import ConfigError
from tests.conftest import TINY

CFG = AlgorithmConfig()
NEW = ("taco", "exppo", "aem", "success_adaptive", "sa_mrpo", "tmn", "rapo", "maxrl")


def make_input(
    rewards, groups=None, valid=None, mask=None, logprobs=None, components=None, task_index=None
) -> AdvantageInput:
    r = torch.tensor(rewards, dtype=torch.float32)
    n = r.shape[0]
    v = ~torch.isnan(r) if valid is None else torch.tensor(valid, dtype=torch.bool)
    g = torch.zeros(n, dtype=torch.long) if groups is None else torch.tensor(groups, dtype=torch.long)
    m = torch.ones(n, 1) if mask is None else mask
    extras = {}
    if logprobs is not None:
        extras["logprobs"] = logprobs
    if components is not None:
        extras["components"] = torch.as_tensor(components, dtype=torch.float32)
    if task_index is not None:
        extras["task_index"] = torch.as_tensor(task_index, dtype=torch.long)
    return AdvantageInput(rewards=r, valid=v, group_index=g, mask=m, extras=extras)


def run(spec, inp, params=None):
    """The estimator of `spec` (`name` or `name(key=value, ...)`, resolved by the registry), or `name` with
    `params` (a params instance) passed directly."""
    if params is not None:
        return ADVANTAGES.get(spec)(inp, CFG, params=params)
    return ADVANTAGES.resolve(spec)(inp, CFG)


# ---------------------------------------------------------------------------------------------------------
# slow per-sample references
# ---------------------------------------------------------------------------------------------------------
def mates(i, groups, valid):
    return [j for j in range(len(groups)) if groups[j] == groups[i] and valid[j]]


def mean_std(vals):
    n = len(vals)
    mu = sum(vals) / n
    if n < 2 or all(x == vals[0] for x in vals):
        return (vals[0] if n else 0.0), 0.0
    return mu, math.sqrt(sum((x - mu) ** 2 for x in vals) / (n - 1))


def grpo_ref(rewards, valid, groups, eps=CFG.std_eps):
    out = []
    for i in range(len(rewards)):
        if not valid[i]:
            out.append(0.0)
            continue
        mu, sd = mean_std([rewards[j] for j in mates(i, groups, valid)])
        out.append((rewards[i] - mu) / (sd + eps))
    return out


def surprisal_ref(logprobs, mask):
    out = []
    for i in range(len(mask)):
        toks = [-float(logprobs[i][t]) for t in range(len(mask[i])) if mask[i][t] > 0]
        out.append(sum(toks) / max(1, len(toks)))
    return out


def group_z_ref(values, valid, groups, eps=CFG.std_eps):
    out = []
    for i in range(len(values)):
        if not valid[i]:
            out.append(0.0)
            continue
        mu, sd = mean_std([values[j] for j in mates(i, groups, valid)])
        out.append((values[i] - mu) / (sd + eps))
    return out


def pass_rate_ref(rewards, valid, groups, thr):
    out = []
    for i in range(len(rewards)):
        m = mates(i, groups, valid)
        out.append(sum(1.0 for j in m if rewards[j] >= thr) / len(m) if m else 0.0)
    return out


def taco_ref(rewards, valid, groups, mask, logprobs, p=TacoParams()):
    base = grpo_ref(rewards, valid, groups)
    n, T = mask.shape
    out = [[0.0] * T for _ in range(n)]
    for i in range(n):
        for t in range(T):
            if mask[i][t] == 0:
                continue
            s = -float(logprobs[i][t])
            earlier = [u for u in range(t) if mask[i][u] > 0]  # the window counts completion tokens
            prev = [-float(logprobs[i][u]) for u in earlier[-p.window :]]
            h = sum(prev) / len(prev) if prev else s
            risk = s - h + math.log(p.alpha)
            w = 1.0 - (1.0 - p.floor) * (1.0 - math.exp(-risk)) if risk > 0 else 1.0
            out[i][t] = base[i] * w if base[i] > 0 else base[i]
    return torch.tensor(out)


def exppo_ref(rewards, valid, groups, mask, logprobs, p=ExppoParams()):
    base = grpo_ref(rewards, valid, groups)
    z = group_z_ref(surprisal_ref(logprobs, mask), valid, groups)
    q = pass_rate_ref(rewards, valid, groups, p.threshold)
    sign = lambda x: (x > 0) - (x < 0)  # noqa: E731
    shaped = [base[i] * (1 + p.strength * q[i] * sign(base[i]) * math.tanh(z[i])) for i in range(len(base))]
    out = []
    for i in range(len(base)):
        if base[i] == 0:
            out.append(0.0)
            continue
        same = [j for j in range(len(base)) if groups[j] == groups[i] and sign(base[j]) == sign(base[i])]
        out.append(shaped[i] * sum(abs(base[j]) for j in same) / sum(abs(shaped[j]) for j in same))
    return out


def aem_ref(rewards, valid, groups, mask, logprobs, p=AemParams()):
    base = grpo_ref(rewards, valid, groups)
    s = group_z_ref(surprisal_ref(logprobs, mask), valid, groups)
    pos, neg = sum(1 for a in base if a > 0), sum(1 for a in base if a < 0)
    rho = (neg - pos) / (neg + pos) if neg + pos else 0.0
    return [a * (1 + p.strength * rho * math.tanh(a * si)) for a, si in zip(base, s)]


def success_adaptive_ref(rewards, valid, groups, p=SuccessAdaptiveParams()):
    base = grpo_ref(rewards, valid, groups)
    q = pass_rate_ref(rewards, valid, groups, p.threshold)
    return [a * (1 - p.strength * qi) if a < 0 else a for a, qi in zip(base, q)]


def sa_mrpo_ref(valid, groups, comps, p=SaMrpoParams()):
    n, k = len(comps), len(comps[0])
    zs, ds = [], []
    for c in range(k):
        ok = [valid[i] and math.isfinite(comps[i][c]) for i in range(n)]
        col = [comps[i][c] for i in range(n)]
        zs.append(group_z_ref(col, ok, groups))
        vals = [col[i] for i in range(n) if ok[i]]
        lo, hi = (min(vals), max(vals)) if vals else (0.0, 0.0)
        sat = (sum(vals) / len(vals) - lo) / (hi - lo) if hi > lo else 1.0
        ds.append((1 - sat) ** p.power)
    tot = sum(ds)
    return [sum(ds[c] / tot * zs[c][i] for c in range(k)) if tot > 0 else 0.0 for i in range(n)]


def tmn_ref(rewards, valid, groups, tasks, p=TmnParams()):
    n = len(rewards)
    num, info = [0.0] * n, [False] * n
    for i in range(n):
        if not valid[i]:
            continue
        grp = [rewards[j] for j in mates(i, groups, valid)]
        if len(set(grp)) < 2:
            continue
        same_task = [rewards[j] for j in range(n) if valid[j] and tasks[j] == tasks[i]]
        lo, hi = min(same_task), max(same_task)
        mu = sum(grp) / len(grp)
        place = (mu - lo) / (hi - lo)
        num[i] = (1 + p.difficulty * (1 - place)) * (rewards[i] - mu)
        info[i] = True
    out = []
    for i in range(n):
        if not info[i]:
            out.append(0.0)
            continue
        same = [abs(num[j]) for j in range(n) if info[j] and tasks[j] == tasks[i]]
        out.append(num[i] / (sum(same) / len(same)))
    return out


def rapo_ref(rewards, valid, groups, params=RapoParams()):
    base = grpo_ref(rewards, valid, groups)
    out = []
    for i in range(len(rewards)):
        m = mates(i, groups, valid)
        if not valid[i] or len(m) < 2:
            out.append(0.0)
            continue
        n = len(m)
        p = min(max(sum(rewards[j] for j in m) / n, 1 / n), 1 - 1 / n)
        out.append(base[i] * (2 * math.sqrt(p * (1 - p))) ** (-params.power))
    return out


def maxrl_ref(rewards, valid, groups, p=MaxrlParams()):
    out = []
    for i in range(len(rewards)):
        if not valid[i]:
            out.append(0.0)
            continue
        m = mates(i, groups, valid)
        n = len(m)
        ok = [rewards[j] >= p.threshold for j in m]
        k_others = sum(ok) - (rewards[i] >= p.threshold)
        f_others = (n - 1) - k_others
        order = n if p.order == 0 else min(n, p.order)
        s = sum(math.comb(f_others, j) / math.comb(n - 1, j) for j in range(order))
        a = s if rewards[i] >= p.threshold else 0.0
        if p.baseline:
            a = a - k_others / (n - 1) * s if n > 1 else 0.0
        out.append(a)
    return out


def random_batch(rng: random.Random, binary: bool, k: int = 3):
    rewards, valid, groups, tasks, comps = [], [], [], [], []
    for g in range(rng.randint(1, 7)):
        task = rng.randint(0, 2)
        for _ in range(rng.choice([1, 2, 3, 4, 5, 8])):
            ok = rng.random() > 0.2
            c = [float(rng.random() < 0.5) if binary else rng.choice([0.0, 0.25, 1.0, rng.random()]) for _ in range(k)]
            c = [x if rng.random() > 0.1 else math.nan for x in c]
            r = sum(x for x in c if not math.isnan(x)) / k if binary is False else float(rng.random() < 0.4)
            rewards.append(r if ok else math.nan)
            valid.append(ok)
            groups.append(g)
            tasks.append(task)
            comps.append(c)
    n = len(rewards)
    T = rng.randint(1, 7)
    mask = torch.zeros(n, T)
    for i in range(n):
        start, length = rng.randint(0, T - 1), rng.randint(0, T)
        mask[i, start : start + length] = 1.0
    logprobs = -torch.empty(n, T).exponential_(generator=torch.Generator().manual_seed(rng.randint(0, 10**6))) * mask
    return rewards, valid, groups, tasks, comps, mask, logprobs


PARAMS = [
    {name: ADVANTAGES.entry(name).params() for name in NEW},  # the defaults
    {
        "taco": TacoParams(alpha=0.5, window=2, floor=0.3),
        "exppo": ExppoParams(strength=0.9, threshold=0.5),
        "aem": AemParams(strength=0.8),
        "success_adaptive": SuccessAdaptiveParams(threshold=0.5, strength=0.6),
        "sa_mrpo": SaMrpoParams(power=2.0),
        "tmn": TmnParams(difficulty=0.5),
        "rapo": RapoParams(power=0.5),
        "maxrl": MaxrlParams(threshold=0.5, order=2, baseline=False),
    },
]


@pytest.mark.parametrize("name", NEW)
@pytest.mark.parametrize("cfg_id", [0, 1])
def test_matches_loop_reference_on_random_input(name, cfg_id):
    cfg = PARAMS[cfg_id][name]
    rng = random.Random(7)
    for trial in range(30):
        rewards, valid, groups, tasks, comps, mask, logprobs = random_batch(rng, binary=trial % 2 == 0)
        if name == "sa_mrpo" and not any(valid):
            continue
        inp = make_input(rewards, groups, valid, mask, logprobs, comps, tasks)
        adv = run(name, inp, cfg)
        assert adv.shape == mask.shape and torch.isfinite(adv).all()
        if name == "taco":
            want = taco_ref(rewards, valid, groups, mask, logprobs, cfg)
        else:
            ref = {
                "exppo": lambda: exppo_ref(rewards, valid, groups, mask, logprobs, cfg),
                "aem": lambda: aem_ref(rewards, valid, groups, mask, logprobs, cfg),
                "success_adaptive": lambda: success_adaptive_ref(rewards, valid, groups, cfg),
                "sa_mrpo": lambda: sa_mrpo_ref(valid, groups, comps, cfg),
                "tmn": lambda: tmn_ref(rewards, valid, groups, tasks, cfg),
                "rapo": lambda: rapo_ref(rewards, valid, groups, cfg),
                "maxrl": lambda: maxrl_ref(rewards, valid, groups, cfg),
            }[name]()
            want = torch.tensor(ref, dtype=torch.float32)[:, None] * mask
        assert torch.allclose(adv, want, rtol=1e-4, atol=1e-5), (name, trial, adv, want)
        assert (adv[~torch.tensor(valid)] == 0).all()


# ---------------------------------------------------------------------------------------------------------
# invalid samples: zero advantage and left out of every statistic (group, batch and task level)
# ---------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", NEW)
def test_invalid_samples_get_zero_and_are_left_out(name):
    g = torch.Generator().manual_seed(3)
    rewards = [1.0, 0.0, 0.0, 1.0, math.nan, 1.0, 0.0, 1.0, math.nan, 0.5]
    groups = [0, 0, 0, 1, 1, 1, 1, 2, 2, 2]
    tasks = [0, 0, 0, 1, 1, 1, 1, 0, 0, 0]
    comps = [[r, float(i % 2)] for i, r in enumerate(rewards)]
    comps[4] = [7.0, 9.0]  # an invalid sample's components must not enter SA-MRPO's statistics either
    mask = torch.ones(10, 4)
    logprobs = -torch.rand(10, 4, generator=g) * 3
    full = run(name, make_input(rewards, groups, None, mask, logprobs, comps, tasks))
    keep = [i for i in range(10) if not math.isnan(rewards[i])]
    alone = run(
        name,
        make_input(
            [rewards[i] for i in keep],
            [groups[i] for i in keep],
            None,
            mask[keep],
            logprobs[keep],
            [comps[i] for i in keep],
            [tasks[i] for i in keep],
        ),
    )
    assert (full[4] == 0).all() and (full[8] == 0).all()
    assert torch.allclose(full[keep], alone, atol=1e-6)
    assert full.abs().sum() > 0


@pytest.mark.parametrize(
    "name,key", [("taco", "logprobs"), ("exppo", "logprobs"), ("aem", "logprobs"), ("sa_mrpo", "components")]
)
def test_missing_extra_is_a_clear_error(name, key):
    with pytest.raises(ValueError, match=key):
        run(name, make_input([1.0, 0.0]))


@pytest.mark.parametrize(
    "name,field,value",
    [
        ("taco", "floor", 0.0),
        ("taco", "floor", 1.5),
        ("taco", "alpha", 0.0),
        ("taco", "window", 0),
        ("exppo", "strength", 1.0),
        ("exppo", "strength", -0.1),
        ("aem", "strength", -0.1),
        ("aem", "strength", 1.0),
        ("success_adaptive", "strength", 1.5),
        ("success_adaptive", "strength", -0.5),
        ("sa_mrpo", "power", -1.0),
        ("tmn", "difficulty", -1.0),
        ("rapo", "power", -0.5),
        ("maxrl", "order", -1),
    ],
)
def test_out_of_range_knobs_are_errors(name, field, value):
    spec = f"{name}({field}={value})"
    with pytest.raises(ConfigError, match=rf"{name}: {field} must be"):
        ADVANTAGES.resolve(spec)
    with pytest.raises(ConfigError, match=rf"algorithm.advantage {name}: {field} must be"):
        load_config("default", [f"algorithm.advantage={spec}"])
    with pytest.raises(ValueError, match=field):  # the params class checks itself, however it is built
        ADVANTAGES.entry(name).params(**{field: value})


# ---------------------------------------------------------------------------------------------------------
# TACO
# ---------------------------------------------------------------------------------------------------------
def test_taco_hand_values():
    # group [1, 0]: GRPO +-1/sqrt(2) = +-0.7071. Completion of 3 tokens, surprisals [0.1, 0.1, 6.0]:
    # token 0: no context -> w 1; token 1: H = 0.1 -> r = log .01 < 0 -> w 1;
    # token 2: H = 0.1, r = 6.0 - 0.1 + log(.01) = 1.294830 -> w = 1 - 0.9 (1 - e^-1.294830) = 0.346553
    lp = -torch.tensor([[0.1, 0.1, 6.0], [0.1, 0.1, 6.0]])
    adv = run("taco", make_input([1.0, 0.0], mask=torch.ones(2, 3), logprobs=lp))
    a = 1 / math.sqrt(2)
    w = 1 - 0.9 * (1 - math.exp(-(5.9 + math.log(0.01))))
    assert abs(w - 0.346553) < 1e-5
    assert torch.allclose(adv, torch.tensor([[a, a, a * w], [-a, -a, -a]]), atol=1e-5)


def test_taco_window_counts_completion_tokens_not_positions():
    # multi-turn row: 2 completion tokens, 3 observation tokens (mask 0), then a surprising token (s = 6);
    # with window=3 its context is still the 2 earlier completion tokens (s = 0.1 each), not "no context"
    mask = torch.tensor([[1.0, 1.0, 0.0, 0.0, 0.0, 1.0], [1.0, 1.0, 0.0, 0.0, 0.0, 1.0]])
    logprobs = torch.tensor([[-0.1, -0.1, 0.0, 0.0, 0.0, -6.0], [-0.1, -0.1, 0.0, 0.0, 0.0, -0.1]])
    inp = AdvantageInput(
        torch.tensor([1.0, 0.0]),
        torch.ones(2, dtype=torch.bool),
        torch.zeros(2, dtype=torch.long),
        mask,
        {"logprobs": logprobs},
    )
    adv = ADVANTAGES.get("taco")(inp, CFG, TacoParams(window=3))
    risk = 6.0 - 0.1 + math.log(0.01)
    weight = 1.0 - 0.9 * (1.0 - math.exp(-risk))
    assert float(adv[0, 5]) == pytest.approx(float(adv[0, 0]) * weight, rel=1e-5)
    assert float(adv[0, 5]) < float(adv[0, 0])  # down-weighted, where the position window gave it weight 1


def test_taco_lowers_only_positive_credit_of_risky_tokens_and_never_to_zero():
    # a confident context (surprisal 0.01) then an extremely rare token (surprisal 60): weight -> floor, not 0;
    # the same rare token after an uncertain context (surprisal 59) is exploration: weight 1
    lp = -torch.tensor([[0.01, 0.01, 60.0], [59.0, 59.0, 60.0], [0.01, 0.01, 60.0], [59.0, 59.0, 60.0]])
    inp = make_input([1.0, 1.0, 0.0, 0.0], mask=torch.ones(4, 3), logprobs=lp)
    adv, base = run("taco", inp), run("grpo", inp)
    assert base[0, 0] > 0 and base[2, 0] < 0
    w = adv[0] / base[0]
    assert w[2] < 0.2 and w[2] >= TacoParams().floor and w[2] > 0  # risky: cut towards the floor, never zeroed
    assert torch.equal(adv[1], base[1])  # same rare token in an uncertain context: untouched
    assert torch.equal(adv[2:], base[2:])  # negative advantages untouched, even on the risky token
    assert torch.equal(adv[0, :2], base[0, :2])
    # on random input: 0 < A_taco / A_grpo <= 1 where A > 0, equal where A <= 0
    rng = random.Random(0)
    for _ in range(20):
        rewards, valid, groups, _, _, mask, logprobs = random_batch(rng, binary=True)
        inp = make_input(rewards, groups, valid, mask, logprobs * 4)
        adv, base = run("taco", inp), run("grpo", inp)
        pos = base > 0
        assert torch.equal(adv[~pos], base[~pos])
        ratio = adv[pos] / base[pos]
        assert (ratio >= TacoParams().floor - 1e-6).all() and (ratio <= 1 + 1e-6).all()


# ---------------------------------------------------------------------------------------------------------
# ExPPO
# ---------------------------------------------------------------------------------------------------------
def test_exppo_keeps_sign_and_group_mass():
    rng = random.Random(1)
    cfg = ExppoParams(threshold=0.5, strength=0.9)
    changed = 0
    for trial in range(40):
        rewards, valid, groups, _, _, mask, logprobs = random_batch(rng, binary=trial % 2 == 0)
        inp = make_input(rewards, groups, valid, torch.ones_like(mask), logprobs * 3)
        adv, base = run("exppo", inp, cfg)[:, 0], run("grpo", inp)[:, 0]
        assert torch.equal(torch.sign(adv), torch.sign(base))  # the verifier's polarity
        for g in set(groups):
            idx = torch.tensor(groups) == g
            assert torch.allclose(adv[idx].abs().sum(), base[idx].abs().sum(), rtol=1e-5, atol=1e-6)  # group |A| mass
            assert abs(float(adv[idx].sum())) < 1e-4  # GRPO's zero group sum survives too
        changed += int(not torch.allclose(adv, base, atol=1e-4))
    assert changed > 5  # and the shaping does move credit


def test_exppo_moves_credit_to_rare_correct_responses():
    # 3 of 4 correct (pass rate .75); correct responses with mean surprisal 0.2, 0.2, 2.0 and a wrong one
    lp = -torch.tensor([[0.2, 0.2], [0.2, 0.2], [2.0, 2.0], [1.0, 1.0]])
    inp = make_input([1.0, 1.0, 1.0, 0.0], mask=torch.ones(4, 2), logprobs=lp)
    adv, base = run("exppo", inp)[:, 0], run("grpo", inp)[:, 0]
    assert adv[2] > base[2] > adv[0] > 0  # the rare correct mode gains credit at the frequent mode's expense
    assert torch.allclose(adv[:3].sum(), base[:3].sum(), atol=1e-6) and torch.allclose(adv[3], base[3])
    want = exppo_ref([1.0, 1.0, 1.0, 0.0], [True] * 4, [0] * 4, torch.ones(4, 2), lp)
    assert torch.allclose(adv, torch.tensor(want), atol=1e-5)
    # a prompt never solved has pass rate 0: no shaping
    inp0 = make_input([0.5, 0.0, 0.0, 0.0], mask=torch.ones(4, 2), logprobs=lp)
    assert torch.allclose(run("exppo", inp0), run("grpo", inp0), atol=1e-6)


# ---------------------------------------------------------------------------------------------------------
# AEM
# ---------------------------------------------------------------------------------------------------------
def test_aem_hand_values_and_direction():
    # group [1, 0, 0, 0] (failures dominate: n_pos 1, n_neg 3, rho = 0.5); GRPO: +1.5, -0.5 x3.
    # surprisals [2, 0.5, 0.5, 2]: mean 1.25, std sqrt(4 * .5625 / 3) = 0.866025 -> z = +-0.866025
    lp = -torch.tensor([[2.0], [0.5], [0.5], [2.0]])
    adv = run("aem", make_input([1.0, 0.0, 0.0, 0.0], logprobs=lp))[:, 0]
    z = 0.75 / math.sqrt(0.75)
    want = [
        1.5 * (1 + 0.5 * 0.5 * math.tanh(1.5 * z)),
        -0.5 * (1 + 0.25 * math.tanh(0.5 * z)),
        -0.5 * (1 + 0.25 * math.tanh(0.5 * z)),
        -0.5 * (1 + 0.25 * math.tanh(-0.5 * z)),
    ]
    assert torch.allclose(adv, torch.tensor(want), atol=1e-5)
    # exploration phase: the surprising success and the typical failures (entropy-raising) are amplified,
    # the surprising failure (entropy-lowering to penalise) is damped
    assert adv[0] > 1.5 and adv[1] < -0.5 and -0.5 < adv[3] < 0
    # exploitation phase (successes dominate): the reverse
    adv2 = run("aem", make_input([0.0, 1.0, 1.0, 1.0], logprobs=lp))[:, 0]
    assert adv2[0] < -1.5 and adv2[1] > 0.5 and 0 < adv2[3] < 0.5
    assert torch.equal(torch.sign(adv2), torch.tensor([-1.0, 1, 1, 1]))


# ---------------------------------------------------------------------------------------------------------
# success-adaptive
# ---------------------------------------------------------------------------------------------------------
def test_success_adaptive_hand_values():
    # group 0 [1,1,1,0]: q = .75, GRPO .5 x3, -1.5 -> -1.5 * .25 = -.375
    # group 1 [1,0,0,0]: q = .25, GRPO 1.5, -.5 x3 -> -.5 * .75 = -.375
    adv = run("success_adaptive", make_input([1, 1, 1, 0, 1, 0, 0, 0.0], [0, 0, 0, 0, 1, 1, 1, 1]))[:, 0]
    assert torch.allclose(adv, torch.tensor([0.5, 0.5, 0.5, -0.375, 1.5, -0.375, -0.375, -0.375]), atol=1e-5)
    half = run("success_adaptive(strength=0.5)", make_input([1, 1, 1, 0.0]))[:, 0]
    assert torch.allclose(half, torch.tensor([0.5, 0.5, 0.5, -1.5 * (1 - 0.375)]), atol=1e-5)
    assert torch.allclose(
        run("success_adaptive", make_input([1, 1, 1, 0.0]), SuccessAdaptiveParams(strength=0.0)),
        run("grpo", make_input([1, 1, 1, 0.0])),
    )


# ---------------------------------------------------------------------------------------------------------
# SA-MRPO
# ---------------------------------------------------------------------------------------------------------
# correctness (hard) and format (nearly saturated) for 2 groups of 4
SA_COMPS = [[1, 0], [0, 1], [0, 1], [0, 0], [0, 1], [0, 1], [0, 1], [1, 1]]
SA_GROUPS = [0, 0, 0, 0, 1, 1, 1, 1]


def test_sa_mrpo_hand_values_and_sign_flip():
    # correctness batch mean 2/8 = .25 (range 0..1) -> d = .75; format 6/8 -> d = .25; weights .75, .25.
    # group 0 correctness [1,0,0,0]: z = 1.5, -.5, -.5, -.5; format [0,1,1,0]: z = -.866, .866, .866, -.866
    inp = make_input([sum(c) for c in SA_COMPS], SA_GROUPS, components=SA_COMPS)
    adv = run("sa_mrpo", inp)[:, 0]
    f = 0.5 / math.sqrt(1 / 3)
    want0 = [0.75 * 1.5 - 0.25 * f, 0.75 * -0.5 + 0.25 * f, 0.75 * -0.5 + 0.25 * f, 0.75 * -0.5 - 0.25 * f]
    assert torch.allclose(adv[:4], torch.tensor(want0), atol=1e-5)
    assert torch.allclose(adv, torch.tensor(sa_mrpo_ref([True] * 8, SA_GROUPS, SA_COMPS)), atol=1e-5)
    # GRPO on the (weight 1) sum [1,1,1,0] rewards sample 1 (format only); SA-MRPO's discount of the
    # saturated format objective flips it: the update now pushes that response down
    base = run("grpo", inp)[:, 0]
    assert base[1] > 0 and adv[1] < 0


def test_sa_mrpo_normalises_each_objective_separately():
    comps = torch.tensor(SA_COMPS, dtype=torch.float32)
    adv = run("sa_mrpo", make_input([0.0] * 8, SA_GROUPS, components=comps))
    for scale, shift in [(100.0, 0.0), (0.1, 3.0), (7.0, -2.0)]:  # (std_eps = 1e-6 is the only scale-dependent term)
        other = comps.clone()
        other[:, 1] = other[:, 1] * scale + shift
        assert torch.allclose(run("sa_mrpo", make_input([0.0] * 8, SA_GROUPS, components=other)), adv, atol=1e-4)
    # two rollouts with distinct reward profiles but the same weighted sum get different advantages
    inp2 = make_input(
        [1.0, 1.0, 0.0, 2.0, 0.0, 0.0], [0, 0, 0, 0, 1, 1], components=[[1, 0], [0, 1], [0, 0], [1, 1], [0, 1], [0, 1]]
    )
    a2 = run("sa_mrpo", inp2)[:, 0]
    assert not torch.isclose(a2[0], a2[1]) and torch.isclose(run("grpo", inp2)[0, 0], run("grpo", inp2)[1, 0])


def test_sa_mrpo_one_objective_is_grpo_and_nan_component_is_no_opinion():
    r = [1.0, 0.0, 0.5, 0.25, 1.0, 1.0, 0.0]
    g = [0, 0, 0, 0, 1, 1, 1]
    assert torch.allclose(
        run("sa_mrpo", make_input(r, g, components=[[x] for x in r])), run("grpo", make_input(r, g)), atol=1e-6
    )
    # a NaN component leaves that sample out of that objective only
    comps = [[1, 0], [0, 1], [0, math.nan], [1, 1]]
    adv = run("sa_mrpo", make_input([1.0, 1.0, 0.0, 2.0], components=comps))[:, 0]
    assert torch.allclose(adv, torch.tensor(sa_mrpo_ref([True] * 4, [0] * 4, comps)), atol=1e-6)


# ---------------------------------------------------------------------------------------------------------
# TMN
# ---------------------------------------------------------------------------------------------------------
def test_tmn_hand_values():
    # one task, groups [1,0,0,0] (p = .25, h = 1.75) and [1,1,1,0] (p = .75, h = 1.25):
    # num = 1.75 * [.75, -.25, -.25, -.25], 1.25 * [.25, .25, .25, -.75]; mean |num| = (1.75*1.5 + 1.25*1.5)/8 = .5625
    adv = run("tmn", make_input([1, 0, 0, 0, 1, 1, 1, 0.0], [0, 0, 0, 0, 1, 1, 1, 1]))[:, 0]
    want = (
        torch.tensor(
            [1.75 * 0.75, -1.75 * 0.25, -1.75 * 0.25, -1.75 * 0.25, 1.25 * 0.25, 1.25 * 0.25, 1.25 * 0.25, -1.25 * 0.75]
        )
        / 0.5625
    )
    assert torch.allclose(adv, want, atol=1e-5)
    assert adv[0] > abs(adv[7])  # the hard group's rare success outweighs the easy group's rare failure


def test_tmn_aligns_task_scales():
    # task 0: 0/1 rewards; task 1: the same pattern on a 0..100 scale, plus an unrelated flat group
    r0 = [1, 0, 0, 0, 1, 1, 0, 0]
    rewards = r0 + [100 * x for x in r0] + [30.0, 30.0]
    groups = [0] * 4 + [1] * 4 + [2] * 4 + [3] * 4 + [4, 4]
    tasks = [0] * 8 + [1] * 10
    adv = run("tmn", make_input(rewards, groups, task_index=tasks))[:, 0]
    assert torch.allclose(adv[:8], adv[8:16], atol=1e-5)  # same pattern, 100x the scale: same advantages
    assert (adv[16:] == 0).all()
    for t in (0, 1):
        info = (torch.tensor(tasks) == t) & (adv != 0)
        assert abs(float(adv[info].abs().mean()) - 1.0) < 1e-5  # every task's mean |A| is 1
    # GRPO-with-batch-std (lite_ppo) on the mixed batch lets the 100x task dominate
    lite = run("lite_ppo", make_input(rewards, groups))[:, 0]
    assert lite[8:16].abs().sum() > 50 * lite[:8].abs().sum()
    # scaling or shifting one task's rewards leaves the result unchanged
    shifted = rewards[:8] + [x * 0.37 - 5 for x in rewards[8:]]
    assert torch.allclose(run("tmn", make_input(shifted, groups, task_index=tasks))[:, 0], adv, atol=1e-5)


def test_tmn_without_task_index_is_one_task():
    rewards, groups = [1, 0, 0, 0, 1, 1, 1, 0, 5, 0.0], [0, 0, 0, 0, 1, 1, 1, 1, 2, 2]
    one = run("tmn", make_input(rewards, groups))
    assert torch.allclose(one, run("tmn", make_input(rewards, groups, task_index=[0] * 10)))
    assert not torch.allclose(one, run("tmn", make_input(rewards, groups, task_index=[0] * 8 + [1, 1])))


# ---------------------------------------------------------------------------------------------------------
# RAPO
# ---------------------------------------------------------------------------------------------------------
def test_rapo_hand_values_and_equal_group_mass():
    # [1,0,0,0]: p = .25, GRPO 1.5, -.5 x3, factor 1 / (2 sqrt(.1875)) = 1.154701
    adv = run("rapo", make_input([1, 0, 0, 0.0]))[:, 0]
    f = 1 / (2 * math.sqrt(0.1875))
    assert torch.allclose(adv, torch.tensor([1.5, -0.5, -0.5, -0.5]) * f, atol=1e-5)
    # 0/1 groups of 8 with 1..7 successes: GRPO's mass shrinks with sparse rewards, RAPO's is constant
    rewards, groups = [], []
    for k in range(1, 8):
        rewards += [1.0] * k + [0.0] * (8 - k)
        groups += [k] * 8
    g = torch.tensor(groups)
    rapo_adv, grpo_adv = run("rapo", make_input(rewards, groups))[:, 0], run("grpo", make_input(rewards, groups))[:, 0]
    rapo_mass = torch.stack([rapo_adv[g == k].abs().sum() for k in range(1, 8)])
    grpo_mass = torch.stack([grpo_adv[g == k].abs().sum() for k in range(1, 8)])
    assert torch.allclose(rapo_mass, rapo_mass[0].expand(7), rtol=1e-5)
    assert grpo_mass[0] < 0.7 * grpo_mass[3]
    assert torch.allclose(run("rapo(power=0)", make_input(rewards, groups)), run("grpo", make_input(rewards, groups)))


# ---------------------------------------------------------------------------------------------------------
# MaxRL
# ---------------------------------------------------------------------------------------------------------
def test_maxrl_hand_values():
    cfg = MaxrlParams(baseline=False)
    # n = 4, K = 1: the correct sample gets n/K = 4; K = 2: 2 each; all wrong: 0
    adv = run("maxrl", make_input([1, 0, 0, 0, 1, 1, 0, 0, 0, 0, 0, 0.0], [0] * 4 + [1] * 4 + [2] * 4), cfg)[:, 0]
    assert torch.allclose(adv, torch.tensor([4.0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 0, 0]))
    # order 1 = REINFORCE on the 0/1 reward; order 2 with n = 4, K = 2: 1 + C(2,1)/C(3,1) = 5/3
    assert torch.allclose(
        run("maxrl", make_input([1, 1, 0, 0.0]), replace(cfg, order=1))[:, 0], torch.tensor([1.0, 1, 0, 0])
    )
    assert torch.allclose(
        run("maxrl", make_input([1, 1, 0, 0.0]), replace(cfg, order=2))[:, 0], torch.tensor([5 / 3, 5 / 3, 0, 0])
    )
    # baseline, n = 4, K = 1: correct 4 * (1 - 0/3) = 4; wrong: -(1/3) * S(F=2) = -(1/3) * 4/2 = -2/3
    base = run("maxrl", make_input([1, 0, 0, 0.0]))[:, 0]
    assert torch.allclose(base, torch.tensor([4.0, -2 / 3, -2 / 3, -2 / 3]), atol=1e-6)
    # the baseline zeroes all-correct and all-wrong groups; order 1 with baseline is RLOO
    assert (run("maxrl", make_input([1, 1, 1.0, 0, 0, 0], [0, 0, 0, 1, 1, 1])) == 0).all()
    rng = random.Random(5)
    for _ in range(10):
        rewards, valid, groups, *_ = random_batch(rng, binary=True)
        a = run("maxrl(order=1)", make_input(rewards, groups, valid))
        assert torch.allclose(a, run("rloo", make_input(rewards, groups, valid)), atol=1e-6)


@pytest.mark.parametrize("order,baseline", [(0, False), (0, True), (1, False), (3, True)])
def test_maxrl_is_unbiased_on_a_softmax_policy(order, baseline):
    """Monte Carlo over many groups: mean_i A_i grad log pi(y_i) (what the loss averages per group)
    matches grad J_T = sum_{k<=T} (1-p)^(k-1) grad p; at T = n that is (1 - (1-p)^n) grad log p."""
    n, groups = 6, 100_000
    theta = torch.tensor([0.3, -0.9, 1.2, 0.4, -0.2], dtype=torch.float64)
    pi = torch.softmax(theta, 0)
    correct = torch.tensor([1.0, 1.0, 0.0, 0.0, 0.0], dtype=torch.float64)
    p = float((pi * correct).sum())
    eye = torch.eye(5, dtype=torch.float64)
    grad_p = ((correct * pi)[:, None] * (eye - pi)).sum(0)  # sum_y in C pi_y (e_y - pi)
    t = n if order == 0 else order
    truth = sum((1 - p) ** (k - 1) for k in range(1, t + 1)) * grad_p
    if order == 0:
        assert torch.allclose(truth, (1 - (1 - p) ** n) * grad_p / p)  # the truncated grad log p
    y = torch.multinomial(pi, n * groups, replacement=True, generator=torch.Generator().manual_seed(11))
    inp = make_input(correct[y].float().tolist(), torch.arange(groups).repeat_interleave(n).tolist())
    adv = run("maxrl", inp, MaxrlParams(order=order, baseline=baseline))[:, 0].double()
    per_group = (adv[:, None] * (eye[y] - pi)).view(groups, n, 5).mean(1)  # (G, 5)
    est, se = per_group.mean(0), per_group.std(0) / math.sqrt(groups)
    assert ((est - truth).abs() <= 4.5 * se + 1e-9).all(), (est, truth, se)
    if order == 0:  # the RL gradient (grad p) is a different target: the estimator is not aiming at it
        assert ((est - grad_p).abs() > 4.5 * se).any()


# ---------------------------------------------------------------------------------------------------------
# smoke: one trainer step per estimator
# ---------------------------------------------------------------------------------------------------------
REWARD = """
def starts_with_seven(prompts, completions, **fields):
    return [1.0 if c.startswith("7") else 0.0 for c in completions]

def short(prompts, completions, **fields):
    return [1.0 if len(c) <= 2 else 0.0 for c in completions]
"""


@pytest.fixture
def seven_task(tmp_path):
    rows = [
        {"prompt": f"{i}+{j}=", "answer": "7", "task": "even" if (i + j) % 2 == 0 else "odd"}
        for i in range(10)
        for j in range(10)
    ]
    (tmp_path / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (tmp_path / "eval.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows[:10]))
    (tmp_path / "seven.py").write_text(REWARD)
    rewards = json.dumps([f"{tmp_path}/seven.py:starts_with_seven", f"{tmp_path}/seven.py:short"])
    return [
        f"data.train={tmp_path}/train.jsonl",
        f"data.eval={tmp_path}/eval.jsonl",
        f"reward={rewards}",
        f"output_dir={tmp_path}",
    ]


def trainer_for(overrides):
    cfg = load_config("default", TINY + overrides)
    run_, policy = prepare(cfg, Path(cfg.output_dir) / cfg.name, {})
    parts = RLParts(
        policy, run_.task.train, run_.encoder, make_engine(cfg.rollout.backend), run_.rewards, run_.settings
    )
    return RLTrainer(cfg, parts), policy


@pytest.mark.parametrize("name", NEW)
def test_one_trainer_step_updates(seven_task, name):
    spec = f"{name}(threshold=0.5)" if name in ("exppo", "success_adaptive", "maxrl") else name
    trainer, policy = trainer_for(
        seven_task
        + [
            f"algorithm.advantage={spec}",
            "train.steps=1",
            "train.prompts_per_step=4",
            "rollout.samples_per_prompt=4",
            "train.optim.lr=1e-2",
        ]
    )
    seen = {}
    estimator = trainer.advantage

    def spy(inp, cfg):
        seen["inp"], seen["adv"] = inp, estimator(inp, cfg)
        return seen["adv"]

    trainer.advantage = spy
    before = [p.detach().clone() for p in policy.model.parameters()]
    m = trainer.step()
    extras = seen["inp"].extras
    assert (
        extras["components"].shape[1] == 2
        and extras["task_index"].shape == (16,)
        and extras["logprobs"].shape == seen["inp"].mask.shape
    )
    assert seen["adv"].abs().sum() > 0 and torch.isfinite(seen["adv"]).all()
    assert all(torch.isfinite(p).all() for p in policy.model.parameters())
    assert any(not torch.equal(a, p) for a, p in zip(before, policy.model.parameters()))
    assert m["loss/skipped_steps"] == 0
