"""benchmarks/agent_recipe_study.py (the multi-turn recipe study, arXiv:2510.01132): each arm's config differs from
the grpo_sparse arm only in its factor, the control imitates as many episodes as RL plays, and the factor table's
paired bootstrap differences, means and verdicts are exact on hand-made records."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from ascent.config import load_config  # noqa: E402
from benchmarks import agent_recipe_study as study  # noqa: E402


def config(arm: str, seed: int = 3):
    argv = study.arm_overrides(arm, seed, "/tmp/base/warmstart", 15, Path("/tmp/study"))
    return load_config(argv[0], argv[1:])


def flat(cfg) -> dict[str, str]:
    """Every config key -> its value as text (nested dataclasses flattened)."""
    from dataclasses import fields, is_dataclass

    out = {}

    def walk(obj, prefix):
        for f in fields(obj):
            v = getattr(obj, f.name)
            if is_dataclass(v):
                walk(v, f"{prefix}{f.name}.")
            else:
                out[prefix + f.name] = str(v)

    walk(cfg, "")
    return out


def test_arms_differ_only_in_their_factor():
    cfgs = {arm: flat(config(arm)) for arm in study.ARMS}
    base = cfgs["grpo_sparse"]
    diff = {arm: {k for k in base if cfgs[arm][k] != base[k]} - {"name"} for arm in study.ARMS}
    assert diff["rloo_sparse"] == {"algorithm.advantage", "control.enabled"}
    assert diff["grpo_dense"] == {"data.task", "reward", "control.enabled"}
    assert diff["rloo_dense"] == {"algorithm.advantage", "data.task", "reward", "control.enabled"}
    c = config("rloo_dense")
    assert c.algorithm.advantage == "rloo" and c.reward == "game_progress" and "reward=progress" in str(c.data.task)
    assert c.eval.reward == "game_won"  # every arm is judged by the held-out win rate
    g = config("grpo_sparse")
    assert g.warmstart.init_from == "/tmp/base/warmstart" and g.seed == 3 and g.train.steps == 15
    assert g.train.checkpoint_every == 15 and g.control.enabled and g.name == "grpo_sparse-s3"
    # the SFT-only arm imitates as many episodes per step as RL plays: equal budgets
    assert g.warmstart.batch_size == g.train.prompts_per_step * g.rollout.samples_per_prompt == 64


def test_bad_arm_and_steps_are_clear_errors():
    with pytest.raises(ValueError, match="unknown arm 'ppo'; valid: grpo_sparse"):
        study.arm_overrides("ppo", 0, "b", 5, Path("w"))
    with pytest.raises(ValueError, match="steps must be >= 1"):
        study.arm_overrides("grpo_sparse", 0, "b", 0, Path("w"))


def test_record_gains():
    s = {"accuracy_before_rl": 0.25, "accuracy_after_rl": 0.5, "accuracy_control": 0.3, "wall_seconds": 9.0}
    r = study.record(s, {"before": 0.1, "after": 0.05})
    assert r == pytest.approx(
        {
            "accuracy_before_rl": 0.25,
            "accuracy_after_rl": 0.5,
            "accuracy_control": 0.3,
            "gain_small": 0.25,
            "medium_before": 0.1,
            "medium_after": 0.05,
            "gain_medium": -0.05,
        }
    )
    assert "gain_medium" not in study.record(s)


def test_factor_table_paired_bootstrap():
    after = study.AFTER
    sparse = {s: {after: v, "accuracy_control": v - 0.1} for s, v in enumerate([0.2, 0.4, 0.3, 0.5, 0.1])}
    # dense = sparse + a constant 0.05: every resample's mean difference is 0.05
    dense = {s: {after: r[after] + 0.05} for s, r in sparse.items()}
    rloo = {s: {after: r[after] + d} for (s, r), d in zip(sparse.items(), [0.1, -0.1, 0.2, -0.2, 0.0])}
    rows = study.factor_table({"grpo_sparse": sparse, "grpo_dense": dense, "rloo_sparse": rloo})
    by = {r["factor"]: r for r in rows}
    assert set(by) == {"dense - sparse (GRPO)", "GRPO - RLOO (sparse)", "SFT+RL - SFT only (equal episodes)"}
    d = by["dense - sparse (GRPO)"]
    assert d["seeds"] == 5 and d["diff"] == pytest.approx(0.05) and d["ci95"] == pytest.approx([0.05, 0.05])
    assert d["arm_mean"] == pytest.approx(0.35) and d["control_mean"] == pytest.approx(0.3) and d["shown"] == "yes"
    p = by["GRPO - RLOO (sparse)"]  # differences -0.1, 0.1, -0.2, 0.2, 0: mean 0, interval straddles it
    assert p["diff"] == pytest.approx(0.0) and p["ci95"][0] < 0 < p["ci95"][1] and p["shown"] == "not shown"
    assert p["ci95"][0] >= -0.2 and p["ci95"][1] <= 0.2  # a percentile interval stays within the seen values
    assert by["SFT+RL - SFT only (equal episodes)"]["diff"] == pytest.approx(0.1)
    # a seed missing on one side is left out of the pair; a worse arm reads "opposite"
    worse = {s: {after: r[after] - 0.1 - 0.01 * s} for s, r in sparse.items() if s < 4}
    [row] = study.factor_table({"grpo_sparse": sparse, "grpo_dense": worse}, study.FACTORS[:1])
    assert row["seeds"] == 4 and row["diff"] == pytest.approx(-0.115) and row["shown"] == "opposite"
    assert row["ci95"][1] < 0
    table = study.markdown([row])
    assert "| reward | dense - sparse (GRPO) |" in table and "-0.115 [" in table and "| opposite |" in table
