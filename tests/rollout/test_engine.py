"""Rollout engines: reproducibility, greedy determinism, EOS / max-length handling, masks, and sampled
log-probs equal to the learner's teacher-forced recompute."""

from __future__ import annotations

import math

import pytest
import torch

from ascent.policy.model import token_logprobs
from ascent.rollout import SamplingSettings, assemble, make_engine
from ascent.rollout.sampling import filter_logits

PROMPTS = ["12+34=", "7+8=", "99+1=", "5="]


def ids_of(tokenizer, prompts=PROMPTS):
    return [tokenizer(p)["input_ids"] for p in prompts]


def settings(tokenizer, **kw):
    return SamplingSettings(
        max_new_tokens=kw.pop("max_new_tokens", 6), eos_id=tokenizer.eos_token_id, pad_id=tokenizer.pad_token_id, **kw
    )


@pytest.mark.parametrize("backend", ["ascent", "cached", "hf"])
def test_seeded_sampling_is_reproducible(backend, tiny_policy, tokenizer):
    engine, s = make_engine(backend), settings(tokenizer)
    a = engine.generate(tiny_policy.model, ids_of(tokenizer), 4, s, torch.Generator().manual_seed(3))
    b = engine.generate(tiny_policy.model, ids_of(tokenizer), 4, s, torch.Generator().manual_seed(3))
    c = engine.generate(tiny_policy.model, ids_of(tokenizer), 4, s, torch.Generator().manual_seed(4))
    assert torch.equal(a.tokens, b.tokens) and torch.equal(a.logprobs, b.logprobs)
    assert not torch.equal(a.tokens, c.tokens)


def test_greedy_is_deterministic_and_equals_hf_generate(tiny_policy, tokenizer):
    s = settings(tokenizer, temperature=0.0, max_new_tokens=10)
    ours = make_engine("ascent").generate(tiny_policy.model, ids_of(tokenizer), 1, s, None)
    again = make_engine("ascent").generate(tiny_policy.model, ids_of(tokenizer), 1, s, None)
    hf = make_engine("hf").generate(tiny_policy.model, ids_of(tokenizer), 1, s, None)
    assert torch.equal(ours.tokens, again.tokens)
    assert torch.equal(ours.tokens, hf.tokens)
    assert torch.equal(ours.lengths, hf.lengths)


@pytest.mark.parametrize("backend", ["ascent", "cached", "hf"])
def test_uniform_model_logprobs_and_max_length(backend, uniform_policy, tokenizer):
    vocab = len(tokenizer)
    s = settings(tokenizer, max_new_tokens=5)
    gen = make_engine(backend).generate(uniform_policy.model, ids_of(tokenizer), 8, s, torch.Generator().manual_seed(0))
    assert gen.tokens.shape == (len(PROMPTS) * 8, 5)
    assert int(gen.lengths.max()) <= 5 and int(gen.lengths.min()) >= 1
    for i in range(gen.tokens.shape[0]):
        n = int(gen.lengths[i])
        assert torch.allclose(gen.logprobs[i, :n], torch.full((n,), -math.log(vocab)), atol=1e-5)
        assert torch.all(gen.logprobs[i, n:] == 0) and torch.all(gen.tokens[i, n:] == tokenizer.pad_token_id)
        ended = bool((gen.tokens[i, :n] == tokenizer.eos_token_id).any())
        assert ended == bool(gen.finished[i])
        if ended:  # EOS only as the last sampled token
            assert int(gen.tokens[i, n - 1]) == tokenizer.eos_token_id
            assert not bool((gen.tokens[i, : n - 1] == tokenizer.eos_token_id).any())
        else:
            assert n == 5


@pytest.mark.parametrize("backend", ["cached", "hf"])  # the hook acts on lm_head, which the fast decoder reads directly
def test_eos_stops_sequences(backend, uniform_policy, tokenizer):
    """Bias the model towards EOS (p = e^2 / (e^2 + 16) per step): lengths are geometric with mean 1/p."""
    model = uniform_policy.model
    bias = torch.nn.functional.one_hot(torch.tensor(tokenizer.eos_token_id), len(tokenizer)).float() * 2.0
    hook = model.lm_head.register_forward_hook(lambda m, i, o: o + bias)
    gen = make_engine(backend).generate(
        model, ids_of(tokenizer), 64, settings(tokenizer, max_new_tokens=40), torch.Generator().manual_seed(0)
    )
    hook.remove()
    p = math.exp(2) / (math.exp(2) + len(tokenizer) - 1)
    assert gen.finished.float().mean() > 0.99
    assert abs(gen.lengths.float().mean() - 1 / p) < 0.35  # 256 draws: std of the mean ~0.16


@pytest.mark.parametrize("backend", ["ascent", "cached", "hf"])
@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_sampled_logprobs_match_teacher_forced(backend, temperature, tiny_policy, tokenizer):
    s = settings(tokenizer, temperature=temperature, max_new_tokens=8)
    ids = ids_of(tokenizer)
    gen = make_engine(backend).generate(tiny_policy.model, ids, 4, s, torch.Generator().manual_seed(1))
    batch = assemble(PROMPTS, ids, [{} for _ in PROMPTS], gen, 4, tokenizer)
    with torch.no_grad():
        lp = token_logprobs(tiny_policy.model, batch.input_ids, batch.attention_mask, temperature)
    gap = ((lp - batch.sampled_logprobs).abs() * batch.completion_mask).max()
    assert float(gap) <= 1e-4
    # masks: completion tokens only, and exactly `lengths` of them per row
    assert torch.equal(batch.completion_mask.sum(-1).long(), gen.lengths)
    prompt_len = torch.tensor([len(ids[i // 4]) for i in range(len(batch))])
    first = batch.completion_mask.argmax(-1)
    assert torch.equal(first, prompt_len)
    assert torch.equal(batch.attention_mask.sum(-1), prompt_len + gen.lengths)
    assert torch.equal(batch.group_index, torch.arange(len(PROMPTS)).repeat_interleave(4))


def test_group_samples_share_the_prompt(tiny_policy, tokenizer):
    ids = ids_of(tokenizer)
    gen = make_engine("ascent").generate(
        tiny_policy.model, ids, 3, settings(tokenizer), torch.Generator().manual_seed(0)
    )
    batch = assemble(PROMPTS, ids, [{"k": i} for i in range(len(PROMPTS))], gen, 3, tokenizer)
    for i in range(len(batch)):
        p = ids[i // 3]
        assert batch.input_ids[i, : len(p)].tolist() == p
        assert batch.prompts[i] == PROMPTS[i // 3] and batch.fields[i] == {"k": i // 3}


def test_top_k_top_p_filtering():
    logits = torch.log(torch.tensor([[0.5, 0.3, 0.15, 0.05]]))
    assert torch.isinf(filter_logits(logits, 2, 1.0)).tolist() == [[False, False, True, True]]
    assert torch.isinf(filter_logits(logits, 0, 0.7)).tolist() == [[False, False, True, True]]
    assert torch.isinf(filter_logits(logits, 0, 0.8)).tolist() == [[False, False, True, True]]
    assert torch.isinf(filter_logits(logits, 0, 0.85)).tolist() == [[False, False, False, True]]
    assert torch.isinf(filter_logits(logits, 0, 0.96)).tolist() == [[False, False, False, False]]


def test_top_k_restricts_samples(tiny_policy, tokenizer):
    s = settings(tokenizer, top_k=1, max_new_tokens=6)
    sampled = make_engine("ascent").generate(
        tiny_policy.model, ids_of(tokenizer), 2, s, torch.Generator().manual_seed(0)
    )
    greedy = make_engine("ascent").generate(
        tiny_policy.model, ids_of(tokenizer), 2, settings(tokenizer, temperature=0.0, max_new_tokens=6), None
    )
    assert torch.equal(sampled.tokens, greedy.tokens)


@pytest.mark.parametrize("temperature", [1.0, 0.0])
def test_fast_decoder_matches_hf_forward_engine(temperature, tokenizer):
    """The functional decoder samples exactly what the HF-forward engine samples (same seed), with early
    exits and batch compaction in play (random init: ~1/17 EOS chance per token)."""
    from tests.conftest import tiny_qwen

    model = tiny_qwen(tokenizer, seed=5, hidden=64, layers=2)
    s = settings(tokenizer, temperature=temperature, max_new_tokens=40)
    fast = make_engine("ascent").generate(model, ids_of(tokenizer), 16, s, torch.Generator().manual_seed(9))
    ref = make_engine("cached").generate(model, ids_of(tokenizer), 16, s, torch.Generator().manual_seed(9))
    assert (
        torch.equal(fast.tokens, ref.tokens)
        and torch.equal(fast.lengths, ref.lengths)
        and torch.equal(fast.finished, ref.finished)
    )
    assert torch.allclose(fast.logprobs, ref.logprobs, atol=1e-5)
    if temperature:
        assert 0.3 < float(fast.finished.float().mean()) < 1.0  # compaction happened, some rows ran to the end


def test_fast_decoder_supports_llama_gqa(tokenizer):
    from transformers import LlamaConfig, LlamaForCausalLM

    from ascent.rollout.decoder import supports

    torch.manual_seed(0)
    model = LlamaForCausalLM(
        LlamaConfig(
            vocab_size=len(tokenizer),
            hidden_size=64,
            intermediate_size=96,
            num_hidden_layers=2,
            num_attention_heads=8,
            num_key_value_heads=2,
            max_position_embeddings=128,
            tie_word_embeddings=True,
        )
    ).eval()
    assert supports(model)
    s = settings(tokenizer, temperature=0.0, max_new_tokens=12)
    fast = make_engine("ascent").generate(model, ids_of(tokenizer), 2, s, None)
    hf = make_engine("hf").generate(model, ids_of(tokenizer), 2, s, None)
    assert torch.equal(fast.tokens, hf.tokens)


@pytest.mark.parametrize("vocab", [17, 2048, 49152, 50000])
def test_inverse_cdf_matches_one_cumulative_sum(vocab):
    """The two-level inverse CDF (large vocabularies) draws what one float64 cumulative sum draws, up to
    rounding at a boundary, and never a zero-probability token (masked ids, the zero padding past V)."""
    from ascent.rollout.sampling import inverse_cdf

    g = torch.Generator().manual_seed(vocab)
    logits = torch.randn(64, vocab, generator=g) * 3
    logits[:, ::5] = float("-inf")
    logits[0, :-1] = float("-inf")  # all mass on the last id (the last block, before any padding)
    logits[1] = float("-inf")
    logits[1, 1] = 0.0  # all mass on id 1
    probs = torch.softmax(logits, -1) * 0.5  # unnormalised is fine
    agree = total = 0
    for _ in range(20):
        u = torch.rand(64, generator=g, dtype=torch.float64)
        u[:2] = 1 - 1e-12
        cdf = probs.double().cumsum(-1)
        ref = torch.searchsorted(cdf, (u * cdf[:, -1])[:, None], right=True).squeeze(-1)
        got = inverse_cdf(probs, u)
        assert bool((got < vocab).all()) and bool((probs.gather(-1, got[:, None]) > 0).all())
        assert int(got[0]) == vocab - 1 and int(got[1]) == 1
        agree, total = agree + int((got == ref).sum()), total + 64
    assert agree >= total - 2


def test_bfloat16_precision_samples_close_to_the_model(tokenizer):
    """rollout.precision=bfloat16: reproducible, the model's own weights untouched, sampled log-probs within
    bf16 rounding of the fp32 learner's (but not equal to them), and a clear error on backends without it."""
    from tests.conftest import tiny_qwen

    model = tiny_qwen(tokenizer, seed=2, hidden=64, layers=2)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    s = settings(tokenizer, max_new_tokens=12)
    ids = ids_of(tokenizer)
    engine = make_engine("ascent", precision="bfloat16")
    a = engine.generate(model, ids, 8, s, torch.Generator().manual_seed(1))
    b = make_engine("ascent", precision="bfloat16").generate(model, ids, 8, s, torch.Generator().manual_seed(1))
    assert torch.equal(a.tokens, b.tokens) and torch.equal(a.logprobs, b.logprobs)
    assert all(v.dtype == torch.float32 and torch.equal(v, before[k]) for k, v in model.state_dict().items())
    batch = assemble(PROMPTS, ids, [{} for _ in PROMPTS], a, 8, tokenizer)
    with torch.no_grad():
        lp = token_logprobs(model, batch.input_ids, batch.attention_mask, 1.0)
    gap = ((lp - batch.sampled_logprobs).abs() * batch.completion_mask).max()
    assert 1e-5 < float(gap) < 0.05
    fp32 = make_engine("ascent").generate(model, ids, 8, s, torch.Generator().manual_seed(1))
    assert float((fp32.tokens == a.tokens).float().mean()) > 0.8  # same uniforms, nearly the same distribution
    for backend in ("cached", "hf", "vllm"):
        with pytest.raises(ValueError, match="rollout.precision"):
            make_engine(backend, precision="bfloat16")
    with pytest.raises(ValueError, match="rollout.precision"):
        make_engine("ascent", precision="float16")


def test_native_bf16_detection(tmp_path):
    from ascent.rollout.ascent_engine import cpu_has_native_bf16

    cpu = tmp_path / "cpuinfo"
    cpu.write_text("processor\t: 0\nflags\t\t: fpu sse avx2 avx512f avx512_bf16 avx512_vnni\n")
    assert cpu_has_native_bf16(str(cpu)) is True
    other = tmp_path / "cpuinfo2"
    other.write_text("processor\t: 0\nflags\t\t: fpu sse avx2 avx512f\n")
    assert cpu_has_native_bf16(str(other)) is False
    arm = tmp_path / "cpuinfo3"
    arm.write_text("processor\t: 0\nFeatures\t: fp asimd sve bf16 i8mm\n")
    assert cpu_has_native_bf16(str(arm)) is True
    assert cpu_has_native_bf16(str(tmp_path / "missing")) is None


def test_bf16_on_a_cpu_without_native_bf16_warns(monkeypatch, tiny_policy, tokenizer):
    import ascent.rollout.ascent_engine as engine_mod

    monkeypatch.setattr(engine_mod, "cpu_has_native_bf16", lambda: False)
    engine = make_engine("ascent", precision="bfloat16")
    with pytest.warns(RuntimeWarning, match="emulated"):
        engine.generate(tiny_policy.model, ids_of(tokenizer), 2, settings(tokenizer), torch.Generator().manual_seed(0))
    monkeypatch.setattr(engine_mod, "cpu_has_native_bf16", lambda: True)
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        make_engine("ascent", precision="bfloat16").generate(
            tiny_policy.model, ids_of(tokenizer), 2, settings(tokenizer), torch.Generator().manual_seed(0)
        )


@pytest.mark.parametrize("precision", ["model", "bfloat16"])
def test_fast_decoder_runs_lora_policies(precision, tokenizer):
    """A peft LoRA policy (adapters on every block projection, B made non-zero so they matter) goes through
    the fast decoder with its adapters merged: the same samples as the HF-forward engine, log-probs equal to
    the learner's teacher-forced ones in fp32, and the adapters' effect is really in them."""
    from peft import LoraConfig, get_peft_model

    from ascent.rollout.decoder import supports
    from tests.conftest import tiny_qwen

    base = tiny_qwen(tokenizer, seed=4, hidden=64, layers=2)
    plain = make_engine("ascent").generate(
        base, ids_of(tokenizer), 4, settings(tokenizer, max_new_tokens=10), torch.Generator().manual_seed(2)
    )
    model = get_peft_model(
        base,
        LoraConfig(
            r=4,
            lora_alpha=8,
            lora_dropout=0.0,
            target_modules=["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"],
            task_type="CAUSAL_LM",
        ),
    ).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "lora_B" in name:
                p.copy_(torch.randn_like(p) * 0.5)
    assert supports(model)
    s = settings(tokenizer, max_new_tokens=10)
    ids = ids_of(tokenizer)
    fast = make_engine("ascent", precision=precision).generate(model, ids, 4, s, torch.Generator().manual_seed(2))
    batch = assemble(PROMPTS, ids, [{} for _ in PROMPTS], fast, 4, tokenizer)
    with torch.no_grad():
        lp = token_logprobs(model, batch.input_ids, batch.attention_mask, 1.0)
    gap = float(((lp - batch.sampled_logprobs).abs() * batch.completion_mask).max())
    if precision == "model":
        ref = make_engine("cached").generate(model, ids, 4, s, torch.Generator().manual_seed(2))
        assert torch.equal(fast.tokens, ref.tokens) and torch.allclose(fast.logprobs, ref.logprobs, atol=1e-5)
        assert gap <= 1e-4
        assert not torch.equal(fast.tokens, plain.tokens)  # the adapters changed what is sampled
    else:
        assert 1e-5 < gap < 0.05
