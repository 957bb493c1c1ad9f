"""SERL's hindsight teacher (ascent.algorithms.hindsight): the advantage weights by hand, the teacher's
log-prob gap against an independent computation on a tiny model, action tokens only, and the fading weight."""

from __future__ import annotations

import math
import types

import pytest
import torch

from ascent.algorithms import ADVANTAGES, AdvantageInput
from ascent.algorithms.hindsight import ACTION, DELTA, LAMBDA, SerlParams, SerlState, action_start, faded_strength
from ascent.config.schema import AlgorithmConfig
from ascent.policy.model import token_logprobs

CFG = AlgorithmConfig()


def test_serl_weights_by_hand():
    # one group of two: rewards 1, 0 -> GRPO advantages +-0.5 / (sqrt(0.5) + eps)
    a = 0.5 / (math.sqrt(0.5) + CFG.std_eps)
    mask = torch.ones(2, 3)
    delta = torch.tensor([[0.1, 1.0, -1.0], [0.1, 1.0, -1.0]])
    action = torch.tensor([[0.0, 1.0, 1.0], [0.0, 1.0, 1.0]])
    inp = AdvantageInput(
        torch.tensor([1.0, 0.0]),
        torch.ones(2, dtype=torch.bool),
        torch.zeros(2, dtype=torch.long),
        mask,
        {DELTA: delta, ACTION: action, LAMBDA: torch.tensor([0.5])},
    )
    adv = ADVANTAGES.get("serl")(inp, CFG, SerlParams(weight_clip=0.2))
    # success: w = clip(e^{+1}) = 1.2, clip(e^{-1}) = 0.8; failure (sign -1): clip(e^{-1}) = 0.8, clip(e^{+1}) = 1.2
    want = [[a, a * (0.5 + 0.5 * 1.2), a * (0.5 + 0.5 * 0.8)], [-a, -a * (0.5 + 0.5 * 0.8), -a * (0.5 + 0.5 * 1.2)]]
    assert adv.tolist() == [pytest.approx(r, rel=1e-6) for r in want]
    # no gap, or a faded weight, is GRPO
    grpo = ADVANTAGES.get("grpo")(inp, CFG)
    faded = AdvantageInput(inp.rewards, inp.valid, inp.group_index, mask, {**inp.extras, LAMBDA: torch.tensor([0.0])})
    assert torch.allclose(ADVANTAGES.get("serl")(faded, CFG), grpo)


def test_faded_strength_is_linear_to_zero():
    p = SerlParams(strength=0.5, decay_steps=4)
    assert [faded_strength(p, k) for k in range(6)] == [0.5, 0.375, 0.25, 0.125, 0.0, 0.0]
    assert faded_strength(SerlParams(decay_steps=0), 100) == 0.5


class Harness:
    def __init__(self, model, tokenizer) -> None:
        self.policy_model, self.micro_batch_size, self.tokenizer = model, 2, tokenizer

    def token_logprobs(self, model, ids, mask):
        return token_logprobs(model, ids, mask)


def enc(tokenizer, text: str) -> list[int]:
    return list(tokenizer(text, add_special_tokens=False)["input_ids"])


def test_teacher_gap_on_action_tokens_and_fading(tiny_policy, tokenizer):
    # row: prompt "12", turn 0 "3=45" (action after the marker "="), observation "67", turn 1 "89"
    prompt, t0, obs, t1 = enc(tokenizer, "12"), enc(tokenizer, "3=45"), enc(tokenizer, "67"), enc(tokenizer, "89")
    row = prompt + t0 + obs + t1
    n = len(row)
    turn_index = torch.full((1, n + 1), -1, dtype=torch.long)  # one padding position
    turn_index[0, 2:6], turn_index[0, 8:10] = 0, 1
    ids = torch.tensor([row + [tokenizer.pad_token_id]])
    att = torch.tensor([[1] * n + [0]])
    fields = [{"agent_observation_texts": ["67", None], "agent_reward": 1.0}]
    batch = types.SimpleNamespace(input_ids=ids, attention_mask=att, extras={"turn_index": turn_index}, fields=fields)
    params = SerlParams(template="{feedback}+", final="{reward:g}0", action_marker="=", decay_steps=2)
    state = SerlState(params, Harness(tiny_policy.model, tokenizer))
    out = state.advantage_extras(batch)
    assert out[ACTION][0].tolist() == [0, 0, 0, 0, 1, 1, 0, 0, 1, 1, 0]  # "45" and "89"; not "3=" nor padding
    assert float(out[LAMBDA]) == 0.5
    model = tiny_policy.model
    student = token_logprobs(model, torch.tensor([row]), torch.ones(1, n, dtype=torch.long))[0]
    note0 = enc(tokenizer, "67+")  # turn 0's feedback: the observation that followed it
    s0 = prompt + note0 + t0
    lp0 = token_logprobs(model, torch.tensor([s0]), torch.ones(1, len(s0), dtype=torch.long))[0]
    note1 = enc(tokenizer, "10+")  # the last turn's feedback: the outcome, reward 1 -> "1" + "0"
    s1 = prompt + t0 + obs + note1 + t1
    lp1 = token_logprobs(model, torch.tensor([s1]), torch.ones(1, len(s1), dtype=torch.long))[0]
    want = torch.zeros(n + 1)
    want[4:6] = lp0[2 + len(note0) + 2 : 2 + len(note0) + 4] - student[4:6]
    want[8:10] = lp1[8 + len(note1) : 10 + len(note1)] - student[8:10]
    assert torch.allclose(out[DELTA][0], want, atol=1e-5)
    assert float(out[DELTA].abs().sum()) > 0
    state.advantage_extras(batch)  # step 1: lambda 0.25
    faded = state.advantage_extras(batch)  # step 2: faded out, no teacher run
    assert float(faded[LAMBDA]) == 0.0 and float(faded[DELTA].abs().sum()) == 0.0
    again = SerlState(params, Harness(model, tokenizer))
    again.load_state_dict(state.state_dict())
    assert again.steps == 3


def test_action_start_after_the_last_marker(tokenizer):
    dec = lambda ids: tokenizer.decode(ids, skip_special_tokens=True)  # noqa: E731
    assert action_start(enc(tokenizer, "1=2=34"), "=", dec) == 4
    assert action_start(enc(tokenizer, "1234"), "=", dec) == 0


def test_serl_needs_agent_rows(tiny_policy, tokenizer):
    batch = types.SimpleNamespace(
        input_ids=torch.ones(1, 3, dtype=torch.long), attention_mask=torch.ones(1, 3), extras={}, fields=[{}]
    )
    with pytest.raises(ValueError, match="agent task"):
        SerlState(SerlParams(), Harness(tiny_policy.model, tokenizer)).advantage_extras(batch)
