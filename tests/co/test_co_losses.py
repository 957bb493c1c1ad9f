"""POMO's shared baseline against hand-computed values."""

from __future__ import annotations

import pytest
import torch

from ascent.co.decoding import Solutions
from ascent.co.losses import CO_LOSSES


def test_pomo_advantage_is_reward_minus_the_instance_mean():
    reward = torch.tensor([[-1.0, -3.0, -2.0], [-4.0, -4.0, -4.0]])
    ll = torch.tensor([[-0.5, -1.0, -2.0], [-1.0, -1.0, -1.0]], requires_grad=True)
    sol = Solutions(torch.zeros(2, 3, 1, dtype=torch.long), ll, reward, torch.zeros(2, 3))
    loss, metrics = CO_LOSSES.resolve("pomo")(sol)
    # instance 0: mean -2, advantages (1, -1, 0); instance 1: all 0
    expected = -(1.0 * -0.5 + -1.0 * -1.0 + 0.0) / 6
    assert float(loss.detach()) == pytest.approx(expected)
    loss.backward()
    assert torch.allclose(ll.grad, -torch.tensor([[1.0, -1.0, 0.0], [0.0, 0.0, 0.0]]) / 6)
    assert metrics["train/best_reward"] == pytest.approx((-1.0 - 4.0) / 2)
    normalized, _ = CO_LOSSES.resolve("pomo(normalize=true)")(sol)
    assert float(normalized.detach()) == pytest.approx(expected / 1.0)  # std of (-1, -3, -2) is 1
