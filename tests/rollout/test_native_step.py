"""The native whole decode step (`rollout.decode_step`, `ascent/kernels/decode_step.c`): the same
logits as the torch forward for Qwen2 (q/k/v biases, tied output layer) and Llama (no biases, untied) with
GQA, lockstep and per-row cache columns; the same samples through the engine; argument checks in C that
become clear errors; and the fallbacks of `auto`."""

from __future__ import annotations

import pytest
import torch

from ascent.config.loader import ConfigError, load_config
from ascent.rollout import SamplingSettings, make_engine
from ascent.rollout.ascent_engine import FastEngine
from ascent.rollout.decoder import Decoder

PROMPTS = ["12+34=", "7+8=", "99+1=", "5=", "1+2+3="]


def qwen(tokenizer, hidden=64, heads=4, kv_heads=2, layers=2, seed=3):
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(seed)
    cfg = Qwen2Config(
        vocab_size=len(tokenizer),
        hidden_size=hidden,
        intermediate_size=2 * hidden + 8,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=kv_heads,
        max_position_embeddings=256,
        tie_word_embeddings=True,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    return Qwen2ForCausalLM(cfg).eval()


def llama(tokenizer, hidden=48, heads=6, kv_heads=3, seed=4):
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    cfg = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=hidden,
        intermediate_size=100,
        num_hidden_layers=3,
        num_attention_heads=heads,
        num_key_value_heads=kv_heads,
        max_position_embeddings=256,
        tie_word_embeddings=False,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    return LlamaForCausalLM(cfg).eval()


def settings(tokenizer, **kw):
    return SamplingSettings(
        max_new_tokens=kw.pop("max_new_tokens", 30), eos_id=tokenizer.eos_token_id, pad_id=tokenizer.pad_token_id, **kw
    )


def filled_cache(dec: Decoder, rows: int, length: int, seed: int):
    g = torch.Generator().manual_seed(seed)
    keys, values = dec.new_cache(rows, length)
    keys.normal_(generator=g)
    values.normal_(generator=g)
    return keys, values


@pytest.mark.parametrize(("m", "n", "k"), [(64, 768, 256), (13, 17, 40), (1, 33, 7), (9, 64, 1)])
def test_packed_matrix_kernel_equals_a_matmul(m, n, k, native):
    """The step's matrix products: weights packed into 32-column panels (zero past N), 8-row register
    tiles plus a partial tile; with and without a bias. Reference in float64."""
    g = torch.Generator().manual_seed(m * n + k)
    x, w, bias = torch.randn((m, k), generator=g), torch.randn((n, k), generator=g), torch.randn(n, generator=g)
    packed = native.pack(w)
    assert packed.numel() == -(-n // 32) * 32 * k
    for b in (None, bias):
        want = x.double() @ w.double().T + (0 if b is None else b.double())
        torch.testing.assert_close(native.linear(x, packed, n, b).double(), want, atol=1e-5 * k**0.5, rtol=1e-5)
    with pytest.raises(ValueError, match="packed weight"):
        native.linear(x, packed, n + 40)


@pytest.mark.parametrize("arch", ["qwen2", "llama"])
@pytest.mark.parametrize("per_row", [False, True])
def test_native_step_equals_the_torch_forward(arch, per_row, native, one_thread, tokenizer):
    """One step over a cache with more rows and columns than are used and holes in the mask: the same
    logits and the same cache writes as `Decoder.forward` with torch ops."""
    model = qwen(tokenizer) if arch == "qwen2" else llama(tokenizer)
    native, ref = Decoder(model, decode_step="native"), Decoder(model, attention="torch", decode_step="torch")
    assert native.native_step and not ref.native_step
    b, cap, length = 5, 7, 24
    cache_n, cache_t = filled_cache(native, cap, length, 0), filled_cache(ref, cap, length, 0)
    ids = torch.tensor([[3], [7], [1], [12], [5]])
    if per_row:  # rows at different steps (continuous batching): each writes its own column
        cols = torch.tensor([9, 4, 15, 11, 6])
        positions, end = cols[:, None] - 2, int(cols.max()) + 1
        start_n = start_t = cols
    else:
        positions, end = torch.tensor([[13], [11], [13], [9], [13]]), 14
        start_n = start_t = end - 1
    valid = torch.ones((cap, length), dtype=torch.bool)
    valid[0, :3] = False  # left padding
    valid[2, 5:7] = False
    mask = valid[:b, None, None, :end]
    for dec in (native, ref):
        dec.rope_table(64)
    got = native.forward(ids, positions, cache_n, start_n, mask)
    want = ref.forward(ids, positions, cache_t, start_t, mask)
    torch.testing.assert_close(got, want, atol=2e-5, rtol=1e-5)
    torch.testing.assert_close(cache_n[0], cache_t[0], atol=1e-6, rtol=1e-5)  # keys written at the same columns
    torch.testing.assert_close(cache_n[1], cache_t[1], atol=1e-6, rtol=1e-5)


@pytest.mark.parametrize("temperature", [1.0, 0.0])
@pytest.mark.parametrize(("cap", "shards", "n_threads"), [(0, 1, 1), (6, 1, 1), (0, 2, 2)])
def test_engine_samples_the_same_with_the_native_step(
    temperature, cap, shards, n_threads, native, threads, tokenizer, monkeypatch
):
    """Whole rollouts (compaction, continuous batching, two 1-thread shards): same tokens, log-probs within
    1e-5, with the native step and with the torch forward; the native step ran at every decode step."""
    threads(n_threads)
    calls = []
    real = Decoder.forward_native
    monkeypatch.setattr(Decoder, "forward_native", lambda self, *a: calls.append(1) or real(self, *a))
    model = qwen(tokenizer, seed=5)
    ids = [tokenizer(p)["input_ids"] for p in PROMPTS]
    s = settings(tokenizer, temperature=temperature)
    a = FastEngine(max_active_sequences=cap, shards=shards, decode_step="native").generate(
        model, ids, 4, s, torch.Generator().manual_seed(7)
    )
    assert len(calls) >= 30
    calls.clear()
    b = FastEngine(max_active_sequences=cap, shards=shards, decode_step="torch").generate(
        model, ids, 4, s, torch.Generator().manual_seed(7)
    )
    assert not calls
    assert torch.equal(a.tokens, b.tokens) and torch.equal(a.lengths, b.lengths)
    torch.testing.assert_close(a.logprobs, b.logprobs, atol=1e-5, rtol=0)
    if temperature:
        assert 0 < int(a.finished.sum()) < len(a.finished)  # some rows ended early: the mask and compaction ran


def test_native_step_logprobs_match_the_learner(native, one_thread, tokenizer):
    """What the learner recomputes: teacher-forced log-probs of the sampled tokens within 1e-4 (fp32)."""
    from ascent.policy.model import token_logprobs

    model = llama(tokenizer)
    ids = [tokenizer(p)["input_ids"] for p in PROMPTS]
    gen = FastEngine(decode_step="native").generate(
        model, ids, 3, settings(tokenizer, max_new_tokens=12, ignore_eos=True), torch.Generator().manual_seed(1)
    )
    width = max(len(p) for p in ids)
    rows = [ids[i // 3] for i in range(len(ids) * 3)]
    seqs = torch.tensor(
        [[tokenizer.pad_token_id] * (width - len(p)) + p + gen.tokens[i].tolist() for i, p in enumerate(rows)]
    )
    att = torch.tensor([[0] * (width - len(p)) + [1] * (len(p) + 12) for p in rows])
    with torch.no_grad():
        lp = token_logprobs(model, seqs, att)[:, width:]  # (N, 12): out[:, t] = log p(x_t | x_<t)
    assert float((lp - gen.logprobs).abs().max()) <= 1e-4


def test_lora_policy_runs_the_native_step(native, one_thread, tokenizer):
    """peft LoRA adapters merged into the step's weights: the same samples as the torch forward."""
    from peft import LoraConfig, get_peft_model

    model = get_peft_model(
        qwen(tokenizer, seed=6),
        LoraConfig(
            r=4,
            lora_alpha=8,
            lora_dropout=0.0,
            target_modules=["q_proj", "v_proj", "o_proj", "down_proj"],
            task_type="CAUSAL_LM",
        ),
    ).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "lora_B" in name:
                p.copy_(torch.randn_like(p) * 0.5)
    ids = [tokenizer(p)["input_ids"] for p in PROMPTS]
    s = settings(tokenizer, max_new_tokens=10)
    a = FastEngine(decode_step="native").generate(model, ids, 2, s, torch.Generator().manual_seed(3))
    b = FastEngine(decode_step="torch").generate(model, ids, 2, s, torch.Generator().manual_seed(3))
    assert torch.equal(a.tokens, b.tokens)
    torch.testing.assert_close(a.logprobs, b.logprobs, atol=1e-5, rtol=0)


def test_bad_arguments_become_clear_errors(native, one_thread, tokenizer):
    dec = Decoder(qwen(tokenizer), decode_step="native")
    dec.rope_table(32)
    cache = dec.new_cache(2, 16)
    mask = torch.ones((2, 1, 1, 8), dtype=torch.bool)
    with pytest.raises(RuntimeError, match="a token outside the vocabulary"):
        dec.forward(torch.tensor([[1], [len(tokenizer) + 3]]), torch.tensor([[7], [7]]), cache, 7, mask)
    with pytest.raises(RuntimeError, match="a cache column outside the cache"):
        dec.forward(torch.tensor([[1], [2]]), torch.tensor([[7], [7]]), cache, torch.tensor([3, 9]), mask)
    with pytest.raises(ValueError, match="room for the batch"):
        dec.forward(
            torch.tensor([[1], [2], [3]]),
            torch.tensor([[7], [7], [7]]),
            cache,
            7,
            torch.ones((3, 1, 1, 8), dtype=torch.bool),
        )
    ref = Decoder(dec.model, attention="torch", decode_step="torch")
    ref.rope_table(64)
    cache, ref_cache = filled_cache(dec, 2, 16, 1), filled_cache(ref, 2, 16, 1)  # keys at 0..6: positions matter
    ids, positions = torch.tensor([[1], [2]]), torch.tensor([[40], [7]])
    out = dec.forward(ids, positions, cache, 7, mask)  # beyond the rope table: it grows
    torch.testing.assert_close(out, ref.forward(ids, positions, ref_cache, 7, mask), atol=2e-5, rtol=1e-5)


def test_auto_falls_back_where_the_step_does_not_apply(native, tokenizer, monkeypatch):
    model = qwen(tokenizer)
    assert Decoder(model).native_step
    assert not Decoder(model, decode_step="torch").native_step
    assert not Decoder(model, attention="torch").native_step
    assert not Decoder(model, compute_dtype=torch.bfloat16).native_step
    with pytest.raises(ValueError, match="rollout.decode_step=native: rollout.attention=torch"):
        Decoder(model, attention="torch", decode_step="native")
    with pytest.raises(ValueError, match="rollout.decode_step=native: the block matrices are torch.bfloat16"):
        Decoder(model, compute_dtype=torch.bfloat16, decode_step="native")


def test_a_multithreaded_step_keeps_the_torch_forward(native, two_threads, tokenizer, monkeypatch):
    monkeypatch.setattr(Decoder, "forward_native", lambda *a: pytest.fail("the native step ran on a 2-thread step"))
    monkeypatch.setattr(
        Decoder, "_build_step_model", lambda *a: pytest.fail("weights packed for a rollout that never uses them")
    )
    FastEngine(shards=1).generate(
        qwen(tokenizer), [tokenizer("1+2=")["input_ids"]], 2, settings(tokenizer, max_new_tokens=5), None
    )


def test_decode_step_setting_is_validated(tmp_path):
    with pytest.raises(ValueError, match="rollout.decode_step"):
        make_engine("ascent", decode_step="fast")
    with pytest.raises(ValueError, match="rollout.decode_step"):
        make_engine("hf", decode_step="native")
    assert make_engine("ascent", decode_step="torch").decode_step == "torch"
    with pytest.raises(ConfigError, match="decode_step"):
        load_config("default", ["rollout.decode_step=native", "rollout.attention=torch"])
    with pytest.raises(ConfigError, match="decode_step"):
        load_config("default", ["rollout.decode_step=vectorised"])
