"""The sample log: what is written per sample, its size bound, and that a resumed run logs the same lines."""

from __future__ import annotations

import json
import math

import pytest
import torch

from ascent.app.pipeline import train
from ascent.config import ConfigError, load_config
from ascent.rewards.runner import RewardResult
from ascent.rollout.types import RolloutBatch
from ascent.trainer.samples import SampleLogger, StepSamples, read_samples, sample_rows
from tests.trainer.test_resume import TINY


def record() -> StepSamples:
    """3 groups x 2 samples, widths 5; sample 3's reward failed (NaN)."""
    n, t = 6, 5
    mask = torch.zeros(n, t)
    mask[:, 2:] = 1.0
    mask[1, 4] = 0.0  # sample 1 has 2 completion tokens
    batch = RolloutBatch(
        input_ids=torch.zeros(n, t, dtype=torch.long),
        attention_mask=torch.ones(n, t, dtype=torch.long),
        completion_mask=mask,
        sampled_logprobs=torch.zeros(n, t),
        group_index=torch.tensor([0, 0, 1, 1, 2, 2]),
        finished=torch.tensor([True, False, True, True, False, True]),
        prompts=[f"p{g}" for g in (0, 0, 1, 1, 2, 2)],
        completions=[f"c{i}" for i in range(n)],
        fields=[{"answer": str(g), "agent_x": 1} for g in (0, 0, 1, 1, 2, 2)],
    )
    components = torch.tensor([[1.0, 0.5], [0.0, 0.5], [1.0, math.nan], [math.nan, math.nan], [0, 0], [1, 1]])
    rewards = torch.tensor([1.5, 0.5, 1.0, math.nan, 0.0, 2.0])
    scores = RewardResult(rewards=rewards, valid=~rewards.isnan(), components=components)
    adv = torch.arange(n * t, dtype=torch.float32).reshape(n, t)
    return StepSamples(batch, scores, adv)


def test_rows_carry_what_the_step_saw():
    rows = sample_rows("rl", 7, record(), ["correct", "format"], groups=2)
    assert [(r["group"], r["sample"]) for r in rows] == [(0, 0), (0, 1), (1, 0), (1, 1)]
    first, second, fourth = rows[0], rows[1], rows[3]
    assert first["phase"] == "rl" and first["step"] == 7 and first["prompt"] == "p0" and first["completion"] == "c0"
    assert first["rewards"] == {"correct": 1.0, "format": 0.5} and first["reward"] == 1.5 and first["valid"]
    assert first["completion_tokens"] == 3 and first["advantage"] == pytest.approx((2 + 3 + 4) / 3)
    assert second["completion_tokens"] == 2 and second["advantage"] == pytest.approx((7 + 8) / 2)
    assert second["finished"] is False
    assert fourth["reward"] is None and fourth["rewards"] == {"correct": None, "format": None} and not fourth["valid"]
    assert first["fields"] == {"answer": "0"} and "agent" not in first  # agent_* fields only under "agent"
    json.dumps(rows)  # no NaN, nothing unserialisable


def test_rotation_bounds_the_files_and_read_back_keeps_order(tmp_path):
    log = SampleLogger(tmp_path, every=2, groups=3, max_mb=1e-6, reward_names=["correct", "format"])
    assert [s for s in range(1, 7) if log.due(s)] == [2, 4, 6]
    for step in (2, 4, 6):
        assert log.log("rl", step, record()) == 6
    assert log.log("rl", 8, None) == 0
    # each write past the limit moves the file aside: at most the current and one older file remain
    files = sorted(p.name for p in tmp_path.iterdir())
    assert files == ["samples.1.jsonl", "samples.jsonl"]
    assert [r["step"] for r in read_samples(tmp_path)] == [4] * 6 + [6] * 6
    assert SampleLogger(tmp_path, 0, 1, 1.0, []).due(10) is False


def test_truncate_after_drops_later_steps_and_a_torn_line(tmp_path):
    log = SampleLogger(tmp_path, every=1, groups=1, max_mb=50, reward_names=["correct", "format"])
    for step in (1, 2, 3):
        log.log("rl", step, record())
    log.log("control", 5, record())
    with open(tmp_path / "samples.jsonl", "a") as fh:
        fh.write('{"phase": "rl", "step": 4, "prom')  # killed mid-write
    log.truncate_after("rl", 2)
    assert [(r["phase"], r["step"]) for r in read_samples(tmp_path)] == [("rl", 1)] * 2 + [("rl", 2)] * 2 + [
        ("control", 5)
    ] * 2


def test_a_run_logs_its_samples_and_a_resumed_run_logs_the_same(tmp_path):
    over = TINY + [f"output_dir={tmp_path}", "logging.samples_every=2", "logging.samples_groups=4"]
    cfg = load_config("default", over)
    train(cfg.__class__(**{**cfg.__dict__, "name": "full"}))
    split = cfg.__class__(**{**cfg.__dict__, "name": "split"})
    assert train(split, stop_at=3) is None  # checkpoint at 3; sample lines for step 2 written
    train(run_dir=tmp_path / "split", resume=True)
    full, resumed = read_samples(tmp_path / "full"), read_samples(tmp_path / "split")
    assert full == resumed
    assert [r["step"] for r in full] == [2] * 16 + [4] * 16  # 4 prompts x 4 samples, every 2nd of 4 steps
    metrics = [json.loads(line) for line in (tmp_path / "full" / "metrics.jsonl").read_text().splitlines()]
    for step in (2, 4):
        rows = [r for r in full if r["step"] == step]
        m = next(x for x in metrics if x["phase"] == "rl" and x["step"] == step)
        valid = [r["reward"] for r in rows if r["valid"]]
        assert sum(valid) / len(valid) == pytest.approx(m["reward/mean"], abs=1e-6)
        for g in range(4):  # GRPO: a group's advantages sum to zero
            assert sum(r["advantage"] for r in rows if r["group"] == g) == pytest.approx(0.0, abs=1e-4)
        assert all(r["prompt"] and isinstance(r["completion"], str) and "answer" in r["fields"] for r in rows)


@pytest.mark.parametrize("bad", ["logging.samples_every=-1", "logging.samples_groups=-2", "logging.samples_max_mb=0"])
def test_bad_sample_settings_are_config_errors(bad):
    with pytest.raises(ConfigError, match=bad.split("=")[0]):
        load_config("default", [bad])
