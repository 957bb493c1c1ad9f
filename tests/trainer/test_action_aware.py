"""GUI-Libra's action-aware SFT (`warmstart.action_weight`): which imitated tokens are actions, the weights, and the
weighted NLL against its value computed by hand."""

from __future__ import annotations

import string

import pytest
import torch

from ascent.config.schema import WarmStartConfig
from ascent.policy.model import Policy, token_logprobs
from ascent.policy.tokenizer import char_tokenizer
from ascent.rollout.types import RolloutBatch
from ascent.trainer.action_aware import action_spans, action_token_flags, action_weights
from ascent.trainer.sft import nll_loss
from tests.conftest import tiny_qwen

TOK = char_tokenizer(string.ascii_letters + string.digits + string.punctuation + " ")


def ids(text: str) -> list[int]:
    return TOK(text, add_special_tokens=False)["input_ids"]


def test_action_spans_and_token_flags():
    text = "I read doc-3. <answer>Velmor</answer>"
    assert action_spans(text) == [(14, 37)]
    assert action_token_flags(TOK, ids(text)) == [False] * 14 + [True] * 23
    call = '<tool_call>{"name": "search"}</tool_call>'
    assert action_token_flags(TOK, ids("ok " + call)) == [False] * 3 + [True] * len(call)
    assert action_token_flags(TOK, ids("no action here")) == [False] * 14


def batch_of(prompt: str, completion: str) -> RolloutBatch:
    p, c = ids(prompt), ids(completion)
    n = len(p) + len(c)
    mask = torch.zeros(1, n)
    mask[0, len(p) :] = 1.0
    return RolloutBatch(
        input_ids=torch.tensor([p + c]),
        attention_mask=torch.ones(1, n, dtype=torch.long),
        completion_mask=mask,
        sampled_logprobs=torch.zeros(1, n),
        group_index=torch.zeros(1, dtype=torch.long),
        finished=torch.ones(1, dtype=torch.bool),
        prompts=[prompt],
        completions=[completion],
        fields=[{}],
    )


def test_weights_and_the_weighted_nll_by_hand():
    batch = batch_of("Q: who?", "Kalo. <answer>Velmor</answer>")
    w = action_weights(batch, TOK, 3.0)
    expected = [0.0] * 7 + [1.0] * 6 + [3.0] * len("<answer>Velmor</answer>")
    assert w[0].tolist() == expected
    assert torch.equal(action_weights(batch, TOK, 1.0), batch.completion_mask)
    policy = Policy(model=tiny_qwen(TOK, seed=0, layers=1), tokenizer=TOK)
    loss, finite = nll_loss(policy, batch, micro_batch_size=4, weights=w)
    with torch.no_grad():
        logp = token_logprobs(policy.model, batch.input_ids, batch.attention_mask)
    by_hand = float((-logp * w).sum() / batch.completion_mask.sum())
    assert finite and loss == pytest.approx(by_hand, rel=1e-5)
    plain, _ = nll_loss(policy, batch, micro_batch_size=4)
    assert plain == pytest.approx(float((-logp * batch.completion_mask).sum() / batch.completion_mask.sum()), rel=1e-5)
    assert loss > plain


def test_action_weight_must_be_positive():
    with pytest.raises(ValueError, match="action_weight must be > 0"):
        WarmStartConfig(action_weight=0.0)
