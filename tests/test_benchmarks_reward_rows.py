"""The issue-42 reward-row benchmarks run and their arms learn in the measured direction at a tiny budget (fixed
seeds, one thread; the docs' figures come from the full runs in docs/applications.md)."""

from __future__ import annotations

import json

import pytest
import torch

from benchmarks import audiomap_ectr, generative_cm_grpo, gui_dense_reward, tat_r1_toy

pytestmark = pytest.mark.usefixtures("one_thread")


def test_gui_dense_reward_moves_clicks_where_the_binary_one_cannot():
    boxes = gui_dense_reward.make_screen(0)
    binary = gui_dense_reward.evaluate(gui_dense_reward.train(boxes, "binary", 20, 0), boxes)
    dense = gui_dense_reward.evaluate(gui_dense_reward.train(boxes, "se_gui", 20, 0), boxes)
    assert dense["distance"] < binary["distance"] - 50  # measured: 242 vs 355 pixels


def test_cm_grpo_benchmark_raises_the_reward_over_the_untuned_model():
    row = generative_cm_grpo.run_seed(0, steps=3, distill_steps=30, kl_coef=0.0)
    assert row["cm_grpo"]["reward"] > row["untuned"]["reward"]  # measured: 0.058 vs 0.031
    assert json.dumps(generative_cm_grpo.summary([row, row]))  # the summary of paired rows serialises


def test_tat_r1_term_reward_raises_term_accuracy_early(tmp_path):
    from ascent.rewards.runner import resolve_reward

    lang = tat_r1_toy.make_language(0)
    corpus = tmp_path / "parallel.jsonl"
    rows = [
        {"source": tat_r1_toy.text(s, lang["src"]), "answer": tat_r1_toy.text(s, lang["tgt"])} for s in lang["train"]
    ]
    corpus.write_text("".join(json.dumps(r) + "\n" for r in rows))
    f1, term = resolve_reward("answer_f1"), resolve_reward(f"term_align(corpus={corpus}, key_df=0.15)")

    def term_acc(logits: torch.Tensor) -> float:
        p = logits.softmax(-1)
        return float(torch.stack([p[w, w] for s in lang["test"] for w in s if w >= tat_r1_toy.COMMON]).mean())

    alone = term_acc(tat_r1_toy.train(lang, [f1], 6, 0, 0.05))
    both = term_acc(tat_r1_toy.train(lang, [f1, term], 6, 0, 0.05))
    assert both > alone > term_acc(lang["logits"])


def test_audiomap_ectr_benchmark_runs_both_arms():
    clips = audiomap_ectr.make_clips(0)
    for arm in ("tiou", "ectr"):
        scores = audiomap_ectr.evaluate(audiomap_ectr.train(clips, arm, 3, 0), clips)
        assert set(scores) == {"binding", "label_recall", "tiou_any_label"} and 0 <= scores["binding"] <= 1
