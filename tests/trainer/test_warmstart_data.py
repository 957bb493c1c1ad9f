"""Warm-start data builders (ascent/trainer/warmstart_data.py): CalibSFT's confidence targets, bin balancing,
verbalised confidence and correctness-conditional supervision, and a warm start on its data."""

from __future__ import annotations

import random

import pytest
import torch

from ascent.config.schema import OptimConfig
from ascent.data.prompts import PromptEncoder
from ascent.trainer.sft import SFTRun
from ascent.trainer.warmstart_data import (
    WARMSTART_DATA,
    CalibSFTParams,
    WarmStartDataContext,
    balance_bins,
    calibsft_batch,
    calibsft_items,
    confidence_bin,
    confidence_targets,
    verbalise,
)

ROWS = [{"prompt": f"{a}+{b}=", "answer": str(a + b), "a": a, "b": b} for a in (15, 21, 38) for b in (26, 11)]


def coin_teacher(row, rng):
    """Right with probability 0.5 when the ones digits carry, always right otherwise."""
    a, b = row["a"], row["b"]
    return str(a + b - 10) if (a % 10 + b % 10 >= 10 and rng.random() < 0.5) else str(a + b)


def test_targets_mix_correctness_and_success_rate():
    c = torch.tensor([[1.0, 1.0, 1.0, 1.0], [1.0, 0.0, 0.0, 0.0]])
    t = confidence_targets(c, 0.25)  # 0.25 c + 0.75 p; p = 1 and 0.25
    assert torch.allclose(t, torch.tensor([[1.0] * 4, [0.4375, 0.1875, 0.1875, 0.1875]]))
    assert torch.allclose(t.mean(-1), c.mean(-1))  # the expected target is the success rate (proper scoring)
    assert torch.equal(confidence_targets(c, 1.0), c) and torch.allclose(
        confidence_targets(c, 0.0)[1], torch.full((4,), 0.25)
    )


def test_bins_are_balanced():
    t = torch.tensor([0.05, 0.1, 0.15, 0.5, 0.55, 0.95, 0.97, 0.99, 1.0])
    bins = confidence_bin(t, 5).tolist()
    assert bins == [0, 0, 0, 2, 2, 4, 4, 4, 4]
    keep = balance_bins(bins, 0, random.Random(1))
    assert sorted(bins[i] for i in keep) == [0, 0, 2, 2, 4, 4]  # the smallest non-empty bin holds 2
    keep = balance_bins(bins, 3, random.Random(1))
    assert sorted(bins[i] for i in keep) == [0, 0, 0, 2, 2, 4, 4, 4]  # a bin short of per_bin keeps all
    assert verbalise(0.4375, 10) == "4" and verbalise(0.4375, 5, "decimal") == "0.50"


def test_items_and_correctness_conditional_supervision(tokenizer):
    ctx = WarmStartDataContext(ROWS, coin_teacher, PromptEncoder(tokenizer), tokenizer, seed=0)
    params = CalibSFTParams(samples=8, alpha=0.5, bins=4)
    items, stats = calibsft_items(ctx, params)
    by_prompt = {}
    for it in items:
        row = next(r for r in ROWS if r["prompt"] == it["prompt"])
        assert it["correct"] == (it["response"] == row["answer"])
        by_prompt.setdefault(it["prompt"], []).append(it)
    for it in items:  # no-carry rows: always right, target 1
        if it["prompt"] in ("21+11=",):
            assert it["target"] == 1.0 and it["confidence"] == "9"
    counts = {}
    for it in items:
        b = int(confidence_bin(torch.tensor([it["target"]]), 4))
        counts[b] = counts.get(b, 0) + 1
    assert len(set(counts.values())) == 1 and stats["calibsft/kept"] == len(items)
    batch = calibsft_batch(items, ctx.encoder, tokenizer, " ")
    for i, it in enumerate(items):
        start = len(ctx.encoder(it["prompt"]))
        n = len(it["response"])  # one token per character
        comp = batch.completion_mask[i, start : int(batch.attention_mask[i].sum())]
        assert comp[:n].tolist() == [float(it["correct"])] * n  # the response only when correct
        assert comp[n:].tolist() == [1.0, 1.0, 1.0]  # separator, confidence, EOS: always
        assert batch.completions[i] == f"{it['response']} {it['confidence']}"


def test_a_warm_start_on_calibsft_data_learns_the_confidence(tiny_policy, tokenizer):
    ctx = WarmStartDataContext(ROWS, coin_teacher, PromptEncoder(tokenizer), tokenizer, seed=0)
    rows, demos = WARMSTART_DATA.resolve("calibsft(samples=4, bins=2)")(ctx)
    job = SFTRun(tiny_policy, rows, demos, OptimConfig(lr=1e-2), 12, 8, 8, 0)
    losses = []
    job.run(lambda step, m: losses.append(m["loss/nll"]))
    assert all(torch.isfinite(torch.tensor(losses))) and sum(losses[-3:]) < sum(losses[:3])
    with pytest.raises(ValueError, match="samples"):
        CalibSFTParams(samples=1)
    with pytest.raises(ValueError, match="teacher"):
        WARMSTART_DATA.resolve("calibsft")(WarmStartDataContext(ROWS, None, ctx.encoder, tokenizer, 0))
