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
    return SamplingSettings(max_new_tokens=kw.pop("max_new_tokens", 6), eos_id=tokenizer.eos_token_id, pad_id=tokenizer.pad_token_id, **kw)


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
    gen = make_engine(backend).generate(model, ids_of(tokenizer), 64, settings(tokenizer, max_new_tokens=40), torch.Generator().manual_seed(0))
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
    gen = make_engine("ascent").generate(tiny_policy.model, ids, 3, settings(tokenizer), torch.Generator().manual_seed(0))
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
    sampled = make_engine("ascent").generate(tiny_policy.model, ids_of(tokenizer), 2, s, torch.Generator().manual_seed(0))
    greedy = make_engine("ascent").generate(tiny_policy.model, ids_of(tokenizer), 2, settings(tokenizer, temperature=0.0, max_new_tokens=6), None)
    assert torch.equal(sampled.tokens, greedy.tokens)


@pytest.mark.parametrize("temperature", [1.0, 0.0])
def test_fast_decoder_matches_hf_forward_engine(temperature, tokenizer):
    """The functional decoder samples exactly what the HF-forward engine samples (same seed), with early
    exits and batch compaction in play (random init: ~1/17 EOS chance per token)."""
    from conftest import tiny_qwen

    model = tiny_qwen(tokenizer, seed=5, hidden=64, layers=2)
    s = settings(tokenizer, temperature=temperature, max_new_tokens=40)
    fast = make_engine("ascent").generate(model, ids_of(tokenizer), 16, s, torch.Generator().manual_seed(9))
    ref = make_engine("cached").generate(model, ids_of(tokenizer), 16, s, torch.Generator().manual_seed(9))
    assert torch.equal(fast.tokens, ref.tokens) and torch.equal(fast.lengths, ref.lengths) and torch.equal(fast.finished, ref.finished)
    assert torch.allclose(fast.logprobs, ref.logprobs, atol=1e-5)
    if temperature:
        assert 0.3 < float(fast.finished.float().mean()) < 1.0  # compaction happened, some rows ran to the end


def test_fast_decoder_supports_llama_gqa(tokenizer):
    from transformers import LlamaConfig, LlamaForCausalLM

    from ascent.rollout.fast import supports

    torch.manual_seed(0)
    model = LlamaForCausalLM(LlamaConfig(vocab_size=len(tokenizer), hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=8, num_key_value_heads=2, max_position_embeddings=128, tie_word_embeddings=True)).eval()
    assert supports(model)
    s = settings(tokenizer, temperature=0.0, max_new_tokens=12)
    fast = make_engine("ascent").generate(model, ids_of(tokenizer), 2, s, None)
    hf = make_engine("hf").generate(model, ids_of(tokenizer), 2, s, None)
    assert torch.equal(fast.tokens, hf.tokens)
