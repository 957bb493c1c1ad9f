"""RLVMR's GRPO-MR (`grpo_mr`): the episode's mean-centred group advantage plus the turn's meta-reasoning score
centred among the group's turns of the same tag type, against a hand computation."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from ascent.algorithms.advantages import ADVANTAGES
from ascent.algorithms.turn_advantages import GrpoMrParams
from ascent.algorithms.types import AdvantageInput

CFG = SimpleNamespace(std_eps=1e-6)
NAN = float("nan")


def batch():
    """One group of three episodes: turns (tag, score) = A: plan 1, explore 1, answer; B: explore 1, explore -1,
    answer; C: plan 0, answer. Two tokens per turn."""
    tag = torch.tensor([[1, 2, 0], [2, 2, 0], [1, 0, -1]])
    f = torch.tensor([[1.0, 1.0, 0.0], [1.0, -1.0, 0.0], [0.0, 0.0, NAN]])
    idx = torch.tensor([[0, 0, 1, 1, 2, 2], [0, 0, 1, 1, 2, 2], [0, 0, 1, 1, -1, -1]])
    mask = (idx >= 0).float()
    return AdvantageInput(
        rewards=torch.tensor([1.0, 1.0, 0.0]),
        valid=torch.tensor([True, True, True]),
        group_index=torch.tensor([0, 0, 0]),
        mask=mask,
        extras={"turn_index": idx, "turn_rewards": f, "turn_tag": tag},
    )


def test_per_tag_centring_by_hand():
    adv = ADVANTAGES.get("grpo_mr")(batch(), CFG, GrpoMrParams(step_weight=0.5))
    ep = [1 - 2 / 3, 1 - 2 / 3, 0 - 2 / 3]  # episode rewards centred on the group mean 2/3
    plans = [1.0, 0.0]  # A's and C's plans: mean 0.5
    explores = [1.0, 1.0, -1.0]  # A's, B's first and second explorations: mean 1/3
    turns = [
        [ep[0] + 0.5 * (plans[0] - 0.5), ep[0] + 0.5 * (explores[0] - 1 / 3), ep[0]],
        [ep[1] + 0.5 * (explores[1] - 1 / 3), ep[1] + 0.5 * (explores[2] - 1 / 3), ep[1]],
        [ep[2] + 0.5 * (plans[1] - 0.5), ep[2], 0.0],
    ]
    want = torch.tensor([[a for a in row for _ in range(2)] for row in turns], dtype=adv.dtype)
    want[2, 4:] = 0.0  # C has no third turn
    assert torch.allclose(adv, want, atol=1e-6)


def test_zero_weight_is_the_centred_episode_advantage_and_std_divides():
    inp = batch()
    adv = ADVANTAGES.get("grpo_mr")(inp, CFG, GrpoMrParams(step_weight=0.0))
    assert torch.allclose(adv[:, 0], torch.tensor([1 / 3, 1 / 3, -2 / 3], dtype=adv.dtype), atol=1e-6)
    scaled = ADVANTAGES.get("grpo_mr")(inp, CFG, GrpoMrParams(step_weight=0.0, std=True))
    sd = torch.tensor([1.0, 1.0, 0.0]).std()
    assert torch.allclose(scaled[:, 0], adv[:, 0] / (sd + 1e-6), atol=1e-5)
    with pytest.raises(ValueError, match="turn_tag"):
        ADVANTAGES.get("grpo_mr")(AdvantageInput(inp.rewards, inp.valid, inp.group_index, inp.mask, {}), CFG)
    with pytest.raises(ValueError, match="step_weight"):
        GrpoMrParams(step_weight=-1.0)
