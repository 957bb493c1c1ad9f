"""Advantage estimators (grpo, dr_grpo, rloo) and their shared group statistics."""

from __future__ import annotations

import dataclasses
import inspect
import math
import random
import re

import pytest
import torch
import yaml

from ascent.algorithms import ADVANTAGES, AdvantageInput
from ascent.algorithms.advantages import TacoParams, group_moments
from ascent.algorithms.gae import GaeParams
from ascent.config import load_config
from ascent.config.loader import read_recipe
from ascent.config.schema import AlgorithmConfig
from ascent.registry import UnknownNameError
from ascent.typed import ConfigError, fields_help

CFG = AlgorithmConfig()
NAMES = ("grpo", "dr_grpo", "rloo")


def make_input(rewards, valid=None, groups=None, mask=None) -> AdvantageInput:
    r = torch.tensor(rewards, dtype=torch.float32)
    n = r.shape[0]
    v = torch.ones(n, dtype=torch.bool) if valid is None else torch.tensor(valid, dtype=torch.bool)
    g = torch.zeros(n, dtype=torch.long) if groups is None else torch.tensor(groups, dtype=torch.long)
    m = torch.ones(n, 3) if mask is None else mask
    return AdvantageInput(rewards=r, valid=v, group_index=g, mask=m)


# ---------------------------------------------------------------------------------------------------------
# (a) hand-computed values
# Group 0: rewards [1, 0, 0, 1]: mean 0.5, deviations +-0.5, sum of squares 1, unbiased var 1/3,
#   std 0.5773503 -> GRPO +-0.5 / 0.5773503 = +-0.8660254 (sqrt(3)/2); Dr. GRPO +-0.5;
#   RLOO: 1 - (0+0+1)/3 = 2/3, 0 - (1+0+1)/3 = -2/3.
# Group 1: rewards [1, 1, 1, 0]: mean 0.75, deviations 0.25 x3, -0.75; sum of squares 3/16 + 9/16 = 0.75,
#   unbiased var 0.25, std 0.5 -> GRPO 0.5, 0.5, 0.5, -1.5; Dr. GRPO 0.25 x3, -0.75;
#   RLOO: 1 - (1+1+0)/3 = 1/3 (x3), 0 - (1+1+1)/3 = -1.
# ---------------------------------------------------------------------------------------------------------
HAND_REWARDS = [1.0, 0.0, 0.0, 1.0, 1.0, 1.0, 1.0, 0.0]
HAND_GROUPS = [0, 0, 0, 0, 1, 1, 1, 1]
HAND_EXPECTED = {
    "grpo": [0.8660254, -0.8660254, -0.8660254, 0.8660254, 0.5, 0.5, 0.5, -1.5],
    "dr_grpo": [0.5, -0.5, -0.5, 0.5, 0.25, 0.25, 0.25, -0.75],
    "rloo": [2 / 3, -2 / 3, -2 / 3, 2 / 3, 1 / 3, 1 / 3, 1 / 3, -1.0],
}


@pytest.mark.parametrize("name", NAMES)
def test_hand_computed_values(name):
    inp = make_input(HAND_REWARDS, groups=HAND_GROUPS, mask=torch.ones(8, 1))
    adv = ADVANTAGES.get(name)(inp, CFG)
    assert adv.shape == (8, 1)
    # std_eps=1e-6 moves GRPO's values by ~1e-6 relative: tolerance 1e-5
    assert torch.allclose(adv[:, 0], torch.tensor(HAND_EXPECTED[name]), atol=1e-5, rtol=0)


def test_grpo_uses_unbiased_std():
    # two samples [0, 2]: mean 1, unbiased std sqrt(2) (biased std would be 1 and give +-1)
    adv = ADVANTAGES.get("grpo")(make_input([0.0, 2.0], mask=torch.ones(2, 1)), CFG)[:, 0]
    assert torch.allclose(adv, torch.tensor([-1 / math.sqrt(2), 1 / math.sqrt(2)]), atol=1e-5)


def test_grpo_std_eps_is_added_to_std():
    cfg = AlgorithmConfig(std_eps=0.5)
    # [0, 2]: (r - 1) / (sqrt(2) + 0.5) = +-0.5224077
    adv = ADVANTAGES.get("grpo")(make_input([0.0, 2.0], mask=torch.ones(2, 1)), cfg)[:, 0]
    assert torch.allclose(adv, torch.tensor([-0.5224077, 0.5224077]), atol=1e-6)


# ---------------------------------------------------------------------------------------------------------
# (b) loop reference on random inputs
# ---------------------------------------------------------------------------------------------------------
def reference(name: str, rewards: list[float], valid: list[bool], groups: list[int], eps: float) -> list[float]:
    """Slow, obvious per-sample implementation."""
    out = []
    for i in range(len(rewards)):
        if not valid[i]:
            out.append(0.0)
            continue
        mates = [rewards[j] for j in range(len(rewards)) if groups[j] == groups[i] and valid[j]]
        n = len(mates)
        mean = sum(mates) / n
        if name == "grpo":
            std = math.sqrt(sum((x - mean) ** 2 for x in mates) / (n - 1)) if n > 1 else 0.0
            out.append((rewards[i] - mean) / (std + eps))
        elif name == "dr_grpo":
            out.append(rewards[i] - mean)
        else:  # rloo: r_i minus the mean of the OTHER valid samples of the group
            others = [rewards[j] for j in range(len(rewards)) if j != i and groups[j] == groups[i] and valid[j]]
            out.append(rewards[i] - sum(others) / len(others) if others else 0.0)
    return out


def random_batch(rng: random.Random, dyadic: bool):
    rewards, valid, groups = [], [], []
    for g in range(rng.randint(1, 8)):
        size = rng.choice([1, 1, 2, 3, 4, 5, 8])
        for _ in range(size):
            ok = rng.random() > 0.25
            r = rng.choice([0.0, 0.5, 1.0]) if dyadic else rng.gauss(0.0, 2.0)
            rewards.append(r if ok else math.nan)
            valid.append(ok)
            groups.append(g)
    return rewards, valid, groups


@pytest.mark.parametrize("name", NAMES)
def test_matches_loop_reference_on_random_input(name):
    rng = random.Random(1234)
    for trial in range(60):
        rewards, valid, groups = random_batch(rng, dyadic=trial % 2 == 0)
        n = len(rewards)
        T = rng.randint(1, 6)
        mask = (torch.rand(n, T, generator=torch.Generator().manual_seed(trial)) < 0.7).float()
        inp = make_input(rewards, valid=valid, groups=groups, mask=mask)
        adv = ADVANTAGES.get(name)(inp, CFG)
        want_seq = torch.tensor(reference(name, rewards, valid, groups, CFG.std_eps), dtype=torch.float32)
        assert adv.shape == (n, T)
        assert torch.isfinite(adv).all()
        assert torch.allclose(adv, want_seq[:, None] * mask, rtol=1e-4, atol=1e-5), (trial, name)
        # invalid samples get exactly zero; so do groups of one valid sample
        inv = ~torch.tensor(valid)
        assert (adv[inv] == 0).all()
        for i in range(n):
            if valid[i] and sum(1 for j in range(n) if groups[j] == groups[i] and valid[j]) == 1:
                assert (adv[i] == 0).all()


@pytest.mark.parametrize("name", NAMES)
def test_invalid_samples_are_left_out_of_group_statistics(name):
    # group [1, 0, NaN(invalid), 100(invalid)]: only [1, 0] count -> the same as a group of two
    with_invalid = make_input([1.0, 0.0, math.nan, 100.0], valid=[True, True, False, False], mask=torch.ones(4, 1))
    alone = make_input([1.0, 0.0], mask=torch.ones(2, 1))
    adv = ADVANTAGES.get(name)(with_invalid, CFG)[:, 0]
    want = ADVANTAGES.get(name)(alone, CFG)[:, 0]
    assert torch.equal(adv[:2], want)
    assert adv[2].item() == 0.0 and adv[3].item() == 0.0


@pytest.mark.parametrize("name", NAMES)
def test_group_of_size_one_gets_zero(name):
    inp = make_input([0.3, 5.0, 1.0], groups=[0, 1, 1], mask=torch.ones(3, 2))
    adv = ADVANTAGES.get(name)(inp, CFG)
    assert (adv[0] == 0).all()


# ---------------------------------------------------------------------------------------------------------
# (c) output shape and mask
# ---------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", NAMES)
def test_output_is_sequence_advantage_times_completion_mask(name):
    # 4 sequences, T=7: 2 prompt tokens, completions of length 5, 3, 1, 4, then padding
    mask = torch.zeros(4, 7)
    for i, length in enumerate([5, 3, 1, 4]):
        mask[i, 2 : 2 + length] = 1.0
    inp = make_input([1.0, 0.0, 0.0, 1.0], mask=mask)
    adv = ADVANTAGES.get(name)(inp, CFG)
    seq = torch.tensor(HAND_EXPECTED[name][:4])
    assert adv.shape == (4, 7)
    assert torch.allclose(adv, seq[:, None] * mask, atol=1e-5)
    assert (adv[mask == 0] == 0).all()  # prompt and padding positions exactly zero
    # every completion token of a sequence carries the same value
    for i in range(4):
        vals = adv[i][mask[i] == 1]
        assert torch.equal(vals, vals[0].expand_as(vals))


# ---------------------------------------------------------------------------------------------------------
# (d) all-equal groups
# ---------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("value", [0.0, 1.0, 0.5, -2.0])
def test_all_equal_rewards_give_zero_advantage(name, value):
    inp = make_input([value] * 8 + [1.0, 0.0], groups=[0] * 8 + [1, 1], mask=torch.ones(10, 3))
    adv = ADVANTAGES.get(name)(inp, CFG)
    assert (adv[:8] == 0).all()
    assert (adv[8:] != 0).all()  # the other group is untouched


@pytest.mark.parametrize("name", ["dr_grpo", "rloo"])
@pytest.mark.parametrize("value,size", [(0.7, 7), (2.7, 13), (0.1, 13)])
def test_all_equal_non_dyadic_rewards_near_zero_without_std(name, value, size):
    inp = make_input([value] * size, mask=torch.ones(size, 1))
    adv = ADVANTAGES.get(name)(inp, CFG)
    assert adv.abs().max().item() < 1e-6


@pytest.mark.parametrize("value,size", [(0.7, 7), (2.7, 13)])
def test_grpo_all_equal_non_dyadic_rewards_give_zero(value, size):
    inp = make_input([value] * size, mask=torch.ones(size, 1))
    adv = ADVANTAGES.get("grpo")(inp, CFG)
    assert adv.abs().max().item() < 1e-4


# ---------------------------------------------------------------------------------------------------------
# (e) registry
# ---------------------------------------------------------------------------------------------------------
def test_unknown_name_lists_valid_names():
    with pytest.raises(UnknownNameError) as info:
        ADVANTAGES.get("ppo_gae_nope")
    msg = str(info.value)
    assert "ppo_gae_nope" in msg
    for name in NAMES:
        assert name in msg
    assert isinstance(info.value, KeyError)
    assert set(NAMES) <= set(ADVANTAGES.names())


# ---------------------------------------------------------------------------------------------------------
# (f) parameters: each estimator's technique knobs are its own frozen params dataclass, set in its spec
# ---------------------------------------------------------------------------------------------------------
WITH_PARAMS = {
    "taco",
    "exppo",
    "aem",
    "success_adaptive",
    "sa_mrpo",
    "tmn",
    "rapo",
    "maxrl",
    "tree",
    "progress",
    "serl",
    "reinforce_pp",
    "turn_feedback",
    "explore_group",
    "gae",
    "rft",
    "prm",
    "q_evolve",
    "spa",
    "relax",
    "soar",
    "duration_aware",
    "grpo_mr",
}
NEED_A_VALUE = {"prm": "path is required"}  # a piece that cannot run without a file names it in its error


def test_estimators_with_knobs_declare_params():
    assert {e.name for e in ADVANTAGES.entries() if e.params is not None} == WITH_PARAMS


@pytest.mark.parametrize("name", ADVANTAGES.names())
def test_params_classes_are_frozen_documented_and_default_constructible(name):
    cls = ADVANTAGES.entry(name).params
    if cls is None:
        assert ADVANTAGES.resolve(name).params is None
        return
    assert dataclasses.is_dataclass(cls) and cls.__dataclass_params__.frozen
    if name in NEED_A_VALUE:
        with pytest.raises(ValueError, match=NEED_A_VALUE[name]):
            cls()
        assert all(help_text.strip() for _, _, _, help_text in fields_help(cls))
        return
    defaults = cls()
    first = dataclasses.fields(cls)[0].name
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(defaults, first, getattr(defaults, first))
    for field, _, _, help_text in fields_help(cls):
        assert help_text.strip(), f"{name}.{field} has no help docstring"
        assert not re.search(r"#\d", help_text), (
            f"{name}.{field}: cite the paper by authors, year and arXiv id, not a row number"
        )
    # the function's own default is the defaults instance, and the bare spec resolves to it
    assert inspect.signature(ADVANTAGES.get(name)).parameters["params"].default == defaults
    piece = ADVANTAGES.resolve(name)
    assert piece.params == defaults and piece.spec == name


def test_old_flat_knobs_fail_naming_the_new_spelling():
    with pytest.raises(ConfigError, match=re.escape("algorithm.advantage=taco(alpha=0.5)")):
        load_config("default", ["algorithm.taco_alpha=0.5"])
    for old, new in [
        ("algorithm.gae_lambda=0.9", "algorithm.advantage=gae(lam=0.9)"),
        ("algorithm.value_lr=1e-5", "algorithm.advantage=gae(value_lr=1e-5)"),
        ("algorithm.maxrl_baseline=false", "algorithm.advantage=maxrl(baseline=false)"),
        ("algorithm.explore_group_step_coef=0.5", "algorithm.advantage=explore_group(step_coef=0.5)"),
    ]:
        with pytest.raises(ConfigError, match=re.escape(new)):
            load_config("default", [old])


def test_spec_sets_params_string_and_mapping_forms():
    cfg = load_config("default", ["algorithm.advantage.taco.alpha=0.5"])
    assert cfg.algorithm.advantage == "taco(alpha=0.5)"
    assert ADVANTAGES.resolve(cfg.algorithm.advantage).params == TacoParams(alpha=0.5)
    cfg = load_config("default", ["algorithm.advantage=gae(lam=0.9, value_lr=1e-5, whiten=false)"])
    assert ADVANTAGES.resolve(cfg.algorithm.advantage).params == GaeParams(lam=0.9, value_lr=1e-5, whiten=False)
    assert (
        load_config("default", ["algorithm.advantage=taco(alpha=0.01)"]).algorithm.advantage == "taco"
    )  # defaults are left out


def test_recipe_mapping_form(tmp_path):
    raw = read_recipe("default")
    raw["algorithm"]["advantage"] = {"gae": {"lam": 0.9, "value_clip": None}}
    path = tmp_path / "gae.yaml"
    path.write_text(yaml.safe_dump(raw))
    cfg = load_config(path)
    assert ADVANTAGES.resolve(cfg.algorithm.advantage).params == GaeParams(lam=0.9, value_clip=None)
    assert (
        load_config(path, ["algorithm.advantage.gae.gamma=0.99"]).algorithm.advantage
        == "gae(gamma=0.99, lam=0.9, value_clip=null)"
    )


@pytest.mark.parametrize(
    "spec,what",
    [
        ("gae(gamma=0)", "gamma must be in (0, 1]"),
        ("gae(gamma=1.5)", "gamma must be in (0, 1]"),
        ("gae(lam=1.5)", "lam must be in [0, 1]"),
        ("gae(lam=-0.1)", "lam must be in [0, 1]"),
        ("gae(value_lr=0)", "value_lr must be > 0"),
        ("gae(value_clip=-0.2)", "value_clip must be > 0"),
        ("taco(alpha=-1)", "alpha must be > 0"),
    ],
)
def test_out_of_range_params_fail_at_config_time(spec, what):
    with pytest.raises(ConfigError, match=re.escape(what)):
        ADVANTAGES.resolve(spec)
    with pytest.raises(ConfigError, match=re.escape(f"algorithm.advantage {spec.split('(')[0]}: {what}")):
        load_config("default", [f"algorithm.advantage={spec}"])


def test_unknown_or_mistyped_param_is_a_config_error():
    with pytest.raises(ConfigError, match="valid keys: alpha, floor, window"):
        ADVANTAGES.resolve("taco(alpah=0.5)")
    with pytest.raises(ConfigError, match="integer"):
        ADVANTAGES.resolve("taco(window=2.5)")
    with pytest.raises(ConfigError, match="takes no parameters"):
        ADVANTAGES.resolve("grpo(alpha=1)")


# ---------------------------------------------------------------------------------------------------------
# group_moments
# ---------------------------------------------------------------------------------------------------------
def test_group_moments_hand_values():
    # group 0: valid [1, 2, 3] -> count 3, mean 2, unbiased std 1
    # group 1: valid [5] (the NaN is invalid) -> count 1, mean 5, std 0
    # group 2: nothing valid -> count 0, mean 0, std 0
    values = torch.tensor([1.0, 2.0, 3.0, math.nan, 5.0, 7.0])
    groups = torch.tensor([0, 0, 0, 1, 1, 2])
    valid = torch.tensor([True, True, True, False, True, False])
    count, mean, std = group_moments(values, groups, valid)
    assert torch.equal(count, torch.tensor([3.0, 3.0, 3.0, 1.0, 1.0, 0.0]))
    assert torch.equal(mean, torch.tensor([2.0, 2.0, 2.0, 5.0, 5.0, 0.0]))
    assert torch.equal(std, torch.tensor([1.0, 1.0, 1.0, 0.0, 0.0, 0.0]))
    for t in (count, mean, std):
        assert t.shape == (6,) and torch.isfinite(t).all()


def test_group_moments_matches_torch_std():
    g = torch.Generator().manual_seed(0)
    values = torch.randn(12, generator=g, dtype=torch.float64)
    groups = torch.tensor([0] * 5 + [1] * 4 + [2] * 3)
    valid = torch.ones(12, dtype=torch.bool)
    count, mean, std = group_moments(values, groups, valid)
    for k, (lo, hi) in enumerate([(0, 5), (5, 9), (9, 12)]):
        part = values[lo:hi]
        assert torch.allclose(mean[lo:hi], part.mean().expand(hi - lo))
        assert torch.allclose(std[lo:hi], part.std(unbiased=True).expand(hi - lo))
        assert (count[lo:hi] == hi - lo).all()


def test_group_moments_empty():
    count, mean, std = group_moments(torch.zeros(0), torch.zeros(0, dtype=torch.long), torch.zeros(0, dtype=torch.bool))
    assert count.shape == mean.shape == std.shape == (0,)
