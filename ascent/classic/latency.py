"""Inference latency as an environment transformation, and ARLI's state augmentation that undoes its harm.

`latency(delay=d)`: the agent's inference takes d environment steps and the world does not wait. The action the
agent chooses at step t is committed and executed at step t + d; until then the d already-committed actions
a_{t-d}, ..., a_{t-1} run (a `default` action fills the queue at the start of an episode):

    q_t = (a_{t-d}, ..., a_{t-1})            # committed, not yet executed; q_0 = (default, ..., default)
    s_{t+1} ~ T(s_t, a_{t-d}),   r_t = R(s_t, a_{t-d}),   q_{t+1} = (a_{t-d+1}, ..., a_t)
    o_t = s_{t-k}                            # with obs_delay=k: the observation inference started from

so the plain observation is no longer Markov: what happens next depends on the hidden queue q_t.

`arli(delay=d)`: ARLI (asynchronous RL with intermediate information; the catalogue's entry "For asynchronous
inference under latency, the state is augmented with the already-committed actions plus a mid-inference
observation, restoring near-Markov structure") gives the agent the same environment with

    o_t = [s_{t-k}, q_t, s_t]                # stale observation, committed actions, intermediate observation

the committed actions one-hot per action for a discrete space (d x n values), their values for a continuous one
(d x dim), oldest (executed next) first; s_t, the newest observation, arrives while inference is under way (the
intermediate information) and is appended only when obs_delay k > 0 (with k = 0 it is s_{t-k} itself). For this
wrapper's dynamics (s_t, q_t) is exactly Markov: the classical augmented state of constant-delay MDPs
(Katsikopoulos & Engelbrecht 2003, "Markov decision processes with delays and asynchronous cost collection",
IEEE Trans. Automatic Control 48(4)). The ARLI paper itself is cited by its catalogue title only: the search tools
did not find its authors, year or arXiv id.

Both wrappers keep their queue and observation history in `wrapper_state()` for MuJoCo snapshots; other
environments are pickled whole.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Any

import numpy as np

from ascent import papers
from ascent.classic.wrappers import CLASSIC_WRAPPERS
from ascent.typed import ConfigError


@dataclass(frozen=True)
class LatencyParams:
    """Inference latency: actions execute `delay` steps after they are chosen."""

    delay: int = 2
    """Steps between choosing an action and executing it (>= 1): the number of committed, unexecuted actions."""
    obs_delay: int = 0
    """The observation handed to the agent is this many steps old (>= 0; the frame inference started from)."""
    default: float = 0.0
    """The action that fills the queue at the start of an episode: an action index for a discrete space (its
    integer part), the value of every component for a continuous one (clipped to the bounds)."""

    def __post_init__(self) -> None:
        if self.delay < 1:
            raise ConfigError(f"latency: delay must be >= 1 (no latency: leave the wrapper out), got {self.delay}")
        if self.obs_delay < 0:
            raise ConfigError(f"latency: obs_delay must be >= 0, got {self.obs_delay}")


@dataclass(frozen=True)
class ARLIParams(LatencyParams):
    """The latency of `latency` with ARLI's augmented observation [stale obs, committed actions, newest obs]."""

    actions: bool = True
    """Append the committed, unexecuted actions (one-hot for discrete actions, values for continuous)."""
    intermediate: bool = True
    """Append the newest (mid-inference) observation when obs_delay > 0."""


def _latency_class():
    if "Latency" in globals():
        return globals()["Latency"]
    import gymnasium as gym

    class Latency(gym.Wrapper):
        """Execute each action `delay` steps after it is chosen; optionally show ARLI's augmented observation."""

        def __init__(self, env: Any, params: LatencyParams, actions: bool, intermediate: bool) -> None:
            super().__init__(env)
            self.delay, self.obs_delay = params.delay, params.obs_delay
            space = env.action_space
            self.discrete = isinstance(space, gym.spaces.Discrete)
            if self.discrete:
                self.n = int(space.n)
                self.default: Any = int(np.clip(int(params.default), 0, self.n - 1)) + int(space.start)
            else:
                self.default = np.clip(np.full(space.shape, params.default, space.dtype), space.low, space.high)
            self.show_actions = actions
            self.show_intermediate = intermediate and params.obs_delay > 0
            self.queue: deque = deque()
            self.frames: deque = deque()
            if actions or self.show_intermediate:
                self.observation_space = self._space(env.observation_space)

        def _space(self, obs_space: Any) -> Any:
            lows, highs = [obs_space.low], [obs_space.high]
            if self.show_actions:
                space = self.env.action_space
                lo = np.zeros(self.n) if self.discrete else np.asarray(space.low, np.float64).ravel()
                hi = np.ones(self.n) if self.discrete else np.asarray(space.high, np.float64).ravel()
                lows += [np.tile(lo, self.delay)]
                highs += [np.tile(hi, self.delay)]
            if self.show_intermediate:
                lows.append(obs_space.low)
                highs.append(obs_space.high)
            dtype = obs_space.dtype
            return gym.spaces.Box(np.concatenate(lows).astype(dtype), np.concatenate(highs).astype(dtype), dtype=dtype)

        def _encode(self) -> np.ndarray:
            """(delay * n,) one-hot rows or (delay * dim,) values of the queue, oldest first."""
            if self.discrete:
                codes = np.zeros((self.delay, self.n), np.float32)  # (d, n)
                codes[np.arange(self.delay), [int(a) - int(self.env.action_space.start) for a in self.queue]] = 1.0
                return codes.ravel()
            return np.concatenate([np.asarray(a, np.float32).ravel() for a in self.queue])

        def _observe(self) -> np.ndarray:
            parts = [self.frames[0]]  # s_{t-k}
            if self.show_actions:
                parts.append(self._encode())
            if self.show_intermediate:
                parts.append(self.frames[-1])  # s_t
            if len(parts) == 1:
                return parts[0]
            return np.concatenate(parts).astype(self.observation_space.dtype)

        def reset(self, *, seed: int | None = None, options: dict | None = None):
            obs, info = self.env.reset(seed=seed, options=options)
            self.queue = deque([self._copy(self.default) for _ in range(self.delay)])
            self.frames = deque([obs] * (self.obs_delay + 1), maxlen=self.obs_delay + 1)
            return self._observe(), info

        @staticmethod
        def _copy(action: Any) -> Any:
            return action.copy() if isinstance(action, np.ndarray) else action

        def step(self, action: Any):
            self.queue.append(self._copy(action))
            executed = self.queue.popleft()
            obs, reward, terminated, truncated, info = self.env.step(executed)
            self.frames.append(obs)
            return self._observe(), reward, terminated, truncated, {**info, "executed_action": executed}

        def wrapper_state(self) -> dict:
            return {"queue": [self._copy(a) for a in self.queue], "frames": [f.copy() for f in self.frames]}

        def load_wrapper_state(self, state: dict) -> None:
            self.queue = deque(self._copy(a) for a in state["queue"])
            self.frames = deque((f.copy() for f in state["frames"]), maxlen=self.obs_delay + 1)

    Latency.__qualname__ = "Latency"  # a module-level name: checkpoints pickle the environment
    globals()["Latency"] = Latency
    return Latency


@CLASSIC_WRAPPERS.register(
    "latency",
    params=LatencyParams,
    paper=papers.ARLI,
    fidelity="ascent",
    departures=("the problem setting only: a constant action delay and a stale observation, no method",),
)
def latency(env: Any, training: bool, params: LatencyParams) -> Any:
    """Inference latency: the action chosen at step t executes at t + delay (a queue of `delay` committed actions,
    `default` at the start), the agent sees s_{t - obs_delay}; the plain observation is not Markov."""
    return _latency_class()(env, params, actions=False, intermediate=False)


@CLASSIC_WRAPPERS.register(
    "arli",
    params=ARLIParams,
    paper=(papers.ARLI, papers.CONSTANT_DELAY_AUGMENTED_STATE),
    fidelity="reduced",
    departures=(
        (
            "a single-action constant-delay model of inference latency; the paper's chunked asynchronous inference "
            "with a low-latency RL head is not modelled (paper not found: judged against its abstract)"
        ),
    ),
)
def arli(env: Any, training: bool, params: ARLIParams) -> Any:
    """ARLI (asynchronous RL with intermediate information; cited by title, no arXiv id found): `latency` with
    o_t = [s_{t-k}, committed actions a_{t-d..t-1} (one-hot / values), intermediate observation s_t (k > 0)]."""
    return _latency_class()(env, params, actions=params.actions, intermediate=params.intermediate)


def __getattr__(name: str) -> Any:
    """The wrapper classes, built on first use (gymnasium stays an optional import), e.g. when unpickling."""
    builders = {"Latency": _latency_class}
    if name in builders:
        return builders[name]()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["ARLIParams", "LatencyParams", "arli", "latency"]
