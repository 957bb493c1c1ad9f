"""CARL-style contextual environments: the physics constants really change, the dynamics follow them, the context
stream is seeded, the visible context is appended, and bad keys or values fail with the valid choices."""

from __future__ import annotations

import dataclasses
import math

import gymnasium as gym
import numpy as np
import pytest

from ascent.classic.contextual import (
    ContextParams,
    ContextualEnv,
    context_features,
    default_context,
    make_contextual,
    scaled_contexts,
)


def rollout(env: gym.Env, actions: list, seed: int = 0) -> np.ndarray:
    """(T+1, obs_dim) observations from reset(seed) through the given actions (stops at the episode's end)."""
    obs, _ = env.reset(seed=seed)
    out = [obs]
    for a in actions:
        obs, _, terminated, truncated, _ = env.step(a)
        out.append(obs)
        if terminated or truncated:
            break
    return np.array(out)


def cartpole_step(state: np.ndarray, action: int, c: dict) -> np.ndarray:
    """CartPole's Euler step written out by hand (Florian 2007's equations, as gymnasium codes them)."""
    x, x_dot, th, th_dot = (float(v) for v in state)
    total = c["masspole"] + c["masscart"]
    pml = c["masspole"] * c["length"]
    force = c["force_mag"] if action == 1 else -c["force_mag"]
    temp = (force + pml * th_dot**2 * math.sin(th)) / total
    th_acc = (c["gravity"] * math.sin(th) - math.cos(th) * temp) / (
        c["length"] * (4.0 / 3.0 - c["masspole"] * math.cos(th) ** 2 / total)
    )
    x_acc = temp - pml * th_acc * math.cos(th) / total
    t = c["tau"]
    return np.array([x + t * x_dot, x_dot + t * x_acc, th + t * th_dot, th_dot + t * th_acc])


def test_cartpole_constants_and_one_step_match_the_equations_by_hand():
    ctx = {"gravity": 3.0, "masscart": 2.0, "masspole": 0.4, "length": 1.1, "force_mag": 7.0, "tau": 0.03}
    env = make_contextual("CartPole-v1", ContextParams(contexts=(ctx,)))
    obs, info = env.reset(seed=3)
    raw = env.unwrapped
    assert info["context"] == ctx and env.context == ctx
    assert (raw.gravity, raw.masscart, raw.masspole, raw.length, raw.force_mag, raw.tau) == tuple(ctx.values())
    assert raw.total_mass == pytest.approx(2.4) and raw.polemass_length == pytest.approx(0.44)  # derived too
    for action in (1, 0, 1):
        expected = cartpole_step(obs, action, ctx)
        obs, *_ = env.step(action)
        np.testing.assert_allclose(obs, expected, rtol=1e-5, atol=1e-6)


def test_changed_context_changes_the_trajectory_and_the_default_one_does_not():
    actions = [1, 1, 0, 1, 0, 0, 1, 1, 0, 1]
    plain = rollout(gym.make("CartPole-v1"), actions)
    same = rollout(make_contextual("CartPole-v1", ContextParams(contexts=({"gravity": 9.8},))), actions)
    heavy = rollout(
        make_contextual("CartPole-v1", ContextParams(contexts=({"gravity": 20.0, "length": 2.0},))), actions
    )
    np.testing.assert_array_equal(same, plain)  # the default context reproduces the plain env exactly
    np.testing.assert_array_equal(heavy[0], plain[0])  # same start state: reset's randomness is the env's own
    assert np.abs(heavy[1:] - plain[1:]).max() > 1e-3


def test_acrobot_link_constants_change_and_drive_the_dynamics():
    actions = [2, 2, 0, 2, 1, 0, 0, 2, 2, 2, 0, 1] * 3
    plain = rollout(gym.make("Acrobot-v1"), actions)
    for key, value in (("link_mass_1", 3.0), ("link_length_1", 2.0), ("link_moi", 0.3)):
        env = make_contextual("Acrobot-v1", ContextParams(contexts=({key: value},)))
        moved = rollout(env, actions)
        attr = {"link_mass_1": "LINK_MASS_1", "link_length_1": "LINK_LENGTH_1", "link_moi": "LINK_MOI"}[key]
        assert getattr(env.unwrapped, attr) == value
        assert getattr(type(env.unwrapped), attr) == 1.0  # the class default is untouched (other envs unaffected)
        assert np.abs(moved[1:] - plain[1:]).max() > 1e-3, key


def test_mujoco_gravity_and_masses_change_model_fields_and_dynamics():
    env = make_contextual("HalfCheetah-v5", ContextParams(contexts=({"gravity": 4.0, "mass:torso": 12.5},)))
    m = env.unwrapped.model
    base_mass, base_inertia = m.body_mass.copy(), m.body_inertia.copy()
    env.reset(seed=0)
    torso = 1  # body 0 is the world
    assert m.opt.gravity.tolist() == [0.0, 0.0, -4.0]
    assert m.body_mass[torso] == 12.5 and base_mass[torso] == pytest.approx(6.2502, abs=1e-3)
    np.testing.assert_allclose(m.body_inertia[torso], base_inertia[torso] * 12.5 / base_mass[torso])
    np.testing.assert_array_equal(m.body_mass[2:], base_mass[2:])
    actions = [np.full(6, 0.5 * (-1) ** t, dtype=np.float32) for t in range(30)]
    plain = rollout(gym.make("HalfCheetah-v5"), actions)
    moved = rollout(env, actions)
    np.testing.assert_array_equal(moved[0], plain[0])
    assert np.abs(moved[1:] - plain[1:]).max() > 1e-2


def test_mujoco_scales_compose_and_every_episode_rebuilds_from_the_originals():
    params = ContextParams(contexts=({"mass_scale": 2.0}, {"mass_scale": 1.0}), selection="cycle")
    env = make_contextual("Hopper-v5", params)
    m = env.unwrapped.model
    base = m.body_mass.copy()
    env.reset(seed=0)
    np.testing.assert_allclose(m.body_mass, 2.0 * base)
    env.reset()
    np.testing.assert_array_equal(m.body_mass, base)  # not 2 x 2: no drift across episodes
    env.reset()
    np.testing.assert_allclose(m.body_mass, 2.0 * base)


def test_same_seed_same_contexts_other_seed_other_contexts():
    params = ContextParams(ranges={"gravity": (5.0, 15.0), "masspole": (0.05, 0.5)}, seed=7)

    def contexts(seed: int) -> list[dict]:
        env = make_contextual("CartPole-v1", params)
        out = [env.reset(seed=seed)[1]["context"]]
        out += [env.reset()[1]["context"] for _ in range(4)]
        return out

    a, b, c = contexts(0), contexts(0), contexts(1)
    assert a == b and a != c
    assert len({round(x["gravity"], 9) for x in a}) == 5  # a new draw every episode
    assert all(5.0 <= x["gravity"] <= 15.0 and 0.05 <= x["masspole"] <= 0.5 for x in a + c)


def test_vector_envs_draw_their_own_contexts():
    params = ContextParams(ranges={"gravity": (5.0, 15.0)})
    venv = gym.vector.SyncVectorEnv([lambda: ContextualEnv(gym.make("CartPole-v1"), params) for _ in range(3)])
    venv.reset(seed=0)
    gravities = [e.unwrapped.gravity for e in venv.envs]
    assert len(set(gravities)) == 3


def test_visible_context_is_appended_and_inside_the_observation_space():
    params = ContextParams(contexts=({"length": 0.25, "gravity": 12.0}, {"length": 1.0, "gravity": 6.0}), visible=True)
    env = make_contextual("CartPole-v1", params)
    assert env.observation_space.shape == (6,)
    np.testing.assert_array_equal(env.observation_space.low[4:], [6.0, 0.25])  # keys sorted: gravity, length
    np.testing.assert_array_equal(env.observation_space.high[4:], [12.0, 1.0])
    obs, info = env.reset(seed=1)
    for _ in range(5):
        np.testing.assert_array_equal(obs[4:], np.float32([info["context"]["gravity"], info["context"]["length"]]))
        assert obs.dtype == np.float32 and env.observation_space.contains(obs)
        obs, _, _, _, info = env.step(0)
    hidden = make_contextual("CartPole-v1", dataclasses.replace(params, visible=False))
    assert hidden.observation_space.shape == (4,) and hidden.reset(seed=1)[0].shape == (4,)


def test_bad_keys_values_and_distributions_fail_clearly():
    with pytest.raises(ValueError, match=r"unknown context key\(s\) \['gravty'\].*valid keys: gravity, masscart"):
        make_contextual("CartPole-v1", ContextParams(contexts=({"gravty": 5.0},)))
    with pytest.raises(ValueError, match=r"unknown context key.*'mass:head'.*mass:torso"):
        make_contextual("HalfCheetah-v5", ContextParams(contexts=({"mass:head": 5.0},)))
    with pytest.raises(ValueError, match="masspole=-0.1: must be > 0"):
        make_contextual("CartPole-v1", ContextParams(ranges={"masspole": (-0.1, 0.5)}))
    with pytest.raises(ValueError, match="exactly one of"):
        ContextParams()
    with pytest.raises(ValueError, match=r"contexts\[1\] has keys"):
        ContextParams(contexts=({"gravity": 1.0}, {"length": 1.0}))
    with pytest.raises(ValueError, match="low must be <= high"):
        ContextParams(ranges={"gravity": (10.0, 5.0)})
    with pytest.raises(ValueError, match="no context family for PendulumEnv"):
        make_contextual("Pendulum-v1", ContextParams(contexts=({"gravity": 5.0},)))
    with pytest.raises(ValueError, match="selection"):
        ContextParams(ranges={"gravity": (1.0, 2.0)}, selection="cycle")


def test_features_defaults_and_scaled_sweep():
    env = gym.make("Acrobot-v1")
    assert set(context_features(env)) >= {"link_length_1", "link_length_2", "link_mass_1", "link_mass_2"}
    assert default_context(env)["link_mass_2"] == 1.0
    sweep = scaled_contexts(gym.make("CartPole-v1"), "gravity", (0.5, 1.0, 2.0))
    assert sweep == ({"gravity": 4.9}, {"gravity": 9.8}, {"gravity": 19.6})
