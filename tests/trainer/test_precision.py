"""`train.precision`: the bf16 learner (autocast, fp32 weights and output layer) agrees with fp32 within the
stated tolerance on a fixed batch, and `auto` picks by what the machine has and what the probe measures."""

from __future__ import annotations

import copy
from dataclasses import replace

import pytest
import torch

from ascent.config import load_config
from ascent.kernels import machine
from ascent.policy.model import Policy
from ascent.rollout import SamplingSettings, assemble, make_engine
from ascent.trainer import precision as precision_mod
from ascent.trainer.learner import Learner
from ascent.trainer.precision import TOLERANCE, Fp32Linear, fp32_output_layer, resolve, within_tolerance
from tests.conftest import tiny_qwen

PROMPTS = ["12+34=", "7+8=", "99+1=", "5="]


def config(precision: str, shared_prefix: bool = True):
    cfg = load_config("default", [f"train.precision={precision}", f"train.shared_prefix={str(shared_prefix).lower()}"])
    return replace(
        cfg,
        train=replace(cfg.train, steps=10, micro_batch_size=64),
        rollout=replace(cfg.rollout, temperature=1.0, max_new_tokens=16),
    )


def fixed_batch(model, tokenizer):
    ids = [tokenizer(p)["input_ids"] for p in PROMPTS]
    s = SamplingSettings(max_new_tokens=16, eos_id=tokenizer.eos_token_id, pad_id=tokenizer.pad_token_id)
    gen = make_engine("ascent").generate(model, ids, 4, s, torch.Generator().manual_seed(0))
    return assemble(PROMPTS, ids, [{} for _ in PROMPTS], gen, 4, tokenizer)


def loss_and_grads(learner: Learner, batch, weights):
    model = learner.policy.model
    model.zero_grad(set_to_none=True)
    lp = learner.token_logprobs(
        model, batch.input_ids, batch.attention_mask, batch.completion_mask, batch.group_index
    )  # (N, T)
    loss = (lp * weights * batch.completion_mask).sum() / batch.completion_mask.sum()
    loss.backward()
    grads = torch.cat([p.grad.reshape(-1) for p in model.parameters() if p.grad is not None])
    return lp.detach(), float(loss.detach()), grads


@pytest.mark.parametrize("shared_prefix", [True, False])
def test_bf16_learner_matches_fp32_within_tolerance(tokenizer, shared_prefix):
    base = tiny_qwen(tokenizer, seed=3, hidden=64, layers=2).train()
    batch = fixed_batch(base, tokenizer)
    weights = torch.linspace(-1.0, 1.0, len(batch))[:, None].expand_as(batch.completion_mask)  # signed advantages
    out = {}
    for name in ("fp32", "bf16"):
        policy = Policy(model=copy.deepcopy(base), tokenizer=tokenizer)
        learner = Learner(policy, config(name, shared_prefix))
        assert learner.precision.name == name
        out[name] = loss_and_grads(learner, batch, weights)
    (lp32, loss32, g32), (lp16, loss16, g16) = out["fp32"], out["bf16"]
    assert lp16.dtype == torch.float32
    diff = ((lp32 - lp16).abs() * batch.completion_mask)[batch.completion_mask > 0]
    assert float(torch.quantile(diff.double(), 0.99)) <= TOLERANCE["logprob_p99_abs"]
    assert float(diff.mean()) <= TOLERANCE["logprob_mean_abs"]
    assert float(diff.max()) > 0  # bf16 really ran: not the fp32 path again
    assert abs(loss16 - loss32) <= 0.01 * abs(loss32) + 1e-3
    assert float(torch.nn.functional.cosine_similarity(g32, g16, dim=0)) >= TOLERANCE["grad_cosine"]
    assert float((g16.norm() / g32.norm() - 1).abs()) < 0.02


def test_bf16_keeps_weights_and_output_layer_in_fp32(tokenizer):
    model = tiny_qwen(tokenizer, seed=1, hidden=64, layers=2, tie=False)
    keys = list(model.state_dict())
    assert fp32_output_layer(model)
    head = model.get_output_embeddings()
    assert type(head) is Fp32Linear and list(model.state_dict()) == keys  # same parameters, same names
    assert all(p.dtype == torch.float32 for p in model.parameters())
    ids = torch.tensor([[1, 5, 7, 3]])
    with torch.autocast("cpu", dtype=torch.bfloat16):
        hidden = model.model(input_ids=ids).last_hidden_state
        logits = model(input_ids=ids).logits
        plain = torch.nn.Linear(64, len(tokenizer), bias=False)(hidden)
    assert logits.dtype == torch.float32 and plain.dtype == torch.bfloat16
    assert type(copy.deepcopy(model).get_output_embeddings()) is Fp32Linear  # the frozen reference keeps it


def test_bf16_output_layer_keeps_the_fast_decoder(tokenizer):
    """The fp32 output layer of a bf16 learner is still a plain linear for the rollout decoder: the fast engine
    keeps the model (before the fix `supports` refused it and rollouts fell back to the slower cached engine)
    and samples exactly what it sampled before the class change."""
    from ascent.rollout.decoder import supports

    model = tiny_qwen(tokenizer, seed=4, hidden=64, layers=2, tie=False).eval()
    before = fixed_batch(model, tokenizer)
    assert supports(model) and fp32_output_layer(model)
    assert supports(model)
    after = fixed_batch(model, tokenizer)
    assert torch.equal(before.input_ids, after.input_ids)
    assert torch.equal(before.sampled_logprobs, after.sampled_logprobs)


def probe_inputs(tokenizer, seed=2):
    model = tiny_qwen(tokenizer, seed=seed, hidden=64, layers=2).train()
    batch = fixed_batch(model, tokenizer)
    from ascent.policy.model import token_logprobs

    fn = lambda: token_logprobs(model, batch.input_ids, batch.attention_mask)  # noqa: E731
    return model, fn, batch.completion_mask


def test_probe_times_both_and_measures_parity(tokenizer):
    model, fn, mask = probe_inputs(tokenizer)
    result = precision_mod.probe(model, fn, mask, torch.device("cpu"))
    assert set(TOLERANCE) <= set(result) and result["fp32_s"] > 0 and result["bf16_s"] > 0
    assert result["speedup"] == pytest.approx(result["fp32_s"] / result["bf16_s"])
    assert within_tolerance(result) == (True, "")
    assert 0 < result["logprob_mean_abs"] <= result["logprob_p99_abs"] <= result["logprob_max_abs"]
    assert type(model.get_output_embeddings()) is torch.nn.Linear  # restored
    assert all(p.grad is None for p in model.parameters())  # gradients left cleared
    assert within_tolerance({**result, "grad_cosine": 0.5}) == (False, "grad_cosine 0.5 vs 0.99")


def test_auto_picks_fp32_without_native_bf16(tokenizer, monkeypatch):
    monkeypatch.setattr(machine, "native_bf16", lambda path="/proc/cpuinfo": False)
    p = resolve("auto", tiny_qwen(tokenizer), torch.device("cpu"))
    assert p.dtype is None and not p.pending and "no AVX512-BF16" in p.reason


@pytest.mark.parametrize(
    "measured, picked",
    [
        ({"speedup": 1.6, "logprob_p99_abs": 0.02, "logprob_mean_abs": 0.002, "grad_cosine": 0.999}, "bf16"),
        ({"speedup": 1.02, "logprob_p99_abs": 0.02, "logprob_mean_abs": 0.002, "grad_cosine": 0.999}, "fp32"),
        ({"speedup": 1.6, "logprob_p99_abs": 0.5, "logprob_mean_abs": 0.002, "grad_cosine": 0.999}, "fp32"),
    ],
)
def test_auto_follows_the_probe_where_bf16_is_native(tokenizer, monkeypatch, measured, picked):
    monkeypatch.setattr(machine, "native_bf16", lambda path="/proc/cpuinfo": True)
    monkeypatch.setattr(precision_mod, "probe", lambda *a, **k: measured)
    model = tiny_qwen(tokenizer)
    pending = resolve("auto", model, torch.device("cpu"))
    assert pending.pending and pending.dtype is None
    p = precision_mod.decide(model, lambda: None, torch.ones(1, 1), torch.device("cpu"))
    assert p.name == picked and p.probe == measured and not p.pending
    assert p.reason.startswith(f"auto -> {picked}")
    assert (type(model.get_output_embeddings()) is Fp32Linear) == (picked == "bf16")


def test_learner_settles_auto_on_its_first_update_and_keeps_it_on_resume(tokenizer, monkeypatch):
    monkeypatch.setattr(machine, "native_bf16", lambda path="/proc/cpuinfo": True)
    calls = []

    def fake_probe(model, fn, mask, device):
        lp = fn()  # the learner's real micro-batch
        calls.append(tuple(lp.shape))
        return {"speedup": 1.5, "logprob_p99_abs": 0.01, "logprob_mean_abs": 0.001, "grad_cosine": 0.9999}

    monkeypatch.setattr(precision_mod, "probe", fake_probe)
    base = tiny_qwen(tokenizer, seed=3, hidden=64, layers=2)
    batch = fixed_batch(base, tokenizer)
    learner = Learner(Policy(model=base, tokenizer=tokenizer), config("auto"))
    assert learner.precision.pending
    adv = torch.linspace(-1, 1, len(batch))[:, None].expand_as(batch.completion_mask).contiguous()
    m = learner.update(batch, adv, torch.ones(len(batch), dtype=torch.bool))
    assert len(calls) == 1 and calls[0][0] == 8  # probed on the first 8 rows
    assert learner.precision.name == "bf16" and m["optim/bf16"] == 1.0
    learner.update(batch, adv, torch.ones(len(batch), dtype=torch.bool))
    assert len(calls) == 1  # probed once
    state = learner.state_dict()
    again = Learner(
        Policy(model=tiny_qwen(tokenizer, seed=3, hidden=64, layers=2), tokenizer=tokenizer), config("auto")
    )
    again.load_state_dict(state)
    assert again.precision.name == "bf16" and not again.precision.pending and len(calls) == 1
    assert type(again.policy.model.get_output_embeddings()) is Fp32Linear


def test_precision_setting_is_validated():
    from ascent.config import ConfigError

    with pytest.raises(ConfigError, match="precision"):
        load_config("default", ["train.precision=fp16"])
