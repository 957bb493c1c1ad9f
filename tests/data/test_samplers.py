"""The sampler registry's contract: Draw checks, the uniform sampler, variable group sizes in the collector."""

from __future__ import annotations

import pytest
import torch

from ascent.data.prompts import PromptEncoder
from ascent.data.sampler import RowSampler
from ascent.data.samplers import SAMPLERS, Draw, SamplerContext, group_rewards
from ascent.rollout.backends import make_engine
from ascent.rollout.collector import SingleTurnCollector
from ascent.rollout.types import SamplingSettings


def test_draw_rejects_mismatched_or_empty_sample_counts():
    with pytest.raises(ValueError, match="2 sample counts for 3 prompts"):
        Draw([1, 2, 3], [4, 4])
    with pytest.raises(ValueError, match=">= 1 sample"):
        Draw([1, 2], [4, 0])


def test_uniform_sampler_is_the_row_sampler_and_resumes():
    rows = [{"prompt": str(i)} for i in range(10)]
    s = SAMPLERS.resolve("uniform")(SamplerContext(rows, seed=3, samples_per_prompt=4))
    ref = RowSampler(10, 3)
    draws = [s.next(4).indices for _ in range(3)]
    assert draws == [ref.next(4) for _ in range(3)]
    state = s.state_dict()
    again = SAMPLERS.resolve("uniform")(SamplerContext(rows, seed=3, samples_per_prompt=4))
    again.load_state_dict(state)
    assert again.next(7).indices == s.next(7).indices


def test_group_rewards_skips_invalid_samples():
    out = group_rewards(torch.tensor([0, 0, 1]), torch.tensor([1.0, 0.0, 2.0]), torch.tensor([True, False, True]))
    assert out == {0: [1.0], 1: [2.0]}


def test_collector_samples_groups_of_different_sizes(tiny_policy, tokenizer):
    rows = [{"prompt": f"{i}+{i}=", "answer": str(2 * i)} for i in range(5)]
    settings = SamplingSettings(max_new_tokens=3, eos_id=tokenizer.eos_token_id, pad_id=tokenizer.pad_token_id)
    enc = PromptEncoder(tokenizer)
    collector = SingleTurnCollector(tiny_policy, rows, enc, make_engine("hf"), settings, n=4)
    batch = collector.collect([0, 3, 4], torch.Generator().manual_seed(0), samples=[2, 5, 2])
    assert len(batch) == 9
    sizes = torch.bincount(batch.group_index).tolist()
    rows_of_groups = [int(batch.row_index[batch.group_index == g][0]) for g in range(3)]
    assert dict(zip(rows_of_groups, sizes)) == {0: 2, 4: 2, 3: 5}
    for g in range(3):  # every sequence of a group answers the same prompt
        assert len({p for p, gi in zip(batch.prompts, batch.group_index.tolist()) if gi == g}) == 1
    same = collector.collect([0, 3], torch.Generator().manual_seed(0), samples=[4, 4])
    plain = collector.collect([0, 3], torch.Generator().manual_seed(0))
    assert torch.equal(same.input_ids, plain.input_ids)
