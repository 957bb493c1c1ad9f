"""RL learns on a trivially learnable task, every loss updates parameters, and bad steps are handled."""

from __future__ import annotations

import json

import pytest
import torch

from ascent.algorithms import LOSSES
from ascent.algorithms.aggregate import AGG_MODES
from ascent.config import load_config
from ascent.trainer.pipeline import prepare
from ascent.trainer.rl import RLParts, RLTrainer, TrainingError
from ascent.rollout.engine import make_engine

REWARD = '''
def starts_with_seven(prompts, completions, **fields):
    return [1.0 if c.startswith("7") else 0.0 for c in completions]
'''
TINY = ["model.hidden_size=32", "model.num_layers=2", "model.num_heads=2", "model.num_kv_heads=1", "model.intermediate_size=64",
        "warmstart.steps=0", "control.enabled=false", "logging.progress=false", "train.eval_every=0", "rollout.max_new_tokens=3"]


@pytest.fixture
def seven_task(tmp_path):
    rows = [{"prompt": f"{i}+{j}=", "answer": "7"} for i in range(10) for j in range(10)]
    (tmp_path / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (tmp_path / "eval.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows[:10]))
    (tmp_path / "seven.py").write_text(REWARD)
    return [f"data.train={tmp_path}/train.jsonl", f"data.eval={tmp_path}/eval.jsonl", f"reward={tmp_path}/seven.py:starts_with_seven", f"output_dir={tmp_path}"]


def trainer_for(overrides):
    cfg = load_config("default", TINY + overrides)
    run, policy = prepare(cfg, __import__("pathlib").Path(cfg.output_dir) / cfg.name, {})
    parts = RLParts(policy, run.task.train, run.encoder, make_engine(cfg.rollout.backend), run.rewards, run.settings)
    return RLTrainer(cfg, parts), policy


def test_reward_rises_and_parameters_change(seven_task):
    trainer, policy = trainer_for(seven_task + ["train.steps=40", "train.prompts_per_step=8", "rollout.samples_per_prompt=8", "train.optim.lr=3e-3"])
    before = {k: v.clone() for k, v in policy.model.state_dict().items()}
    rewards = []
    for _ in range(40):
        m = trainer.step()
        rewards.append(m["reward/mean"])
        assert abs(m["rollout/logprob_mismatch"]) <= 1e-4
    first, last = sum(rewards[:5]) / 5, sum(rewards[-5:]) / 5
    assert first < 0.3 and last > first + 0.4, (first, last)
    changed = [k for k, v in policy.model.state_dict().items() if not torch.equal(v, before[k])]
    assert len(changed) == len(before)


@pytest.mark.parametrize("loss", LOSSES.names())
@pytest.mark.parametrize("agg", AGG_MODES)
def test_every_loss_and_aggregation_updates(seven_task, loss, agg):
    trainer, policy = trainer_for(seven_task + [f"algorithm.loss={loss}", f"algorithm.loss_agg={agg}", "train.steps=1", "train.prompts_per_step=4", "rollout.samples_per_prompt=4", "train.optim.lr=1e-2", "algorithm.kl_coef=0.1"])
    before = [p.detach().clone() for p in policy.model.parameters()]
    m = trainer.step()
    assert all(torch.isfinite(p).all() for p in policy.model.parameters())
    assert any(not torch.equal(a, p) for a, p in zip(before, policy.model.parameters()))
    assert m["loss/skipped_steps"] == 0


def test_gradient_accumulation_is_invariant(seven_task):
    """One optimizer step on 16 sequences: micro-batch 16 == micro-batch 1 x 16 accumulation (plain SGD, so
    the parameter change is the accumulated gradient itself)."""
    results = []
    for micro in (16, 1):
        trainer, policy = trainer_for(seven_task + ["train.steps=1", "train.prompts_per_step=4", "rollout.samples_per_prompt=4", f"train.micro_batch_size={micro}", "train.optim.grad_clip=0"])
        trainer.learner.optimizer = torch.optim.SGD(policy.model.parameters(), lr=1.0)
        trainer.learner.scheduler = torch.optim.lr_scheduler.LambdaLR(trainer.learner.optimizer, lambda s: 1.0)
        start = torch.cat([p.detach().flatten() for p in policy.model.parameters()])
        trainer.step()
        results.append(torch.cat([p.detach().flatten() for p in policy.model.parameters()]) - start)
    assert results[0].abs().max() > 1e-4  # the step did something
    assert torch.allclose(results[0], results[1], atol=1e-6)


def test_all_rewards_failing_stops_with_clear_message(seven_task, tmp_path):
    (tmp_path / "bad.py").write_text("def boom(prompts, completions, **kw):\n    raise ValueError('verifier offline')\n")
    trainer, _ = trainer_for(seven_task + [f"reward={tmp_path}/bad.py:boom", "train.prompts_per_step=2", "rollout.samples_per_prompt=2"])
    with pytest.raises(TrainingError, match="every sample's reward failed.*verifier offline"):
        trainer.step()


def test_nan_losses_skip_updates_then_abort(seven_task, monkeypatch):
    trainer, policy = trainer_for(seven_task + ["train.max_bad_steps=3", "train.prompts_per_step=2", "rollout.samples_per_prompt=2"])
    real = trainer.learner.micro_loss

    def nan_loss(mb, num_tokens, num_seqs):
        loss, m, mismatch = real(mb, num_tokens, num_seqs)
        return loss * float("nan"), m, mismatch

    monkeypatch.setattr(trainer.learner, "micro_loss", nan_loss)
    before = [p.detach().clone() for p in policy.model.parameters()]
    for _ in range(2):
        assert trainer.step()["loss/skipped_steps"] == 1
    assert all(torch.equal(a, p) for a, p in zip(before, policy.model.parameters()))
    with pytest.raises(TrainingError, match="3 steps in a row"):
        trainer.step()


def test_dynamic_sampling_keeps_only_informative_groups(seven_task):
    trainer, _ = trainer_for(seven_task + ["algorithm.dynamic_sampling=true", "algorithm.max_refill_rounds=4", "train.prompts_per_step=4", "rollout.samples_per_prompt=6"])
    batch, scores, stats = trainer.collect()
    groups = torch.unique(batch.group_index)
    assert stats["rollout/dynamic_kept_groups"] == len(groups) <= 4
    assert stats["rollout/dynamic_dropped_groups"] > 0  # at init most groups are all-zero
    assert len(batch) == 6 * len(groups) == len(scores.rewards)
    for g in groups:
        r = scores.rewards[batch.group_index == g]
        assert r.max() > r.min()
    m = trainer.step()  # the whole step runs on the filtered batch
    assert m["rollout/dynamic_kept_groups"] <= 4 and m["loss/skipped_steps"] == 0
