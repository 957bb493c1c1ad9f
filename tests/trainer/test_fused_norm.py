"""The learner's fused RMSNorm (`train.fused_norm`, `ascent.policy.fused`): HF's values and gradients
(for the input and the weight) to float rounding, through whole models; fallbacks that keep a swapped
model usable (bf16, unpickled without kernels, kernels disabled)."""

from __future__ import annotations

import copy
import pickle

import pytest
import torch
from transformers.models.llama.modeling_llama import LlamaRMSNorm

from ascent import kernels
from ascent.policy.fused import FusedRMSNorm, fuse_rms_norms


@pytest.mark.parametrize(("shape", "hidden"), [((3, 200), 40), ((7, 150), 64), ((5,), 19)])
def test_fused_norm_equals_hf(shape, hidden, native, two_threads):
    """Rows split across two threads (1,050 rows) or not, widths on and off the vector width, a strided
    input: the same output, input gradient and weight gradient as HF's module."""
    torch.manual_seed(0)
    ref = LlamaRMSNorm(hidden, eps=1e-5)
    torch.nn.init.normal_(ref.weight)
    fused = FusedRMSNorm(torch.nn.Parameter(ref.weight.detach().clone()), 1e-5, native)
    base = torch.randn(*shape, 2 * hidden) * 3
    x_ref = base[..., ::2].clone().requires_grad_(True)
    leaf = base.clone().requires_grad_(True)
    g = torch.randn(*shape, hidden)
    y_ref, y_fused = ref(x_ref), fused(leaf[..., ::2])  # the fused side gets a strided view
    y_ref.backward(g)
    y_fused.backward(g)
    torch.testing.assert_close(y_fused, y_ref, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(leaf.grad[..., ::2], x_ref.grad, atol=1e-5, rtol=1e-4)
    assert not leaf.grad[..., 1::2].any()
    torch.testing.assert_close(fused.weight.grad, ref.weight.grad, atol=1e-3, rtol=1e-4)


def test_fused_model_trains_like_the_hf_model(native, tokenizer, two_threads):
    from tests.conftest import tiny_qwen

    model = tiny_qwen(tokenizer, seed=2, hidden=48, layers=2).train()
    fused = copy.deepcopy(model)
    assert fuse_rms_norms(fused) == 2 * 2 + 1  # two per block and the final norm
    assert set(fused.state_dict()) == set(model.state_dict())  # checkpoints unchanged
    ids = torch.randint(0, len(tokenizer), (64, 12), generator=torch.Generator().manual_seed(0))
    for m in (model, fused):
        m(input_ids=ids).logits.square().mean().backward()
    torch.testing.assert_close(fused(input_ids=ids).logits, model(input_ids=ids).logits, atol=1e-5, rtol=1e-5)
    for (name, p), q in zip(model.named_parameters(), fused.parameters()):
        torch.testing.assert_close(q.grad, p.grad, atol=1e-6, rtol=1e-4, msg=name)


def test_fallbacks_keep_a_fused_model_usable(native, tokenizer, monkeypatch):
    from tests.conftest import tiny_qwen

    model = tiny_qwen(tokenizer, seed=3)
    fused = copy.deepcopy(model)
    fuse_rms_norms(fused)
    ids = torch.tensor([[1, 5, 7, 3]])
    want = model(input_ids=ids).logits
    again = pickle.loads(pickle.dumps(fused))  # e.g. shipped to a worker
    torch.testing.assert_close(again(input_ids=ids).logits, want, atol=1e-5, rtol=1e-5)
    bf16_ref, bf16 = copy.deepcopy(model).to(torch.bfloat16), copy.deepcopy(fused).to(torch.bfloat16)
    assert torch.equal(bf16(input_ids=ids).logits, bf16_ref(input_ids=ids).logits)  # the HF formula, exactly
    monkeypatch.setattr(kernels, "load", lambda: None)
    orphan = pickle.loads(pickle.dumps(fused))  # unpickled where the kernels are unavailable
    torch.testing.assert_close(orphan(input_ids=ids).logits, want, atol=1e-5, rtol=1e-5)
    assert fuse_rms_norms(copy.deepcopy(model)) == 0


def test_learner_fuses_the_policy_by_default(tiny_policy, tokenizer):
    from ascent.config import load_config
    from ascent.trainer.learner import Learner

    cfg = load_config("default", [])
    from dataclasses import replace

    cfg = replace(
        cfg,
        train=replace(cfg.train, steps=10, micro_batch_size=8),
        rollout=replace(cfg.rollout, temperature=1.0, max_new_tokens=8),
    )
    learner = Learner(tiny_policy, cfg)
    expected = 5 if kernels.load() is not None else 0
    assert learner.fused_norms == expected
    assert sum(isinstance(m, FusedRMSNorm) for m in tiny_policy.model.modules()) == expected
    off = load_config("default", ["train.fused_norm=false"])
    assert off.train.fused_norm is False
    from ascent.policy.model import Policy
    from tests.conftest import tiny_qwen

    plain = Policy(model=tiny_qwen(tokenizer), tokenizer=tokenizer)
    learner = Learner(plain, replace(off, train=replace(off.train, steps=10, micro_batch_size=8), rollout=cfg.rollout))
    assert learner.fused_norms == 0 and not any(isinstance(m, FusedRMSNorm) for m in plain.model.modules())
