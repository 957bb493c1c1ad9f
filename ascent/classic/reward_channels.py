"""Reward channels and discretised actions for real environments (`classic_wrappers`), so that multi-reward
algorithms (MD3QN, `ascent.classic.md3qn`) and the DQN family run on Pendulum-v1 and MuJoCo v5 tasks.

- `pendulum_channels`: Pendulum-v1's reward r = -(θ² + 0.1 θ̇² + 0.001 u²) split into its three terms
  (-θ², -0.1 θ̇², -0.001 u²), θ normalised to [-π, π), (θ, θ̇) before the step, u the clipped torque.
- `mujoco_channels`: a MuJoCo v5 environment's reward terms from its step `info` (by default every key that starts
  with `reward_` or ends with `_penalty`: InvertedDoublePendulum-v5 gives reward_survive, distance_penalty,
  velocity_penalty; Hopper-v5 reward_forward, reward_ctrl, reward_survive); checked to sum to the reward.
- `discrete_actions(n)`: n evenly spaced actions low + i (high - low) / (n - 1) of a 1-D continuous box.

Every channel wrapper takes `scale`: reward and channels are both multiplied by it (so the two arms of a comparison,
a scalar learner and a channel learner, see the same rewards; returns are reported scaled). The wrappers keep no
state across steps, so MuJoCo snapshots need no `wrapper_state`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ascent import papers
from ascent.classic.wrappers import CLASSIC_WRAPPERS
from ascent.typed import ConfigError


@dataclass(frozen=True)
class ChannelParams:
    """Reward channels of Pendulum-v1."""

    scale: float = 1.0
    """Multiply the reward and every channel by this, > 0 (e.g. 0.1 keeps Pendulum's returns near the unit scale)."""

    def __post_init__(self) -> None:
        if not self.scale > 0:
            raise ConfigError(f"reward channels: scale must be > 0, got {self.scale}")


@dataclass(frozen=True)
class MujocoChannelParams:
    """Reward channels from a MuJoCo v5 environment's step info."""

    keys: list[str] = field(default_factory=list)
    """Info keys to use as channels, in this order; empty: every key starting with `reward_` or ending with
    `_penalty`, sorted. Their sum must equal the reward (checked each step)."""
    scale: float = 1.0
    """Multiply the reward and every channel by this, > 0."""

    def __post_init__(self) -> None:
        if not self.scale > 0:
            raise ConfigError(f"mujoco_channels: scale must be > 0, got {self.scale}")


@dataclass(frozen=True)
class DiscreteActionParams:
    """Discretisation of a 1-D continuous action box."""

    n: int = 5
    """Number of evenly spaced actions from low to high (both included), >= 2."""

    def __post_init__(self) -> None:
        if self.n < 2:
            raise ConfigError(f"discrete_actions: n must be >= 2, got {self.n}")


def pendulum_terms(theta: float, theta_dot: float, u: float) -> np.ndarray:
    """(-θ², -0.1 θ̇², -0.001 u²) with θ wrapped to [-π, π); their sum is Pendulum-v1's reward.

    >>> pendulum_terms(0.5, -2.0, 1.0)
    array([-0.25 , -0.4  , -0.001], dtype=float32)
    """
    th = ((theta + np.pi) % (2 * np.pi)) - np.pi
    return np.array([-(th**2), -0.1 * theta_dot**2, -0.001 * u**2], np.float32)


def mujoco_keys(info: dict[str, Any]) -> list[str]:
    """The default channel keys of a MuJoCo v5 info dict: `reward_*` and `*_penalty`, sorted."""
    return sorted(k for k in info if k.startswith("reward_") or k.endswith("_penalty"))


def _classes():
    """The wrapper classes, built on first use and kept as module-level names (checkpoints pickle environments)."""
    if "DiscreteActions" in globals():
        return globals()["PendulumChannels"], globals()["MujocoChannels"], globals()["DiscreteActions"]
    import gymnasium

    class PendulumChannels(gymnasium.Wrapper):
        """Pendulum-v1 with `info["reward_vector"]` = scale * (-θ², -0.1 θ̇², -0.001 u²)."""

        def __init__(self, env: Any, scale: float) -> None:
            super().__init__(env)
            if hasattr(env.action_space, "n"):
                raise ConfigError("pendulum_channels needs the continuous torque: list it before discrete_actions")
            self.scale = scale

        def step(self, action: Any):
            theta, theta_dot = self.env.unwrapped.state  # before the step: the reward is on this state
            max_torque = self.env.unwrapped.max_torque
            u = float(np.clip(np.asarray(action, np.float64).reshape(-1)[0], -max_torque, max_torque))
            obs, reward, terminated, truncated, info = self.env.step(action)
            vector = self.scale * pendulum_terms(float(theta), float(theta_dot), u)
            return obs, self.scale * float(reward), terminated, truncated, {**info, "reward_vector": vector}

    class MujocoChannels(gymnasium.Wrapper):
        """A MuJoCo v5 env with `info["reward_vector"]` = scale * (info[k] for k in keys)."""

        def __init__(self, env: Any, keys: list[str], scale: float) -> None:
            super().__init__(env)
            self.keys, self.scale = list(keys), scale

        def step(self, action: Any):
            obs, reward, terminated, truncated, info = self.env.step(action)
            if not self.keys:
                self.keys = mujoco_keys(info)
            vector = np.array([float(info[k]) for k in self.keys], np.float64)
            if abs(vector.sum() - float(reward)) > 1e-4 * (1.0 + abs(float(reward))):
                raise RuntimeError(
                    f"mujoco_channels: info keys {self.keys} sum to {vector.sum()}, not the reward {reward}"
                )
            vector = (self.scale * vector).astype(np.float32)
            return obs, self.scale * float(reward), terminated, truncated, {**info, "reward_vector": vector}

    class DiscreteActions(gymnasium.ActionWrapper):
        """Discrete(n) over a 1-D box: action i -> low + i (high - low) / (n - 1)."""

        def __init__(self, env: Any, n: int) -> None:
            super().__init__(env)
            box = env.action_space
            if getattr(box, "shape", None) is None or int(np.prod(box.shape)) != 1 or hasattr(box, "n"):
                raise ConfigError(f"discrete_actions needs a 1-D continuous action box; this env has {box}")
            self.values = np.linspace(box.low.reshape(-1)[0], box.high.reshape(-1)[0], n).astype(box.dtype)
            self.shape = box.shape
            self.action_space = gymnasium.spaces.Discrete(n)

        def action(self, action: Any) -> np.ndarray:
            return np.full(self.shape, self.values[int(action)], self.values.dtype)

    for cls in (PendulumChannels, MujocoChannels, DiscreteActions):
        cls.__qualname__ = cls.__name__
        globals()[cls.__name__] = cls
    return PendulumChannels, MujocoChannels, DiscreteActions


def __getattr__(name: str) -> Any:
    """The wrapper classes by name (for unpickling a checkpointed environment)."""
    if name in ("PendulumChannels", "MujocoChannels", "DiscreteActions"):
        return (
            globals()[name]
            if name in globals()
            else dict(zip(("PendulumChannels", "MujocoChannels", "DiscreteActions"), _classes()))[name]
        )
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


@CLASSIC_WRAPPERS.register("pendulum_channels", params=ChannelParams, paper=papers.MD3QN, fidelity="ascent")
def pendulum_channels(env: Any, training: bool, params: ChannelParams) -> Any:
    """Pendulum-v1's reward in three channels: r_vec = scale (-θ², -0.1 θ̇², -0.001 u²), Σ r_vec = scale r
    (the cost of Gymnasium's Pendulum-v1; channels as in the multi-reward setting of Zhang et al. 2021,
    NeurIPS 2021, arXiv:2110.13578)."""
    return _classes()[0](env, params.scale)


@CLASSIC_WRAPPERS.register("mujoco_channels", params=MujocoChannelParams, paper=papers.MD3QN, fidelity="ascent")
def mujoco_channels(env: Any, training: bool, params: MujocoChannelParams) -> Any:
    """A MuJoCo v5 env's reward terms as channels: r_vec = scale (info[k])_k, Σ r_vec = scale r (checked); e.g.
    InvertedDoublePendulum-v5: (distance_penalty, reward_survive, velocity_penalty) (Zhang et al. 2021, NeurIPS
    2021, arXiv:2110.13578: multi-source rewards)."""
    return _classes()[1](env, params.keys, params.scale)


@CLASSIC_WRAPPERS.register("discrete_actions", params=DiscreteActionParams, paper=None, fidelity="ascent")
def discrete_actions(env: Any, training: bool, params: DiscreteActionParams) -> Any:
    """Discrete(n) actions on a 1-D box: a_i = low + i (high - low) / (n - 1), i = 0..n-1 (the usual
    discretisation that lets DQN (Mnih et al. 2015, Nature 518:529) act on Pendulum-v1)."""
    return _classes()[2](env, params.n)
