"""The native decode-attention kernel (`ascent.kernels`): the same attention as the torch ops, the
same samples through the engine, and a clear fallback or error when it cannot be built."""

from __future__ import annotations

import pytest
import torch

from ascent import kernels
from ascent.rollout import SamplingSettings, make_engine
from ascent.rollout.ascent_engine import FastEngine
from ascent.rollout.decoder import Decoder

PROMPTS = ["12+34=", "7+8=", "99+1=", "5=", "1+2+3="]


@pytest.fixture
def fresh_kernels(monkeypatch, tmp_path):
    """Kernel state forgotten and built into an empty cache folder; the real state restored afterwards."""
    monkeypatch.setenv("ASCENT_CACHE", str(tmp_path))
    kernels.reset()
    yield tmp_path
    kernels.reset()


def settings(tokenizer, **kw):
    return SamplingSettings(
        max_new_tokens=kw.pop("max_new_tokens", 30), eos_id=tokenizer.eos_token_id, pad_id=tokenizer.pad_token_id, **kw
    )


def qwen(tokenizer, hidden: int, heads: int, kv_heads: int, seed: int = 3):
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(seed)
    cfg = Qwen2Config(
        vocab_size=len(tokenizer),
        hidden_size=hidden,
        intermediate_size=2 * hidden,
        num_hidden_layers=2,
        num_attention_heads=heads,
        num_key_value_heads=kv_heads,
        max_position_embeddings=256,
        tie_word_embeddings=True,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    return Qwen2ForCausalLM(cfg).eval()


@pytest.mark.parametrize(("heads", "kv_heads", "d"), [(4, 4, 64), (6, 2, 24), (9, 3, 64), (2, 1, 8)])
def test_kernel_equals_torch_attention(heads, kv_heads, d, native, tokenizer):
    """One decode step over a cache with more rows and positions than are read, left-padding holes in the
    mask, GQA groups and head sizes on and off the vector width: the kernel's output equals `attend`'s."""
    model = qwen(tokenizer, hidden=heads * d, heads=heads, kv_heads=kv_heads)
    dec = Decoder(model, attention="native")
    assert dec.native is not None
    g = torch.Generator().manual_seed(0)
    cap, b, length, end = 7, 5, 40, 29
    keys, values = (torch.randn((cap, kv_heads, length, d), generator=g) for _ in range(2))
    q = torch.randn((b, heads + 2 * kv_heads, 1, d), generator=g)[:, :heads]  # a strided view, as in forward()
    valid = torch.ones((cap, length), dtype=torch.bool)
    valid[0, :6] = False  # left padding
    valid[3, 10:12] = False
    valid[4, : end - 1] = False  # a single visible key
    mask_view = valid[:b, None, None, :end]
    ours = dec.attend_native(q, keys, values, mask_view[:, 0, 0], torch.empty(heads // kv_heads * end))
    additive = torch.zeros(mask_view.shape).masked_fill_(~mask_view, float("-inf"))
    ref = dec.attend(q, keys[:b, :, :end], values[:b, :, :end], additive)
    assert ours.shape == ref.shape == (b, heads, 1, d)
    torch.testing.assert_close(ours, ref, atol=2e-6, rtol=1e-5)
    torch.testing.assert_close(
        ours[4], values[4, :, end - 1].repeat_interleave(heads // kv_heads, 0)[:, None], atol=1e-6, rtol=0
    )


def test_kernel_rejects_a_mask_wider_than_the_cache(native, tokenizer):
    dec = Decoder(qwen(tokenizer, 32, 4, 2), attention="native")
    keys = values = torch.zeros((3, 2, 10, 8))
    with pytest.raises(ValueError, match="exceed the cache"):
        dec.attend_native(
            torch.zeros((3, 4, 1, 8)), keys, values, torch.ones((3, 12), dtype=torch.bool), torch.empty(24)
        )
    with pytest.raises(ValueError, match="scratch"):
        dec.attend_native(
            torch.zeros((3, 4, 1, 8)), keys, values, torch.ones((3, 10), dtype=torch.bool), torch.empty(19)
        )


@pytest.mark.parametrize("temperature", [1.0, 0.0])
@pytest.mark.parametrize(("cap", "shards", "n_threads"), [(0, 1, 1), (6, 1, 1), (0, 2, 2)])
def test_engine_samples_the_same_with_either_attention(
    temperature, cap, shards, n_threads, native, tokenizer, threads, monkeypatch
):
    """Whole rollouts (compaction, continuous batching with per-row cache slots, two 1-thread shards): same
    tokens, log-probs within 1e-5, with the native kernel and with torch ops (both in the torch forward;
    the native whole step, which calls the kernel from C, is tested in test_native_step.py)."""
    threads(n_threads)
    calls = []
    real = Decoder.attend_native
    monkeypatch.setattr(Decoder, "attend_native", lambda self, *a: calls.append(1) or real(self, *a))
    model = qwen(tokenizer, hidden=64, heads=4, kv_heads=2, seed=5)  # d = 16: the vector path
    ids = [tokenizer(p)["input_ids"] for p in PROMPTS]
    s = settings(tokenizer, temperature=temperature)
    a = FastEngine(max_active_sequences=cap, shards=shards, attention="native", decode_step="torch").generate(
        model, ids, 4, s, torch.Generator().manual_seed(7)
    )
    assert len(calls) >= 2 * 30  # every decode step of both layers
    calls.clear()
    b = FastEngine(max_active_sequences=cap, shards=shards, attention="torch", decode_step="torch").generate(
        model, ids, 4, s, torch.Generator().manual_seed(7)
    )
    assert not calls
    assert torch.equal(a.tokens, b.tokens) and torch.equal(a.lengths, b.lengths)
    torch.testing.assert_close(a.logprobs, b.logprobs, atol=1e-5, rtol=0)
    if temperature:
        assert 0 < int(a.finished.sum()) < len(a.finished)  # some rows ended early: the mask and compaction ran


def test_a_multithreaded_step_keeps_torch_ops(native, tokenizer, threads, monkeypatch):
    threads(2)
    monkeypatch.setattr(Decoder, "attend_native", lambda *a: pytest.fail("the kernel ran on a 2-thread step"))
    monkeypatch.setattr(Decoder, "forward_native", lambda *a: pytest.fail("the native step ran on a 2-thread step"))
    FastEngine(shards=1, attention="native").generate(
        qwen(tokenizer, 32, 4, 2), [tokenizer("1+2=")["input_ids"]], 2, settings(tokenizer, max_new_tokens=5), None
    )


def test_auto_uses_the_kernel_where_it_applies(native, tokenizer):
    model = qwen(tokenizer, 32, 4, 2)
    assert Decoder(model).native is native
    assert Decoder(model, attention="torch").native is None
    assert Decoder(model.to(torch.bfloat16)).native is None  # bf16 cache: torch ops
    with pytest.raises(ValueError, match="fp32 model on the CPU"):
        Decoder(model, attention="native")


def test_disabled_kernel_falls_back_or_fails_clearly(fresh_kernels, monkeypatch, tokenizer, caplog):
    monkeypatch.setenv("ASCENT_NATIVE", "0")
    model = qwen(tokenizer, 32, 4, 2)
    with caplog.at_level("WARNING", logger="ascent.kernels"):
        assert Decoder(model).native is None
    assert "ASCENT_NATIVE=0" in kernels.unavailable() and "unavailable" in caplog.text
    with pytest.raises(RuntimeError, match="native kernel is unavailable .*ASCENT_NATIVE=0"):
        Decoder(model, attention="native")
    assert not Decoder(model).native_step
    ids, s = [tokenizer("1+2=")["input_ids"]], settings(tokenizer, max_new_tokens=5)
    gen = FastEngine().generate(model, ids, 4, s, torch.Generator().manual_seed(0))
    ref = make_engine("cached").generate(model, ids, 4, s, torch.Generator().manual_seed(0))
    assert torch.equal(gen.tokens, ref.tokens) and torch.equal(gen.lengths, ref.lengths)  # the torch path samples right


def test_a_failing_compiler_is_reported_not_raised(fresh_kernels, monkeypatch, tmp_path):
    bad = tmp_path / "cc"
    bad.write_text("#!/bin/sh\necho 'cc: no such luck' >&2\nexit 1\n")
    bad.chmod(0o755)
    monkeypatch.setenv("CC", str(bad))
    assert kernels.load() is None
    assert "failed" in kernels.unavailable() and "no such luck" in kernels.unavailable()
    assert not list(fresh_kernels.glob("kernels/*.so"))  # nothing half-written left behind


def test_build_is_cached_per_source_and_machine(fresh_kernels, monkeypatch):
    cc = kernels.compiler()
    if cc is None:
        pytest.skip("no C compiler")
    first = kernels.build(cc, fresh_kernels / "kernels")
    calls = []
    real_run = kernels.subprocess.run
    monkeypatch.setattr(kernels.subprocess, "run", lambda cmd, **kw: calls.append(cmd) or real_run(cmd, **kw))
    assert kernels.build(cc, fresh_kernels / "kernels") == first  # found, not rebuilt
    assert all("-c" not in c for c in calls)  # only `cc --version`, for the cache key
    monkeypatch.setattr(kernels, "cpu_flags", lambda: "another cpu")
    assert kernels.build(cc, fresh_kernels / "kernels") != first  # -march=native code is per CPU


def test_attention_setting_is_validated():
    with pytest.raises(ValueError, match="rollout.attention"):
        make_engine("ascent", attention="fast")
    with pytest.raises(ValueError, match="rollout.attention"):
        make_engine("hf", attention="native")
    assert make_engine("ascent", attention="torch").attention == "torch"
