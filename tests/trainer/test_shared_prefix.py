"""The learner's shared-prefix forward: each distinct prompt of a micro-batch runs once and its KV cache
serves the group's samples. Log-probs and gradients must equal the plain per-row forward's."""

from __future__ import annotations

import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM

from ascent.policy.model import shared_prefix_logprobs, supports_shared_prefix, token_logprobs
from ascent.rollout import SamplingSettings, assemble, make_engine

PROMPTS = ["12+34=", "7+8=", "99+1=", "5=", "1+2+3="]  # different lengths: prompts are left-padded inside


def batch_for(model, tokenizer, n=4, max_new=24, seed=0):
    ids = [tokenizer(p)["input_ids"] for p in PROMPTS]
    s = SamplingSettings(max_new_tokens=max_new, eos_id=tokenizer.eos_token_id, pad_id=tokenizer.pad_token_id)
    gen = make_engine("ascent").generate(model, ids, n, s, torch.Generator().manual_seed(seed))
    return assemble(PROMPTS, ids, [{} for _ in PROMPTS], gen, n, tokenizer)


def qwen(tokenizer):
    from tests.conftest import tiny_qwen

    return tiny_qwen(tokenizer, seed=5, hidden=64, layers=2).train()


def llama(tokenizer):
    torch.manual_seed(3)
    cfg = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=128,
        tie_word_embeddings=False,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    return LlamaForCausalLM(cfg).train()


def grads_of(model, logprobs, weights):
    model.zero_grad()
    (logprobs * weights).sum().backward()
    return [p.grad.clone() for p in model.parameters() if p.grad is not None]


@pytest.mark.parametrize("make", [qwen, llama])
@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_same_logprobs_and_gradients_as_the_plain_forward(make, temperature, tokenizer):
    model = make(tokenizer)
    b = batch_for(model, tokenizer)
    assert len(set(b.completion_mask.sum(-1).tolist())) > 3  # completions of many lengths
    plain = token_logprobs(model, b.input_ids, b.attention_mask, temperature)
    shared = shared_prefix_logprobs(model, b.input_ids, b.attention_mask, b.completion_mask, b.group_index, temperature)
    m = b.completion_mask
    assert shared is not None and shared.shape == plain.shape
    assert float(((plain - shared).abs() * m).max()) <= 1e-5
    prompt = torch.arange(b.input_ids.shape[1])[None] < m.argmax(-1)[:, None]
    assert float(shared[prompt].abs().max()) == 0.0  # prompt positions are not computed
    w = torch.randn(len(b), 1) * m  # a loss on the completion tokens
    for gp, gs in zip(grads_of(model, plain, w), grads_of(model, shared, w)):
        assert torch.allclose(gp, gs, atol=2e-5, rtol=1e-4)


def test_prompts_are_forwarded_once_per_group(tokenizer):
    model = qwen(tokenizer)
    b = batch_for(model, tokenizer, n=6)
    seen = []
    handle = model.register_forward_pre_hook(
        lambda mod, args, kwargs: seen.append(tuple(kwargs["input_ids"].shape)), with_kwargs=True
    )
    shared_prefix_logprobs(model, b.input_ids, b.attention_mask, b.completion_mask, b.group_index)
    handle.remove()
    longest_prompt = max(len(tokenizer(p)["input_ids"]) for p in PROMPTS)
    longest_completion = int(b.completion_mask.sum(-1).max())
    assert seen == [(len(PROMPTS), longest_prompt), (len(b), longest_completion - 1)]  # the last token is only a target


def test_falls_back_when_rows_do_not_share_prompts(tokenizer):
    model = qwen(tokenizer)
    b = batch_for(model, tokenizer)
    args = (b.input_ids, b.attention_mask, b.completion_mask)
    assert shared_prefix_logprobs(model, *args, torch.arange(len(b))) is None  # every row its own prompt
    wrong = torch.zeros_like(b.group_index)  # all rows claim one group, but the prompts differ
    assert shared_prefix_logprobs(model, *args, wrong) is None
    no_completion = b.completion_mask.clone()
    no_completion[3] = 0
    assert shared_prefix_logprobs(model, b.input_ids, b.attention_mask, no_completion, b.group_index) is None


def test_lora_policy_shares_prefixes(tokenizer):
    from ascent.config.schema import LoraConfig, ModelConfig
    from ascent.policy.model import add_lora

    model = add_lora(
        qwen(tokenizer),
        ModelConfig(lora=LoraConfig(enabled=True, r=4, alpha=8, target_modules=("q_proj", "v_proj", "up_proj"))),
    )
    for name, p in model.named_parameters():
        if "lora_B" in name:
            torch.nn.init.normal_(p, std=0.1)  # adapters that change the output
    assert supports_shared_prefix(model)
    b = batch_for(model, tokenizer)
    plain = token_logprobs(model, b.input_ids, b.attention_mask)
    shared = shared_prefix_logprobs(model, b.input_ids, b.attention_mask, b.completion_mask, b.group_index)
    assert float(((plain - shared).abs() * b.completion_mask).max()) <= 1e-5
    w = torch.randn(len(b), 1) * b.completion_mask
    gp, gs = grads_of(model, plain, w), grads_of(model, shared, w)
    assert len(gp) == len(gs) > 0 and all(torch.allclose(x, y, atol=2e-5, rtol=1e-4) for x, y in zip(gp, gs))


def test_unsupported_models_are_recognised(tokenizer):
    from transformers import GPT2Config, GPT2LMHeadModel

    assert not supports_shared_prefix(GPT2LMHeadModel(GPT2Config(vocab_size=17, n_embd=32, n_layer=1, n_head=2)))
    assert supports_shared_prefix(qwen(tokenizer))


def test_one_token_completions(tokenizer):
    """Completions of one token: the prompt's forward alone gives every log-prob."""
    model = qwen(tokenizer)
    b = batch_for(model, tokenizer, max_new=1)
    plain = token_logprobs(model, b.input_ids, b.attention_mask)
    shared = shared_prefix_logprobs(model, b.input_ids, b.attention_mask, b.completion_mask, b.group_index)
    assert float(((plain - shared).abs() * b.completion_mask).max()) <= 1e-5
    assert int(b.completion_mask.sum()) == len(b)


def test_the_backward_uses_no_op_whose_cpu_gradient_is_nondeterministic(tokenizer):
    """Each sample's gradient flows back into its prompt's one forward through a gather by group. Indexing
    with a tensor (`x[index]`, the cache's own `batch_select_indices`) backpropagates through `index_put_` with
    accumulate, which torch documents as nondeterministic on the CPU: same-seed SmolLM2 runs drifted apart at
    float rounding within three steps. The gathers must be `index_select` (backward `index_add_`, fixed order)."""
    model = qwen(tokenizer)
    b = batch_for(model, tokenizer)
    lp = shared_prefix_logprobs(model, b.input_ids, b.attention_mask, b.completion_mask, b.group_index)
    assert lp is not None
    seen, stack, names = set(), [lp.grad_fn], set()
    while stack:
        node = stack.pop()
        if node is None or node in seen:
            continue
        seen.add(node)
        names.add(type(node).__name__)
        stack.extend(next_fn for next_fn, _ in node.next_functions)
    assert "IndexSelectBackward0" in names  # the walk reached the gathers
    assert not {n for n in names if n.startswith(("IndexBackward", "IndexPutBackward"))}, sorted(names)
