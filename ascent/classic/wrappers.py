"""The `classic_wrappers` registry: environment transformations a classic run applies, in order, to every environment
it builds (`classic.wrappers=[...]`): contextual physics, observation latency, distractor features, reward channels.

A wrapper is registered as a factory `fn(env, training, params=...) -> env` (`@CLASSIC_WRAPPERS.register("name",
params=NameParams)`); `training` is False for the environments of the final and periodic evaluations, so a wrapper
can hold out part of its family (CARL's held-out contexts) for them. `ascent list classic_wrappers --params` prints
them. A wrapper that keeps state across steps (a queue of committed actions, a drawn context) and wraps a MuJoCo
environment (which checkpoints by its integration state, not by pickling) saves it through two methods, which
`ascent.classic.envs.env_state` calls on every wrapper in the chain that has them:

    wrapper_state() -> dict          what the wrapper needs to continue exactly (numpy arrays, numbers, rng states)
    load_wrapper_state(state) -> None

Other environments are pickled whole, wrappers included. A wrapper may report a vector of reward components per step
as `info["reward_vector"]` (a 1-D float array whose sum is the scalar reward); `VecEnv.step` then returns them as
`Step.reward_vector` (E, C) for algorithms that learn from channels (distributional multi-reward, value
decomposition).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

from ascent import papers
from ascent.registry import Registry
from ascent.typed import ConfigError

CLASSIC_WRAPPERS: Registry = Registry("classic environment wrapper")
"""Environment wrappers of classic runs: name -> factory(env, training, params=...) -> wrapped env."""


def apply_wrappers(env: Any, specs: Sequence[str], training: bool) -> Any:
    """`env` wrapped by every spec of `specs`, the first innermost."""
    for i, spec in enumerate(specs):
        piece = CLASSIC_WRAPPERS.resolve(spec, key=f"classic.wrappers[{i}]")
        env = piece(env, training)
    return env


def canonical_wrappers(specs: Sequence[str]) -> list[str]:
    """Each spec checked (name, parameters, ranges) and in its canonical form."""
    return [CLASSIC_WRAPPERS.resolve(s, key=f"classic.wrappers[{i}]").spec for i, s in enumerate(specs)]


@dataclass(frozen=True)
class ActionRepeatParams:
    k: int = 2
    """Each chosen action is applied this many times (the rewards summed); the episode ends at the first end."""

    def __post_init__(self) -> None:
        if self.k < 1:
            raise ConfigError(f"action_repeat: k must be >= 1, got {self.k}")


def _action_repeat_class():
    if "ActionRepeat" in globals():
        return globals()["ActionRepeat"]
    import gymnasium

    class ActionRepeat(gymnasium.Wrapper):
        """Apply each action `k` times, summing the rewards (and reward vectors); stop at the first end."""

        def __init__(self, env: Any, k: int) -> None:
            super().__init__(env)
            self.k = k

        def step(self, action: Any):
            total, vector = 0.0, None
            for _ in range(self.k):
                obs, reward, terminated, truncated, info = self.env.step(action)
                total += float(reward)
                if "reward_vector" in info:
                    vector = info["reward_vector"] if vector is None else vector + info["reward_vector"]
                if terminated or truncated:
                    break
            if vector is not None:
                info = {**info, "reward_vector": vector}
            return obs, total, terminated, truncated, info

    ActionRepeat.__qualname__ = "ActionRepeat"  # a module-level name: checkpoints pickle the environment
    globals()["ActionRepeat"] = ActionRepeat
    return ActionRepeat


def __getattr__(name: str) -> Any:
    """The wrapper classes, built on first use (gymnasium stays an optional import), e.g. when unpickling."""
    if name == "ActionRepeat":
        return _action_repeat_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


@CLASSIC_WRAPPERS.register("action_repeat", params=ActionRepeatParams, paper=papers.DQN, fidelity="faithful")
def action_repeat(env: Any, training: bool, params: ActionRepeatParams) -> Any:
    """Action repeat (frame skip; Mnih et al. 2015, Nature 518:529): one agent decision drives `k` environment
    steps, r = Σ_{j<k} r_{t+j}; the time limit still counts the environment's own steps."""
    return _action_repeat_class()(env, params.k)
