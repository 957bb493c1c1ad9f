"""The `classic_wrappers` registry: specs in configs, training vs evaluation environments, reward vectors and the
wrapper-state hook of MuJoCo snapshots."""

from __future__ import annotations

import numpy as np
import pytest

gym = pytest.importorskip("gymnasium")

from ascent.classic.envs import VecEnv, env_state, make_env, set_env_state  # noqa: E402
from ascent.classic.wrappers import CLASSIC_WRAPPERS, apply_wrappers  # noqa: E402
from ascent.config.loader import load_config  # noqa: E402
from ascent.typed import ConfigError  # noqa: E402


class Channels(gym.Wrapper):
    """Test wrapper: the reward split into two channels (r - 1, 1) that sum to r."""

    def step(self, action):
        obs, reward, term, trunc, info = self.env.step(action)
        return obs, reward, term, trunc, {**info, "reward_vector": np.array([reward - 1.0, 1.0], np.float32)}


class Counter(gym.Wrapper):
    """Test wrapper with state that a MuJoCo snapshot cannot see without the hook."""

    def __init__(self, env):
        super().__init__(env)
        self.count = 0

    def step(self, action):
        self.count += 1
        return self.env.step(action)

    def wrapper_state(self):
        return {"count": self.count}

    def load_wrapper_state(self, state):
        self.count = state["count"]


def test_action_repeat_sums_rewards_and_stops_at_the_end():
    ref, env = make_env("CartPole-v1"), make_env("CartPole-v1", ["action_repeat(k=3)"])
    ref.reset(seed=1), env.reset(seed=1)
    total = sum(ref.step(1)[1] for _ in range(3))
    obs, reward, *_ = env.step(1)
    assert reward == total == 3.0
    np.testing.assert_array_equal(obs, ref.unwrapped.state.astype(np.float32))
    steps = 0
    while True:  # pushing right ends the episode within a few decisions; the last decision stops at the end
        steps += 1
        _, _, term, trunc, _ = env.step(1)
        if term or trunc:
            break
    assert env.unwrapped.steps_beyond_terminated == 0  # terminated in the last repeat, not stepped past it


def test_action_repeat_pickles_with_its_environment():
    import pickle

    env = make_env("CartPole-v1", ["action_repeat(k=3)"])
    env.reset(seed=2)
    env.step(0)
    copy = pickle.loads(pickle.dumps(env))
    np.testing.assert_array_equal(copy.step(1)[0], env.step(1)[0])


def test_reward_vectors_reach_the_step_and_sum_to_the_reward():
    envs = VecEnv(lambda: Channels(make_env("CartPole-v1")), num_envs=2, seed=0)
    step = envs.step(np.array([0, 1]))
    assert step.reward_vector.shape == (2, 2)
    np.testing.assert_allclose(step.reward_vector.sum(1), step.reward)
    assert VecEnv(lambda: make_env("CartPole-v1"), 1, 0).step(np.array([0])).reward_vector is None


def test_config_specs_are_checked_and_canonical():
    cfg = load_config("cartpole-ppo", ["classic.wrappers=[action_repeat(k=2)]"])
    assert cfg.classic.wrappers == ["action_repeat"]  # k=2 is the default: the canonical spec leaves it out
    cfg = load_config("cartpole-ppo", ["classic.wrappers=[action_repeat(k=4)]"])
    assert cfg.classic.wrappers == ["action_repeat(k=4)"]
    with pytest.raises(ConfigError, match="action_repeat"):
        load_config("cartpole-ppo", ["classic.wrappers=[action_repeat(k=0)]"])
    with pytest.raises(ConfigError, match="classic.wrappers"):
        load_config("cartpole-ppo", ["classic.wrappers=[no_such_wrapper]"])
    assert "action_repeat" in CLASSIC_WRAPPERS


def test_evaluation_environments_are_built_with_training_false():
    seen = []

    @CLASSIC_WRAPPERS.register("_probe_for_test")
    def probe(env, training):
        seen.append(training)
        return env

    try:
        apply_wrappers(make_env("CartPole-v1"), ["_probe_for_test"], training=False)
        make_env("CartPole-v1", ["_probe_for_test"])
        assert seen == [False, True]
    finally:
        CLASSIC_WRAPPERS._entries.pop("_probe_for_test")


def test_mujoco_snapshot_carries_wrapper_state():
    pytest.importorskip("mujoco")
    env = Counter(make_env("InvertedPendulum-v5"))
    env.reset(seed=0)
    for _ in range(5):
        env.step(np.zeros(1, np.float32))
    snap = env_state(env)
    fresh = Counter(make_env("InvertedPendulum-v5"))
    fresh.reset(seed=3)
    fresh = set_env_state(fresh, snap)
    assert fresh.count == 5
    a, b = env.step(np.full(1, 0.1, np.float32)), fresh.step(np.full(1, 0.1, np.float32))
    np.testing.assert_array_equal(a[0], b[0])
