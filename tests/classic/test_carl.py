"""The `contextual` wrapper (CARL in a run): training contexts from the factor ranges, held-out contexts on the
evaluation environments in turn by seed, the context applied and visible, snapshots and runs resumed exactly."""

from __future__ import annotations

import numpy as np
import pytest
import torch

gym = pytest.importorskip("gymnasium")

from ascent.app.pipeline import train  # noqa: E402
from ascent.classic.contextual import ContextParams, make_contextual  # noqa: E402
from ascent.classic.envs import env_state, make_env, set_env_state  # noqa: E402
from ascent.config import ConfigError, load_config  # noqa: E402
from ascent.trainer.checkpoint import Checkpointer  # noqa: E402

SPEC = "contextual(keys=[length, gravity], low=[0.5, 1.0], high=[2.0, 1.5], held_out=[[0.25, 1.0], [3.0, 2.0]])"


def test_training_contexts_lie_in_the_factor_ranges_and_reach_the_physics():
    env = make_env("CartPole-v1", [SPEC[:-1] + ", visible=true)"])
    obs, info = env.reset(seed=0)
    seen = []
    for _ in range(20):
        ctx = info["context"]
        assert 0.25 <= ctx["length"] <= 1.0 and 9.8 <= ctx["gravity"] <= 14.7  # default 0.5 and 9.8 times factors
        assert env.unwrapped.length == ctx["length"] and env.unwrapped.gravity == ctx["gravity"]
        np.testing.assert_array_equal(obs[4:], np.float32([ctx["gravity"], ctx["length"]]))  # visible, keys sorted
        seen.append(ctx["length"])
        obs, info = env.reset()
    assert len(set(seen)) == 20


def test_evaluation_environments_take_the_held_out_contexts_in_turn_by_seed():
    spec, contexts = SPEC, []
    for seed in range(10000, 10004):  # how `evaluate` builds them: a fresh environment per episode, seeds s, s+1, ...
        env = make_env("CartPole-v1", [spec], training=False)
        contexts.append(env.reset(seed=seed)[1]["context"])
    held = [{"length": 0.125, "gravity": 9.8}, {"length": 1.5, "gravity": 19.6}]
    assert contexts == [held[0], held[1], held[0], held[1]]  # 10000 is even
    assert make_env("CartPole-v1", [spec], training=False).observation_space.shape == (4,)  # hidden by default


def test_a_single_training_context_is_the_plain_environment():
    env = make_env("CartPole-v1", ["contextual(low=[1.0], high=[1.0])"])
    plain = make_env("CartPole-v1")
    a, b = env.reset(seed=3)[0], plain.reset(seed=3)[0]
    for action in [1, 0, 0, 1, 1, 1, 0]:
        np.testing.assert_array_equal(a, b)
        a, b = env.step(action)[0], plain.step(action)[0]


def test_by_seed_selection_and_bad_parameters():
    params = ContextParams(contexts=({"gravity": 1.0}, {"gravity": 2.0}, {"gravity": 3.0}), selection="by_seed")
    env = make_contextual("CartPole-v1", params)
    assert [env.reset(seed=s)[1]["context"]["gravity"] for s in (4, 5)] == [2.0, 3.0]
    assert env.reset()[1]["context"]["gravity"] == 1.0  # then in turn
    with pytest.raises(ConfigError, match="one factor per key"):
        load_config("cartpole-ppo", ["classic.wrappers=[{contextual: {keys: [length, gravity], low: [0.5]}}]"])
    with pytest.raises(ConfigError, match="0 < low <= high"):
        load_config("cartpole-ppo", ["classic.wrappers=[{contextual: {low: [2.0], high: [1.0]}}]"])
    with pytest.raises(ConfigError, match="held_out context needs 1 factors > 0"):
        load_config("cartpole-ppo", ["classic.wrappers=[{contextual: {held_out: [[0.0]]}}]"])
    with pytest.raises(ValueError, match="unknown key.*valid keys: gravity, masscart"):
        make_env("CartPole-v1", ["contextual(keys=[lenght])"])


def test_mujoco_snapshot_rebuilds_the_episode_physics():
    pytest.importorskip("mujoco")
    spec = "contextual(keys=[gravity, mass_scale], low=[0.3, 2.0], high=[0.5, 3.0])"
    env = make_env("InvertedPendulum-v5", [spec])
    env.reset(seed=1)
    actions = [np.full(1, 0.2 * (-1) ** t, np.float32) for t in range(10)]
    for a in actions[:5]:
        env.step(a)
    snap = env_state(env)
    fresh = make_env("InvertedPendulum-v5", [spec])  # default physics until the snapshot is loaded
    fresh = set_env_state(fresh, snap)
    assert fresh.context == env.context
    np.testing.assert_array_equal(fresh.unwrapped.model.body_mass, env.unwrapped.model.body_mass)
    for a in actions[5:]:
        np.testing.assert_array_equal(env.step(a)[0], fresh.step(a)[0])
    assert fresh.reset()[1]["context"] == env.reset()[1]["context"]  # the context stream continues alike


def _weights(run_dir) -> dict[str, torch.Tensor]:
    from safetensors.torch import load_file

    return load_file(str(Checkpointer(run_dir / "checkpoints").latest() / "model.safetensors"))


def test_resume_with_contexts_is_exact(tmp_path):
    common = [
        "classic.wrappers=[{contextual: {keys: [length], low: [0.5], high: [2.0], visible: true}}]",
        "classic.total_steps=512",
        "classic.num_envs=4",
        "classic.algorithm.ppo.batch_size=64",
        "classic.algorithm.ppo.n_epochs=2",
        "classic.eval_episodes=3",
        "logging.progress=false",
        f"output_dir={tmp_path}",
    ]
    whole = train(load_config("cartpole-ppo", [*common, "name=whole"]))
    assert train(load_config("cartpole-ppo", [*common, "name=split"]), stop_at=256) is None
    split = train(run_dir=tmp_path / "split", resume=True)
    assert split["final_returns"] == whole["final_returns"]
    a, b = _weights(tmp_path / "whole"), _weights(tmp_path / "split")
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
