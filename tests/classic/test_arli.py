"""Inference latency and ARLI's augmented observation: the queue holds exactly `delay` committed actions, the
augmentation shows the right ones and the right observations, snapshots and runs resume exactly."""

from __future__ import annotations

import numpy as np
import pytest
import torch

gym = pytest.importorskip("gymnasium")

from ascent.app.pipeline import train  # noqa: E402
from ascent.classic.envs import env_state, make_env, set_env_state  # noqa: E402
from ascent.config import ConfigError, load_config  # noqa: E402
from ascent.trainer.checkpoint import Checkpointer  # noqa: E402


def reference(env_id: str, actions: list, seed: int) -> list:
    """Observations of the plain environment from reset(seed) through `actions` (reset included)."""
    env = make_env(env_id)
    out = [env.reset(seed=seed)[0]]
    out += [env.step(a)[0] for a in actions]
    return out


def test_latency_executes_each_action_exactly_delay_steps_later():
    d, chosen = 3, [1, 1, 0, 1, 0, 0, 1, 0]
    env = make_env("CartPole-v1", [f"latency(delay={d}, default=0)"])
    obs, _ = env.reset(seed=4)
    assert len(env.queue) == d and list(env.queue) == [0] * d
    executed, seen = [], [obs]
    for a in chosen:
        obs, _, _, _, info = env.step(a)
        executed.append(info["executed_action"])
        seen.append(obs)
        assert len(env.queue) == d  # exactly d committed, unexecuted actions at every step
    assert executed == [0] * d + chosen[: len(chosen) - d]
    assert list(env.queue) == chosen[-d:]
    np.testing.assert_array_equal(np.array(seen), np.array(reference("CartPole-v1", executed, 4)))
    assert env.observation_space.shape == (4,)  # the plain observation: the queue is hidden


def test_arli_shows_committed_actions_stale_and_intermediate_observations():
    d, k, chosen = 2, 1, [1, 0, 0, 1, 1, 0]
    env = make_env("CartPole-v1", [f"arli(delay={d}, obs_delay={k})"])
    assert env.observation_space.shape == (4 + d * 2 + 4,)
    obs, _ = env.reset(seed=1)
    executed = [0] * d + chosen[: len(chosen) - d]
    states = reference("CartPole-v1", executed, 1)
    committed = [0] * d
    for t, a in enumerate(chosen):
        np.testing.assert_array_equal(obs[:4], states[max(t - k, 0)])  # s_{t-k}, the stale frame
        np.testing.assert_array_equal(obs[4:8], np.eye(2)[committed].ravel())  # one-hot, oldest first
        np.testing.assert_array_equal(obs[8:], states[t])  # s_t, the intermediate observation
        obs, *_ = env.step(a)
        committed = committed[1:] + [a]


def test_arli_continuous_actions_are_shown_as_values_and_default_fills_the_queue():
    pytest.importorskip("mujoco")
    env = make_env("InvertedPendulum-v5", ["arli(delay=2, default=0.5)"])
    assert env.observation_space.shape == (4 + 2,)  # obs_delay 0: no separate intermediate frame
    obs, _ = env.reset(seed=0)
    np.testing.assert_allclose(obs[4:], [0.5, 0.5])
    obs, _, _, _, info = env.step(np.array([-1.0], np.float32))
    np.testing.assert_allclose(obs[4:], [0.5, -1.0])
    np.testing.assert_allclose(info["executed_action"], [0.5])
    np.testing.assert_array_equal(env.observation_space.low[4:], [-3.0, -3.0])


def test_bad_parameters_say_what_to_change():
    with pytest.raises(ConfigError, match="delay must be >= 1"):
        load_config("cartpole-ppo", ["classic.wrappers=[latency(delay=0)]"])
    with pytest.raises(ConfigError, match="obs_delay must be >= 0"):
        load_config("cartpole-ppo", ["classic.wrappers=[arli(obs_delay=-1)]"])


def test_mujoco_snapshot_keeps_the_queue_and_the_frames():
    pytest.importorskip("mujoco")
    env = make_env("InvertedPendulum-v5", ["arli(delay=3, obs_delay=2)"])
    env.reset(seed=2)
    actions = [np.full(1, 0.3 * (-1) ** t, np.float32) for t in range(8)]
    for a in actions[:4]:
        env.step(a)
    snap = env_state(env)
    fresh = make_env("InvertedPendulum-v5", ["arli(delay=3, obs_delay=2)"])
    fresh.reset(seed=7)
    fresh = set_env_state(fresh, snap)
    for a in actions[4:]:
        np.testing.assert_array_equal(env.step(a)[0], fresh.step(a)[0])


def _weights(run_dir) -> dict[str, torch.Tensor]:
    from safetensors.torch import load_file

    return load_file(str(Checkpointer(run_dir / "checkpoints").latest() / "model.safetensors"))


@pytest.mark.parametrize("env_id", ["CartPole-v1", "InvertedPendulum-v5"])
def test_resume_with_arli_is_exact(tmp_path, env_id):
    if env_id != "CartPole-v1":
        pytest.importorskip("mujoco")
    common = [
        f"classic.env={env_id}",
        "classic.wrappers=[{arli: {delay: 2, obs_delay: 1}}]",  # a list of specs with commas: the mapping form
        "classic.total_steps=512",
        "classic.num_envs=4",
        "classic.algorithm.ppo.batch_size=64",
        "classic.algorithm.ppo.n_epochs=2",
        "classic.eval_episodes=2",
        "logging.progress=false",
        f"output_dir={tmp_path}",
    ]
    whole = train(load_config("cartpole-ppo", [*common, "name=whole"]))
    assert train(load_config("cartpole-ppo", [*common, "name=split"]), stop_at=256) is None
    split = train(run_dir=tmp_path / "split", resume=True)
    assert split["final_returns"] == whole["final_returns"]
    a, b = _weights(tmp_path / "whole"), _weights(tmp_path / "split")
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
