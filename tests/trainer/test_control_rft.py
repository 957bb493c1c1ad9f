"""The RFT control (rejection-sampling fine-tuning through the RL trainer), the `rft` advantage, and the per-step
monitors a practitioner watches: kl/ref_k3 (with the LoRA reference taken with adapters off) and policy/entropy."""

from __future__ import annotations

import json

import pytest
import torch

from ascent.algorithms import ADVANTAGES, LOSSES, AdvantageInput, LossInput
from ascent.app.pipeline import train
from ascent.config import ConfigError, load_config
from ascent.config.schema import AlgorithmConfig
from ascent.policy.model import token_logprobs
from ascent.trainer.checkpoint import Checkpointer
from tests.conftest import TINY
from tests.trainer.test_learning import seven_task, trainer_for  # noqa: F401 - the fixture is used by name


def test_rft_advantage_with_pg_is_the_mean_nll_of_the_kept_samples():
    rewards = torch.tensor([1.0, 0.0, 1.0, float("nan"), 0.5, 1.0])
    valid = torch.tensor([True, True, True, False, True, True])
    groups = torch.tensor([0, 0, 0, 1, 1, 1])
    mask = torch.tensor([[1, 1, 1, 0], [1, 1, 0, 0], [1, 0, 0, 0], [1, 1, 1, 1], [1, 1, 1, 0], [1, 1, 0, 0]]).float()
    adv = ADVANTAGES.resolve("rft")(AdvantageInput(rewards, valid, groups, mask), AlgorithmConfig())
    # valid tokens 3+2+1+3+2 = 11, kept (reward >= 1) 3+1+2 = 6
    assert adv[:, 0].tolist() == pytest.approx([11 / 6, 0.0, 11 / 6, 0.0, 0.0, 11 / 6])
    assert torch.equal(adv == 0, (mask == 0) | ~torch.tensor([1, 0, 1, 0, 0, 1]).bool()[:, None])
    logp = -torch.rand(6, 4)
    loss_mask = mask * valid[:, None].float()
    inp = LossInput(logp, logp, adv, loss_mask, float(loss_mask.sum()), 6.0, 4.0)
    loss, _ = LOSSES.resolve("pg")(inp, AlgorithmConfig(loss="pg", loss_agg="token-mean"))
    kept = torch.tensor([1, 0, 1, 0, 0, 1]).bool()
    nll = -(logp[kept] * mask[kept]).sum() / mask[kept].sum()
    assert float(loss) == pytest.approx(float(nll), rel=1e-6)
    half = ADVANTAGES.resolve("rft(threshold=0.5)")(AdvantageInput(rewards, valid, groups, mask), AlgorithmConfig())
    assert (half[:, 0] > 0).tolist() == [True, False, True, False, True, True]
    none = ADVANTAGES.resolve("rft")(AdvantageInput(torch.zeros(6), valid, groups, mask), AlgorithmConfig())
    assert not none.any()


def test_rft_learns_the_rewarded_completions(seven_task):  # noqa: F811
    trainer, _ = trainer_for(
        seven_task
        + [
            "algorithm.advantage=rft",
            "algorithm.loss=pg",
            "train.steps=30",
            "train.prompts_per_step=8",
            "rollout.samples_per_prompt=8",
            "train.optim.lr=3e-3",
        ]
    )
    rewards = [trainer.step()["reward/mean"] for _ in range(30)]
    assert sum(rewards[:5]) / 5 < 0.3 and sum(rewards[-5:]) / 5 > 0.8, rewards


def test_kl_monitor_is_zero_at_the_start_then_grows(seven_task):  # noqa: F811
    trainer, _ = trainer_for(seven_task + ["train.prompts_per_step=8", "rollout.samples_per_prompt=8"])
    first = trainer.step()
    assert first["kl/ref_k3"] == 0.0 and first["policy/entropy"] > 0
    later = [trainer.step()["kl/ref_k3"] for _ in range(8)]
    assert later[-1] > 0 and all(k >= 0 for k in later)
    off, _ = trainer_for(seven_task + ["train.kl_monitor=false"])
    assert "kl/ref_k3" not in off.step()


def test_lora_reference_is_the_base_model_with_adapters_off(seven_task):  # noqa: F811
    lora = ["model.lora.enabled=true", "model.lora.target_modules=[q_proj,v_proj,up_proj]", "algorithm.kl_coef=0.1"]
    trainer, policy = trainer_for(seven_task + lora + ["train.optim.lr=1e-2"])
    learner = trainer.learner
    assert learner.adapters_off and learner.reference is policy.model  # no copy of the weights
    base = {k: v.clone() for k, v in policy.model.get_base_model().state_dict().items() if "lora_" not in k}
    for _ in range(3):
        assert trainer.step()["kl/ref_k3"] >= 0
    assert any(p.detach().abs().sum() > 0 for n, p in policy.model.named_parameters() if "lora_B" in n)
    batch_ids = torch.tensor([[1, 5, 6, 7, 8], [1, 6, 7, 8, 9]])
    attn = torch.ones_like(batch_ids)
    with learner.reference_mode():
        ref = token_logprobs(learner.reference_model(), batch_ids, attn)
    plain = policy.model.get_base_model().__class__(policy.model.get_base_model().config)
    missing, _ = plain.load_state_dict({k.replace("base_layer.", ""): v for k, v in base.items()}, strict=False)
    assert not [k for k in missing if "lm_head" not in k]  # tied head
    expected = token_logprobs(plain.eval(), batch_ids, attn)
    assert torch.allclose(ref, expected, atol=1e-5)
    assert not torch.allclose(token_logprobs(policy.model.eval(), batch_ids, attn), expected, atol=1e-4)
    standalone = trainer.services.reference()  # a model of its own for pieces that sample from the reference
    assert standalone is not policy.model
    assert torch.allclose(token_logprobs(standalone, batch_ids, attn), expected, atol=1e-5)


RUN = TINY + [
    "data.task=addition(digits=1)",
    "data.num_eval=20",
    "train.steps=4",
    "train.prompts_per_step=4",
    "rollout.samples_per_prompt=4",
    "train.micro_batch_size=8",
    "train.checkpoint_every=2",
    "train.eval_every=2",
    "eval.pass_k=2",
    "control.enabled=true",
    "control.kind=rft",
]


def test_rft_control_run_pairs_with_rl(tmp_path):
    summary = train(load_config("default", RUN + [f"output_dir={tmp_path}"]))
    assert summary["control_kind"] == "rft"
    for key in ("accuracy_before_rl", "accuracy_after_rl", "accuracy_control", "pass@2_control", "control_seconds"):
        assert key in summary, key
    assert "accuracy_sft_continued" not in summary
    lines = [json.loads(x) for x in (tmp_path / "default" / "metrics.jsonl").read_text().splitlines()]
    rl = [x for x in lines if x["phase"] == "rl"]
    control = [x for x in lines if x["phase"] == "control"]
    assert [x["step"] for x in rl] == [x["step"] for x in control] == [1, 2, 3, 4]  # same optimizer steps
    assert sum(x["rollout/completion_tokens"] > 0 for x in control) == 4  # it samples afresh every step
    # Same starting weights, seed and prompts: the first step samples exactly the same batch in both phases.
    assert rl[0]["reward/mean"] == control[0]["reward/mean"]
    assert rl[0]["rollout/completion_tokens"] == control[0]["rollout/completion_tokens"]
    assert "eval/accuracy" in control[1]
    assert Checkpointer(tmp_path / "default" / "control_checkpoints").latest().name == "step_000004"


def test_imitation_control_needs_a_warm_start():
    with pytest.raises(ConfigError, match="control.kind=rft"):
        load_config("default", TINY + ["control.enabled=true", "control.kind=imitation"])
    load_config("default", TINY + ["control.enabled=true", "control.kind=rft"])  # no warm start needed


def test_recovery_stage_fine_tunes_the_rl_policy_on_a_small_corpus(tmp_path):
    """SG-SRL's recovery stage (Su et al. 2026, arXiv:2605.29502): after RL and its evaluation, a short SFT on a
    seeded draw of `recovery.rows` training rows, evaluated again; RL's own evaluation stays in the summary."""
    run = RUN[:-2] + ["train.steps=2", "recovery.steps=6", "recovery.rows=8", "recovery.lr=0.01"]
    summary = train(load_config("default", run + [f"output_dir={tmp_path}"]))
    for key in ("accuracy_after_rl", "accuracy_recovered", "pass@2_recovered", "recovery_seconds"):
        assert key in summary, key
    lines = [json.loads(x) for x in (tmp_path / "default" / "metrics.jsonl").read_text().splitlines()]
    recovery = [x for x in lines if x["phase"] == "recovery"]
    assert [x["step"] for x in recovery] == [1, 2, 3, 4, 5, 6]
    assert recovery[-1]["loss/nll"] < recovery[0]["loss/nll"]
    from safetensors.torch import load_file

    rl = load_file(Checkpointer(tmp_path / "default" / "checkpoints").latest() / "model.safetensors")
    rec = load_file(tmp_path / "default" / "recovery" / "model.safetensors")
    assert any(not torch.equal(rl[k], rec[k]) for k in rl)
    with pytest.raises(ValueError, match="recovery.rows"):
        load_config("default", TINY + ["recovery.rows=0"])
