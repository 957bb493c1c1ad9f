"""The evaluator's strict and lenient accuracies, mean completion length and pass@k on a row subset."""

from __future__ import annotations

import itertools
from math import comb

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


def test_pass_at_several_k_from_one_sampling_match_a_subset_enumeration():
    """pass@k for k in 1, 4, 16 from the same 16 samples per row: each equals the fraction of k-subsets of the row's
    samples holding a correct one (the definition the unbiased estimator computes in closed form)."""
    n = 16
    verdicts = torch.zeros(4, n, dtype=torch.bool)  # (P, n) rows with 0, 1, 5 and 16 correct samples
    verdicts[1, 3] = True
    verdicts[2, [0, 2, 7, 9, 15]] = True
    verdicts[3] = True
    ev = Evaluator([], None, None, None, None)
    ev.judge = lambda *a, **k: (torch.ones(4, 1, dtype=torch.bool), None, 3.0, [])  # greedy: all right
    ev.correct = lambda policy, m, temperature, generator, rows: (verdicts[:, :m], [])
    out = ev(None, pass_k=n)
    assert set(out) == {"accuracy", "completion_len", "pass@1", "pass@4", "pass@16"}

    def enumerated(k: int) -> float:
        per_row = []
        for row in verdicts.tolist():
            subsets = list(itertools.combinations(row, k))
            per_row.append(sum(any(s) for s in subsets) / len(subsets))
        return sum(per_row) / len(per_row)

    assert out["pass@1"] == pytest.approx((0 + 1 / 16 + 5 / 16 + 1) / 4)
    assert out["pass@4"] == pytest.approx(enumerated(4))
    assert out["pass@4"] == pytest.approx((0 + 4 / 16 + (1 - comb(11, 4) / comb(16, 4)) + 1) / 4)  # 1 - 330/1820
    assert out["pass@16"] == pytest.approx(0.75)  # any correct among all 16
    assert out["pass@1"] < out["pass@4"] < out["pass@16"]
    assert set(ev(None, pass_k=8)) >= {"pass@1", "pass@4", "pass@8"} and "pass@16" not in ev(None, pass_k=8)


def test_eval_reward_replaces_the_training_rewards_as_held_out_grader():
    """Training on a proxy (here last_number with weights) must not change what held-out accuracy measures."""
    from ascent.app.pipeline import make_evaluator
    from ascent.config import load_config
    from ascent.tasks import load_task

    cfg = load_config("default", ["reward=[last_number,exact_answer]", "reward_weights=[1.0,0.5]"])
    task = load_task(cfg.data, cfg.seed)
    settings = SamplingSettings(max_new_tokens=4, eos_id=0, pad_id=0)
    proxy = make_evaluator(cfg, task, PromptEncoder(task.tokenizer), settings)
    assert proxy.rewards.names == ["last_number", "exact_answer"]
    graded = load_config("default", ["reward=[last_number,exact_answer]", "eval.reward=answer_is"])
    truth = make_evaluator(graded, task, PromptEncoder(task.tokenizer), settings)
    assert truth.rewards.names == ["answer_is"] and truth.rewards.weights == [1.0]
