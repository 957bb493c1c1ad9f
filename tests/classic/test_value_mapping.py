"""Orchestrated value mapping (Fatemi & Tavakoli 2022) on DQN: the mapped TD target by hand, the combined Q, the
reward channels, learning CartPole and exact resume."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

pytest.importorskip("gymnasium")

from ascent.app.pipeline import train  # noqa: E402
from ascent.classic.value_mapping import (  # noqa: E402
    ValueMappingParams,
    from_mapped,
    mapped_target,
    split_channels,
    to_mapped,
)
from ascent.config import ConfigError, load_config  # noqa: E402
from ascent.trainer.checkpoint import Checkpointer  # noqa: E402

BASE = ["classic.env=CartPole-v1", "logging.progress=false"]
SIGNS = torch.tensor([1.0, -1.0])


def test_log_mapping_round_trips():
    x = torch.tensor([0.0, 0.5, 3.0, 100.0])
    y = to_mapped(x, "log", 0.5, 0.02)
    assert math.isclose(float(y[2]), 0.5 * math.log(3.02), rel_tol=1e-6)
    torch.testing.assert_close(from_mapped(y, "log", 0.5, 0.02), x)
    assert torch.equal(to_mapped(x, "identity", 0.5, 0.02), x)


def test_mapped_target_by_hand():
    p = ValueMappingParams(gamma=0.5, c=0.5, d=0.02)
    regular = torch.tensor([[[3.0, 1.0], [0.0, 0.5]]])  # (B=1, J=2, A=2): combined Q(s', .) = [3 - 0, 1 - 0.5]
    nxt = to_mapped(regular, "log", 0.5, 0.02)
    y = mapped_target(torch.tensor([[1.0, 0.0]]), torch.tensor([0.0]), nxt, SIGNS, p)
    # a* = 0; U+ = 1 + 0.5 * 3 = 2.5, U- = 0 + 0.5 * 0 = 0; mapped: 0.5 ln(2.52), 0.5 ln(0.02)
    torch.testing.assert_close(y, torch.tensor([[0.5 * math.log(2.52), 0.5 * math.log(0.02)]]))
    regular = torch.tensor([[[1.0, 3.0], [0.0, 2.5]]])  # combined [1, 0.5]: a* = 0 although channel + prefers 1
    y = mapped_target(torch.tensor([[0.0, 2.0]]), torch.tensor([0.0]), to_mapped(regular, "log", 0.5, 0.02), SIGNS, p)
    torch.testing.assert_close(from_mapped(y, "log", 0.5, 0.02), torch.tensor([[0.5, 2.0]]))
    y = mapped_target(torch.tensor([[1.0, 0.0]]), torch.tensor([1.0]), nxt, SIGNS, p)  # terminal: U = r
    torch.testing.assert_close(from_mapped(y, "log", 0.5, 0.02), torch.tensor([[1.0, 0.0]]))


def test_reward_channels_split_by_sign():
    np.testing.assert_array_equal(split_channels(np.array([[1.0], [-2.0]])), [[1.0, 0.0], [0.0, 2.0]])


def test_bad_parameters_say_what_to_change(tmp_path):
    with pytest.raises(ConfigError, match="mapping must be"):
        ValueMappingParams(mapping="sqrt")
    with pytest.raises(ConfigError, match="c and d must be > 0"):
        load_config("acrobot-dqn", [*BASE, "classic.algorithm=ovm_dqn(d=0.0)"])
    over = [*BASE, f"output_dir={tmp_path}", "classic.total_steps=8", "classic.algorithm=ovm_dqn(reward_channels=2)"]
    with pytest.raises(ConfigError, match=r"reward_channels=2 needs info\['reward_vector'\]"):
        train(load_config("acrobot-dqn", over))


def test_ovm_dqn_learns_cartpole(tmp_path):
    """The acrobot-dqn recipe's settings on CartPole, 10k steps (206.6 on seed 0): well above a random policy's ~22."""
    algo = "classic.algorithm=ovm_dqn(lr=0.00063, batch_size=128, buffer_size=50000, learning_starts=0, "
    algo += "target_update_interval=250, exploration_fraction=0.12, eps_end=0.1, hidden=[64, 64])"
    over = [*BASE, f"output_dir={tmp_path}", "classic.total_steps=10000", algo]
    assert train(load_config("acrobot-dqn", over))["final_return"] > 60


def _weights(run):
    from safetensors.torch import load_file

    return load_file(str(Checkpointer(run / "checkpoints").latest() / "model.safetensors"))


def test_resume_is_exact(tmp_path):
    """400 steps in one go == 200, stop, resume for the rest: same weights, same evaluation returns."""
    common = [*BASE, "classic.total_steps=400", "classic.eval_episodes=2", f"output_dir={tmp_path}"]
    common.append("classic.algorithm=ovm_dqn(hidden=[32, 32], learning_starts=50, target_update_interval=100)")
    whole = train(load_config("acrobot-dqn", [*common, "name=whole"]))
    assert train(load_config("acrobot-dqn", [*common, "name=split"]), stop_at=200) is None
    split = train(run_dir=tmp_path / "split", resume=True)
    assert split["final_returns"] == whole["final_returns"] and split["env_steps"] == whole["env_steps"]
    a, b = _weights(tmp_path / "whole"), _weights(tmp_path / "split")
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
