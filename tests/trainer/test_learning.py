"""RL learns on a trivially learnable task, every loss updates parameters, and bad steps are handled."""

from __future__ import annotations

import json

import pytest
import torch
import yaml

from ascent.algorithms import LOSSES
from ascent.algorithms.aggregate import AGG_MODES
from ascent.app.pipeline import prepare
from ascent.config import load_config
from ascent.config.loader import to_dict
from ascent.policy.model import Policy
from ascent.rollout import make_engine
from ascent.trainer.checkpoint import Checkpointer
from ascent.trainer.frozen import VocabularyMismatchError
from ascent.trainer.rl import RLParts, RLTrainer, TrainingError
from tests.conftest import TINY

REWARD = """
def starts_with_seven(prompts, completions, **fields):
    return [1.0 if c.startswith("7") else 0.0 for c in completions]
"""


@pytest.fixture
def seven_task(tmp_path):
    rows = [{"prompt": f"{i}+{j}=", "answer": "7"} for i in range(10) for j in range(10)]
    (tmp_path / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (tmp_path / "eval.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows[:10]))
    (tmp_path / "seven.py").write_text(REWARD)
    return [
        f"data.train={tmp_path}/train.jsonl",
        f"data.eval={tmp_path}/eval.jsonl",
        f"reward={tmp_path}/seven.py:starts_with_seven",
        f"output_dir={tmp_path}",
    ]


def trainer_for(overrides):
    cfg = load_config("default", TINY + overrides)
    run, policy = prepare(cfg, __import__("pathlib").Path(cfg.output_dir) / cfg.name, {})
    parts = RLParts(
        policy,
        run.task.train,
        run.encoder,
        make_engine(cfg.rollout.backend, precision=cfg.rollout.precision),
        run.rewards,
        run.settings,
    )
    return RLTrainer(cfg, parts), policy


def test_reward_rises_and_parameters_change(seven_task):
    trainer, policy = trainer_for(
        seven_task
        + ["train.steps=40", "train.prompts_per_step=8", "rollout.samples_per_prompt=8", "train.optim.lr=3e-3"]
    )
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


def test_bfloat16_rollouts_learn_with_tis(seven_task):
    """rollout.precision=bfloat16 (fp32 learner): the sampler/learner mismatch is logged, nonzero and small,
    the TIS weights stay near 1, and the reward rises as with fp32 rollouts."""
    trainer, policy = trainer_for(
        seven_task
        + [
            "train.steps=40",
            "train.prompts_per_step=8",
            "rollout.samples_per_prompt=8",
            "train.optim.lr=3e-3",
            "rollout.precision=bfloat16",
            "algorithm.tis_cap=2.0",
        ]
    )
    rewards, gaps = [], []
    for _ in range(40):
        m = trainer.step()
        rewards.append(m["reward/mean"])
        gaps.append(m["rollout/logprob_mismatch"])
    assert 1e-5 < max(gaps) < 0.1, gaps
    first, last = sum(rewards[:5]) / 5, sum(rewards[-5:]) / 5
    assert first < 0.3 and last > first + 0.4, (first, last)


@pytest.mark.parametrize(
    "loss", [name for name in LOSSES.names() if name not in ("distil", "opd", "edge")]
)  # distil and opd need a teacher (test_distil_*, tests/trainer/test_opd_edge.py), edge its explorer
@pytest.mark.parametrize("agg", AGG_MODES)
def test_every_loss_and_aggregation_updates(seven_task, loss, agg):
    spec = "a_star_po(k=1)" if loss == "a_star_po" else loss  # one reference sample per prompt for V*
    trainer, policy = trainer_for(
        seven_task
        + [
            f"algorithm.loss={spec}",
            f"algorithm.loss_agg={agg}",
            "train.steps=1",
            "train.prompts_per_step=4",
            "rollout.samples_per_prompt=4",
            "train.optim.lr=1e-2",
            "algorithm.kl_coef=0.1",
        ]
    )
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
        trainer, policy = trainer_for(
            seven_task
            + [
                "train.steps=1",
                "train.prompts_per_step=4",
                "rollout.samples_per_prompt=4",
                f"train.micro_batch_size={micro}",
                "train.optim.grad_clip=0",
            ]
        )
        trainer.learner.optimizer = torch.optim.SGD(policy.model.parameters(), lr=1.0)
        trainer.learner.scheduler = torch.optim.lr_scheduler.LambdaLR(trainer.learner.optimizer, lambda s: 1.0)
        start = torch.cat([p.detach().flatten() for p in policy.model.parameters()])
        trainer.step()
        results.append(torch.cat([p.detach().flatten() for p in policy.model.parameters()]) - start)
    assert results[0].abs().max() > 1e-4  # the step did something
    assert torch.allclose(results[0], results[1], atol=1e-6)


def test_all_rewards_failing_stops_with_clear_message(seven_task, tmp_path):
    (tmp_path / "bad.py").write_text(
        "def boom(prompts, completions, **kw):\n    raise ValueError('verifier offline')\n"
    )
    trainer, _ = trainer_for(
        seven_task + [f"reward={tmp_path}/bad.py:boom", "train.prompts_per_step=2", "rollout.samples_per_prompt=2"]
    )
    with pytest.raises(TrainingError, match="every sample's reward failed.*verifier offline"):
        trainer.step()


def test_nan_losses_skip_updates_then_abort(seven_task, monkeypatch):
    trainer, policy = trainer_for(
        seven_task
        + ["train.max_bad_steps=3", "train.prompts_per_step=2", "rollout.samples_per_prompt=2"]
        + ["train.skip_zero_advantage=false"]  # every step computes a loss, even when no group has signal
    )
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
    trainer, _ = trainer_for(
        seven_task
        + ["algorithm.filter=dapo(max_refill_rounds=4)", "train.prompts_per_step=4", "rollout.samples_per_prompt=6"]
    )
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


def sgd_update(overrides):
    """The parameter change of one RL step with plain SGD (lr 1): the accumulated gradient itself."""
    trainer, policy = trainer_for(overrides + ["train.optim.grad_clip=0"])
    trainer.learner.optimizer = torch.optim.SGD(policy.model.parameters(), lr=1.0)
    trainer.learner.scheduler = torch.optim.lr_scheduler.LambdaLR(trainer.learner.optimizer, lambda s: 1.0)
    start = torch.cat([p.detach().flatten() for p in policy.model.parameters()])
    trainer.step()
    return torch.cat([p.detach().flatten() for p in policy.model.parameters()]) - start


@pytest.mark.parametrize("loss", ["rebel", "agro"])
def test_group_losses_see_whole_groups_and_accumulate_exactly(seven_task, loss):
    """Pairwise / group-mean losses: micro-batches hold whole groups, so 1 micro-batch == 4 == 'size 1'
    (a group larger than micro_batch_size forms its own micro-batch)."""
    base = seven_task + [
        f"algorithm.loss={loss}",
        "train.steps=1",
        "train.prompts_per_step=4",
        "rollout.samples_per_prompt=4",
    ]
    results = [sgd_update(base + [f"train.micro_batch_size={micro}"]) for micro in (16, 5, 1)]
    assert results[0].abs().max() > 1e-5
    for other in results[1:]:
        assert torch.allclose(results[0], other, atol=1e-6)


def test_group_aligned_mini_and_micro_batches(seven_task):
    trainer, _ = trainer_for(
        seven_task
        + [
            "algorithm.loss=rebel",
            "train.prompts_per_step=3",
            "rollout.samples_per_prompt=4",
            "algorithm.mini_batches=2",
            "train.micro_batch_size=6",
        ]
    )
    batch, _, _ = trainer.collect()
    assert trainer.learner.mini_batch_bounds(batch) == [0, 8, 12]  # 3 groups of 4 -> 2 + 1 groups, exactly 2 steps
    assert [c.tolist() for c in trainer.learner.micro_batches(batch, slice(0, 8))] == [[0, 1, 2, 3], [4, 5, 6, 7]]
    trainer.learner.micro_batch_size = 8
    assert [len(c) for c in trainer.learner.micro_batches(batch, slice(0, 12))] == [8, 4]
    m = trainer.step()
    assert m["loss/skipped_steps"] == 0
    trainer, _ = trainer_for(
        seven_task
        + [
            "algorithm.loss=rebel",
            "train.prompts_per_step=2",
            "rollout.samples_per_prompt=4",
            "algorithm.mini_batches=4",
        ]
    )
    with pytest.raises(ValueError, match="2 groups cannot fill algorithm.mini_batches=4"):
        trainer.step()


def test_a_star_po_estimates_v_star_once_per_training_row(seven_task, monkeypatch):
    import ascent.algorithms.a_star as a_star

    calls = []
    real = a_star.soft_value
    monkeypatch.setattr(a_star, "soft_value", lambda *a, **k: calls.append(1) or real(*a, **k))
    trainer, policy = trainer_for(
        seven_task
        + [
            "algorithm.loss=a_star_po(k=2)",
            "rollout.samples_per_prompt=1",
            "train.prompts_per_step=8",
            "train.optim.lr=1e-2",
        ]
    )
    for _ in range(2):
        m = trainer.step()
        assert m["loss/skipped_steps"] == 0
    v_star = trainer.states["loss"].v_star
    assert len(calls) == 1 and v_star.shape == (len(trainer.parts.rows),)
    # seven task: r in {0, 1}; V* = 0.5 log mean exp(2 r) over 2 samples is one of 0, 0.5 log((1 + e^2) / 2), 1
    allowed = torch.tensor([0.0, 0.5 * torch.log(torch.tensor((1 + torch.e**2) / 2)).item(), 1.0])
    assert all(torch.isclose(v, allowed, atol=1e-5).any() for v in v_star)
    state = trainer.state_dict()
    fresh, _ = trainer_for(
        seven_task + ["algorithm.loss=a_star_po(k=2)", "rollout.samples_per_prompt=1", "train.prompts_per_step=8"]
    )
    fresh.load_state_dict(state)
    fresh.step()
    assert len(calls) == 1 and torch.equal(fresh.states["loss"].v_star, v_star)  # resumed: no second stage 1


def save_teacher(seven_task, tmp_path):
    """A differently-initialised model with the student's tokenizer, saved by ascent's Checkpointer inside a
    run directory (config.yaml + checkpoints/)."""
    trainer, teacher = trainer_for(seven_task + ["seed=1"])
    run_dir = tmp_path / "teacher_run"
    folder = Checkpointer(run_dir / "checkpoints").save(5, teacher, {"step": 5})
    (run_dir / "config.yaml").write_text(yaml.safe_dump(to_dict(trainer.cfg), sort_keys=False))
    return run_dir, folder, teacher


@pytest.mark.parametrize("target", ["checkpoint", "run_dir"])
def test_distil_from_a_saved_teacher(seven_task, tmp_path, target):
    run_dir, folder, teacher = save_teacher(seven_task, tmp_path)
    path = folder if target == "checkpoint" else run_dir
    trainer, policy = trainer_for(
        seven_task
        + [
            f"algorithm.loss=distil(teacher={path})",
            "train.prompts_per_step=8",
            "rollout.samples_per_prompt=4",
            "train.optim.lr=3e-3",
        ]
    )
    loaded = trainer.states["loss"].teacher
    assert all(torch.equal(a, b) for a, b in zip(loaded.state_dict().values(), teacher.model.state_dict().values()))
    assert not any(p.requires_grad for p in loaded.parameters())
    before = [p.detach().clone() for p in policy.model.parameters()]
    kls = [trainer.step()["loss/distil_kl"] for _ in range(6)]
    assert all(torch.isfinite(p).all() for p in policy.model.parameters())
    assert any(not torch.equal(a, p) for a, p in zip(before, policy.model.parameters()))
    assert kls[-1] < kls[0]  # the student moves towards the teacher


def test_distil_needs_a_teacher_with_the_same_vocabulary(seven_task, tmp_path, tokenizer):
    from tests.conftest import tiny_qwen

    with pytest.raises(ValueError, match="needs a teacher"):  # ConfigError, at load time
        trainer_for(seven_task + ["algorithm.loss=distil"])
    other = tmp_path / "other"
    Policy(model=tiny_qwen(tokenizer), tokenizer=tokenizer).save(other)  # another alphabet: 17 tokens
    with pytest.raises(VocabularyMismatchError, match="tokenizer"):
        trainer_for(seven_task + [f"algorithm.loss=distil(teacher={other})"])


def test_gae_step_trains_policy_and_critic(seven_task):
    trainer, policy = trainer_for(
        seven_task
        + [
            "algorithm.advantage=gae",
            "train.prompts_per_step=4",
            "rollout.samples_per_prompt=4",
            "train.optim.lr=1e-2",
            "algorithm.mini_batches=2",
            "algorithm.ppo_epochs=2",
        ]
    )
    critic = trainer.states["advantage"]
    assert critic is not None and not any(p is q for p in critic.model.parameters() for q in policy.model.parameters())
    before = [p.detach().clone() for p in policy.model.parameters()]
    critic_before = [p.detach().clone() for p in critic.model.parameters()]
    m = trainer.step()
    assert m["loss/skipped_steps"] == 0 and m["value/skipped"] == 0 and torch.isfinite(torch.tensor(m["value/loss"]))
    assert all(torch.isfinite(p).all() for p in list(policy.model.parameters()) + list(critic.model.parameters()))
    assert any(not torch.equal(a, p) for a, p in zip(before, policy.model.parameters()))
    assert any(not torch.equal(a, p) for a, p in zip(critic_before, critic.model.parameters()))


@pytest.mark.parametrize(
    "extra", [[], ["algorithm.kl_coef=0.1"], ["algorithm.ppo_epochs=2", "algorithm.mini_batches=2"]]
)
def test_shared_prefix_forward_is_invariant(seven_task, extra, monkeypatch):
    """One RL step with the learner's shared-prefix forward == with the plain per-row forward (the policy,
    the reference model and the pre-update recompute all go through it), and it is really taken."""
    import ascent.trainer.learner as learner_mod

    calls = []
    real = learner_mod.shared_prefix_logprobs
    monkeypatch.setattr(learner_mod, "shared_prefix_logprobs", lambda *a, **k: calls.append(1) or real(*a, **k))
    base = seven_task + [
        "train.steps=1",
        "train.prompts_per_step=4",
        "rollout.samples_per_prompt=4",
        "rollout.max_new_tokens=6",
        *extra,
    ]
    shared = sgd_update(base + ["train.shared_prefix=true"])
    assert calls
    plain = sgd_update(base + ["train.shared_prefix=false"])
    assert shared.abs().max() > 1e-4
    assert torch.allclose(shared, plain, atol=1e-6)
