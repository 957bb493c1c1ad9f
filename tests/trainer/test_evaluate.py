"""The evaluator's strict and lenient accuracies, mean completion length and pass@k on a row subset."""

from __future__ import annotations

import pytest
import torch

from ascent.data.prompts import PromptEncoder
from ascent.rewards.runner import RewardRunner
from ascent.rollout import make_engine
from ascent.rollout.types import SamplingSettings
from ascent.trainer.evaluate import Evaluator


def test_strict_lenient_length_and_pass_k_rows(tiny_policy):
    policy, tok = tiny_policy, tiny_policy.tokenizer
    rows = [{"prompt": f"{i}+{j}=", "answer": str(i + j)} for i in range(4) for j in range(3)]
    encoder = PromptEncoder(tok)
    settings = SamplingSettings(4, policy.eos_id, policy.pad_id, 0.0)
    engine = make_engine("ascent")
    greedy = engine.generate(policy.model, [encoder(r["prompt"]) for r in rows], 1, settings, None)
    texts = [
        tok.decode([t for t in row.tolist() if t != policy.pad_id], skip_special_tokens=True) for row in greedy.tokens
    ]
    # Grade against what the model says: strict wants the exact text, lenient only its last number.
    for r, t in zip(rows, texts):
        r["answer"] = t.strip() if t.strip() else "0"
    rows[0]["answer"] = "x"  # wrong for both graders
    nums = [t.replace("+", " ").replace("=", " ").split() for t in texts]
    rows[1]["answer"] = nums[1][-1] if nums[1] and nums[1][-1] != texts[1].strip() else "y"
    ev = Evaluator(
        rows,
        encoder,
        engine,
        RewardRunner(["exact_answer"]),
        settings,
        batch_size=5,
        lenient=RewardRunner(["last_number"]),
        pass_k_rows=4,
    )
    out = ev(policy, pass_k=2, temperature=1.0, seed=0)
    strict = [float(t.strip() == r["answer"]) for t, r in zip(texts, rows)]
    assert out["accuracy"] == pytest.approx(sum(strict) / len(rows))
    lenient = RewardRunner(["last_number"]).score([""] * len(rows), texts, [{"answer": r["answer"]} for r in rows])
    expected = float(((lenient.components[:, 0] >= 1.0) & lenient.valid).float().mean())
    assert abs(out["accuracy_lenient"] - expected) < 1e-6
    assert abs(out["completion_len"] - float(greedy.lengths.float().mean())) < 1e-6
    ok, _ = ev.correct(policy, 2, 1.0, torch.Generator().manual_seed(0), 4)
    assert ok.shape == (4, 2)  # pass@k on the first pass_k_rows rows only
    assert set(out) >= {"accuracy", "accuracy_lenient", "completion_len", "pass@1", "pass@2"}
    assert "accuracy_lenient" not in Evaluator(rows, encoder, engine, RewardRunner(["exact_answer"]), settings)(policy)
