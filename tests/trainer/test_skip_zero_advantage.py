"""`train.skip_zero_advantage`: rows whose advantages are all zero are left out of the forward/backward,
and the optimizer step is exactly the one the full batch gives (same normalisers), for every loss that
declares itself free of such rows; others keep every row."""

from __future__ import annotations

import copy
from dataclasses import replace

import pytest
import torch

from ascent.config import load_config
from ascent.policy.model import Policy
from ascent.rollout import SamplingSettings, assemble, make_engine
from ascent.trainer.learner import Learner
from tests.conftest import tiny_qwen

PROMPTS = ["12+34=", "7+8=", "99+1=", "5="]


def batch_and_model(tokenizer):
    model = tiny_qwen(tokenizer, seed=7, hidden=64, layers=2).train()
    ids = [tokenizer(p)["input_ids"] for p in PROMPTS]
    s = SamplingSettings(max_new_tokens=12, eos_id=tokenizer.eos_token_id, pad_id=tokenizer.pad_token_id)
    gen = make_engine("ascent").generate(model, ids, 4, s, torch.Generator().manual_seed(0))
    return model, assemble(PROMPTS, ids, [{} for _ in PROMPTS], gen, 4, tokenizer)


def learner_for(model, tokenizer, loss, skip, micro=3, kl=0.0):
    cfg = load_config(
        "default",
        [f"algorithm.loss={loss}", f"train.skip_zero_advantage={str(skip).lower()}", f"algorithm.kl_coef={kl}"],
    )
    cfg = replace(
        cfg,
        train=replace(cfg.train, steps=10, micro_batch_size=micro, kl_monitor=False),
        rollout=replace(cfg.rollout, temperature=1.0, max_new_tokens=12),
    )
    return Learner(Policy(model=copy.deepcopy(model), tokenizer=tokenizer), cfg)


@pytest.mark.parametrize("loss", ["ppo_clip", "pg", "cispo", "gspo"])
def test_same_update_with_and_without_the_zero_rows(tokenizer, loss):
    model, batch = batch_and_model(tokenizer)
    adv = torch.tensor([1.0, -1.0, 0.5, -0.5] + [0.0] * 8 + [2.0, 0.0, -2.0, 0.0])[:, None]
    adv = adv.expand_as(batch.completion_mask).contiguous()  # groups 2 and 3 carry no signal
    valid = torch.ones(len(batch), dtype=torch.bool)
    out = {}
    for skip in (False, True):
        learner = learner_for(model, tokenizer, loss, skip)
        assert learner.skip_zero_advantage == skip
        m = learner.update(batch, adv, valid)
        out[skip] = (m, [p.detach().clone() for p in learner.policy.model.parameters()])
    (m_all, w_all), (m_skip, w_skip) = out[False], out[True]
    assert m_skip["loss/zero_advantage_rows_skipped"] == pytest.approx(10 / 16)
    assert m_all["loss/grad_norm"] == pytest.approx(m_skip["loss/grad_norm"], rel=1e-5)
    for a, b in zip(w_all, w_skip):
        torch.testing.assert_close(a, b, atol=1e-7, rtol=1e-5)
    assert any(not torch.equal(a, p) for a, p in zip(w_all, model.parameters()))  # the step moved the weights


def test_all_rows_zero_still_steps_like_a_zero_gradient(tokenizer):
    model, batch = batch_and_model(tokenizer)
    adv = torch.zeros_like(batch.completion_mask)
    valid = torch.ones(len(batch), dtype=torch.bool)
    weights = []
    for skip in (False, True):
        learner = learner_for(model, tokenizer, "ppo_clip", skip)
        learner.update(batch, adv, valid)
        weights.append([p.detach().clone() for p in learner.policy.model.parameters()])
    for a, b in zip(*weights):
        torch.testing.assert_close(a, b, atol=0, rtol=0)  # weight decay only, identical


def test_rows_are_kept_where_the_loss_needs_them(tokenizer):
    model, _ = batch_and_model(tokenizer)
    assert not learner_for(model, tokenizer, "ppo_clip", True, kl=0.1).skip_zero_advantage  # the KL term sees every row
    assert not learner_for(model, tokenizer, "rebel", True).skip_zero_advantage  # not declared free
