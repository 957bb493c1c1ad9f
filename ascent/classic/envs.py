"""Gymnasium environments for the classic track: a lean vector loop, its checkpointable state, evaluation and the
config checks.

`VecEnv` steps E Gymnasium environments in one Python loop (cheaper than `gymnasium.vector.SyncVectorEnv` for
tiny control tasks) and resets an environment in the same step its episode ends (Stable-Baselines3's
convention): the step returns the first observation of the next episode and, in `final_obs`, the last one of
the episode that ended (what a truncated episode bootstraps from and what a replay buffer stores as next
observation). It normalises observations and rewards when asked (`ascent.classic.normalize`) and records the
undiscounted return and length of every finished episode. `state_dict` holds everything a resumed run needs to
continue bit for bit: each environment's simulator state and random generator, the wrappers' counters, the
current observations, the episode accumulators and the normalisers.
"""

from __future__ import annotations

import difflib
import pickle
from dataclasses import dataclass
from typing import Any, Callable, Optional, Sequence

import numpy as np

from ascent.classic.normalize import ObsNormalizer, RewardNormalizer
from ascent.typed import ConfigError


def gymnasium():
    """The gymnasium module, or a ConfigError saying how to install it."""
    try:
        import gymnasium
    except ImportError:
        raise ConfigError(
            "classic runs need gymnasium: pip install 'ascent[classic]' (gymnasium with MuJoCo)"
        ) from None
    from ascent.classic.gridworld import register

    register()  # ascent's own environments (ascent/RandDistShift-v0)
    return gymnasium


def make_env(env_id: str, wrappers: Sequence[str] = (), training: bool = True) -> Any:
    """One Gymnasium environment (TimeLimit included; the passive checker off: it costs time every step), wrapped by
    the `classic_wrappers` specs `wrappers` (`training`: False for evaluation environments)."""
    env = gymnasium().make(env_id, disable_env_checker=True)
    if wrappers:
        from ascent.classic.wrappers import apply_wrappers

        env = apply_wrappers(env, wrappers, training)
    return env


@dataclass
class Step:
    """One vector step; arrays over the E environments."""

    obs: np.ndarray
    """(E, obs_dim) float32: the observations to act on next (a new episode's first one where one ended)."""
    reward: np.ndarray
    """(E,) float32: the rewards (normalised when the run normalises rewards)."""
    terminated: np.ndarray
    """(E,) bool: the episode reached a terminal state (no bootstrap)."""
    truncated: np.ndarray
    """(E,) bool: the episode was cut by the time limit (bootstrap from final_obs)."""
    final_obs: np.ndarray
    """(E, obs_dim) float32: the observation after this step's action (the last of the episode where one ended)."""
    reward_vector: Optional[np.ndarray] = None
    """(E, C) float32: reward components when the environment reports `info["reward_vector"]` (their sum is the
    raw reward; never normalised), else None."""
    messages: Optional[list[str]] = None
    """Each environment's `info["message"]` (the text of what happened, as a roguelike prints it) when the
    environment reports one, else None."""


class VecEnv:
    """E environments stepped in one loop, reset in the step their episode ends; see the module docstring."""

    def __init__(
        self,
        make: Callable[[], Any],
        num_envs: int,
        seed: int,
        normalize_obs: bool = False,
        reward_gamma: Optional[float] = None,
        clip_obs: float = 10.0,
        clip_reward: float = 10.0,
    ) -> None:
        """`num_envs` environments from `make`, environment i first reset with seed + i; `normalize_obs`: running
        observation normalisation; `reward_gamma`: reward scaling by the running std of returns discounted by it
        (None: raw rewards)."""
        self.envs = [make() for _ in range(num_envs)]
        space = self.envs[0].observation_space
        if len(space.shape) != 1:
            raise ConfigError(f"classic runs take flat (1-D) observations; this environment gives {space.shape}")
        self.obs_dim = int(space.shape[0])
        action_space = self.envs[0].action_space
        self.discrete = hasattr(action_space, "n")
        if self.discrete:
            self.n_actions, self.action_dim = int(action_space.n), 1
        else:
            self.action_dim = int(np.prod(action_space.shape))
            self.low, self.high = action_space.low.astype(np.float32), action_space.high.astype(np.float32)
        self.obs_norm = ObsNormalizer((self.obs_dim,), clip_obs) if normalize_obs else None
        self.reward_norm = None if reward_gamma is None else RewardNormalizer(num_envs, reward_gamma, clip_reward)
        raw = np.stack([env.reset(seed=seed + i)[0] for i, env in enumerate(self.envs)]).astype(np.float32)
        self.obs = self._norm_obs(raw, update=True)
        self.episode_return = np.zeros(num_envs, np.float64)
        self.episode_length = np.zeros(num_envs, np.int64)
        self.finished: list[tuple[float, int]] = []
        """(return, length) of the episodes finished since the last `drain_episodes`."""

    @property
    def num_envs(self) -> int:
        return len(self.envs)

    def _norm_obs(self, raw: np.ndarray, update: bool) -> np.ndarray:
        return raw if self.obs_norm is None else self.obs_norm(raw, update)

    def step(self, actions: np.ndarray) -> Step:
        """Step every environment with its action (continuous actions are clipped to the action bounds)."""
        if self.discrete:
            actions = actions.tolist()  # Python ints: the fast path of Discrete.contains
        else:
            actions = np.clip(actions.reshape(self.num_envs, self.action_dim), self.low, self.high)
        E = self.num_envs
        next_obs, final_obs = np.empty((E, self.obs_dim), np.float32), np.empty((E, self.obs_dim), np.float32)
        rewards, term, trunc = np.empty(E, np.float64), np.zeros(E, bool), np.zeros(E, bool)
        vectors, messages = None, None
        for i, env in enumerate(self.envs):
            obs, rewards[i], term[i], trunc[i], info = env.step(actions[i])
            final_obs[i] = obs
            if "message" in info:
                messages = messages or [""] * E
                messages[i] = str(info["message"])
            if "reward_vector" in info:
                if vectors is None:
                    vectors = np.zeros((E, len(info["reward_vector"])), np.float32)
                vectors[i] = info["reward_vector"]
            if term[i] or trunc[i]:
                obs, _ = env.reset()
            next_obs[i] = obs
        done = term | trunc
        self.episode_return += rewards
        self.episode_length += 1
        for i in np.flatnonzero(done):
            self.finished.append((float(self.episode_return[i]), int(self.episode_length[i])))
        self.episode_return[done], self.episode_length[done] = 0.0, 0
        self.obs = self._norm_obs(next_obs, update=True)
        final = self.obs.copy() if not done.any() else self._norm_obs(final_obs, update=False)
        scaled = rewards.astype(np.float32) if self.reward_norm is None else self.reward_norm(rewards, done)
        return Step(self.obs, scaled, term, trunc, final, vectors, messages)

    def drain_episodes(self) -> list[tuple[float, int]]:
        """The (return, length) of the episodes finished since the last call."""
        out, self.finished = self.finished, []
        return out

    def state_dict(self) -> dict[str, Any]:
        return {
            "envs": [env_state(env) for env in self.envs],
            "obs": self.obs.copy(),
            "episode_return": self.episode_return.copy(),
            "episode_length": self.episode_length.copy(),
            "finished": list(self.finished),
            "obs_norm": None if self.obs_norm is None else self.obs_norm.state_dict(),
            "reward_norm": None if self.reward_norm is None else self.reward_norm.state_dict(),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if len(state["envs"]) != self.num_envs:
            raise ConfigError(f"the checkpoint has {len(state['envs'])} environments, the config {self.num_envs}")
        self.envs = [set_env_state(env, s) for env, s in zip(self.envs, state["envs"])]
        self.obs = state["obs"].copy()
        self.episode_return, self.episode_length = state["episode_return"].copy(), state["episode_length"].copy()
        self.finished = list(state["finished"])
        for norm, key in ((self.obs_norm, "obs_norm"), (self.reward_norm, "reward_norm")):
            if (norm is None) != (state[key] is None):
                raise ConfigError(f"the checkpoint was written with a different {key.replace('_', ' ')} setting")
            if norm is not None:
                norm.load_state_dict(state[key])

    def close(self) -> None:
        for env in self.envs:
            env.close()


def _wrappers(env: Any) -> list[Any]:
    chain = [env]
    while hasattr(chain[-1], "env"):
        chain.append(chain[-1].env)
    return chain


_COUNTERS = ("_elapsed_steps", "_has_reset")
"""Wrapper attributes that change while stepping (TimeLimit, OrderEnforcing)."""


def env_state(env: Any) -> dict[str, Any]:
    """A snapshot of one environment: MuJoCo tasks by their integration state, random generator and wrapper
    counters (a MuJoCo env pickles as a fresh one); any other environment pickled whole."""
    base = env.unwrapped
    if not (hasattr(base, "model") and hasattr(base, "data")):
        return {"pickle": pickle.dumps(env)}
    import mujoco

    spec = mujoco.mjtState.mjSTATE_INTEGRATION
    sim = np.empty(mujoco.mj_stateSize(base.model, spec))
    mujoco.mj_getState(base.model, base.data, sim, spec)
    chain = _wrappers(env)
    counters = [{k: getattr(w, k) for k in _COUNTERS if k in vars(w)} for w in chain]
    custom = [w.wrapper_state() if hasattr(w, "wrapper_state") else None for w in chain]
    return {"mujoco": sim, "rng": base.np_random.bit_generator.state, "counters": counters, "wrappers": custom}


_ENV_FUNCTIONS = {
    ("numpy._core.multiarray", "_reconstruct"),
    ("numpy.core.multiarray", "_reconstruct"),
    ("numpy._core.multiarray", "scalar"),
    ("numpy.core.multiarray", "scalar"),
    ("numpy.random._pickle", "__generator_ctor"),
    ("numpy.random._pickle", "__bit_generator_ctor"),
    ("numpy.random._pickle", "__randomstate_ctor"),
    ("numpy.random.bit_generator", "__pyx_unpickle_SeedSequence"),
    ("copyreg", "_reconstructor"),
}
"""The only functions an environment snapshot may call while it is read back: numpy's own reconstructors."""
_ENV_BUILTINS = {"object", "set", "frozenset", "slice", "complex", "range", "bytearray", "OrderedDict", "deque"}


class _EnvUnpickler(pickle.Unpickler):
    """Reads back an environment pickled by `env_state`: classes of gymnasium, ascent and numpy (not
    numpy.memmap, which opens files), a few builtin containers and numpy's reconstructors; anything else — a
    function such as os.system, a class of another package — is refused, so a crafted checkpoint runs no
    code through it. (An allow-list, not a proof: the constructors of the allowed classes still run.)"""

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) in _ENV_FUNCTIONS or (module in ("builtins", "collections") and name in _ENV_BUILTINS):
            return super().find_class(module, name)
        if module.split(".")[0] in ("gymnasium", "ascent", "numpy"):
            found = super().find_class(module, name)
            if isinstance(found, type) and not issubclass(found, np.memmap):
                return found
        raise pickle.UnpicklingError(f"an environment snapshot may not use {module}.{name}")


def load_env_pickle(data: bytes) -> Any:
    """`pickle.loads` of an environment snapshot through `_EnvUnpickler`'s allow-list."""
    import io

    return _EnvUnpickler(io.BytesIO(data)).load()


def set_env_state(env: Any, state: dict[str, Any]) -> Any:
    """`env` put back in the snapshot's state (or the unpickled snapshot itself)."""
    if "pickle" in state:
        return load_env_pickle(state["pickle"])
    import mujoco

    base = env.unwrapped
    mujoco.mj_setState(base.model, base.data, state["mujoco"], mujoco.mjtState.mjSTATE_INTEGRATION)
    base.np_random.bit_generator.state = state["rng"]
    chain = _wrappers(env)
    for wrapper, counters in zip(chain, state["counters"]):
        for key, value in counters.items():
            setattr(wrapper, key, value)
    for wrapper, custom in zip(chain, state.get("wrappers", [None] * len(chain))):
        if custom is not None:
            wrapper.load_wrapper_state(custom)
    return env


def evaluate(
    make: Callable[[], Any],
    act: Callable[[np.ndarray], np.ndarray],
    episodes: int,
    seed: int,
    obs_norm: Optional[ObsNormalizer] = None,
) -> list[float]:
    """Undiscounted returns of `episodes` episodes, one per environment (seeds seed, seed+1, ...), stepped together;
    `act` maps (B, obs_dim) observations (normalised with the frozen `obs_norm`) to (B, ...) actions."""
    envs = [make() for _ in range(episodes)]
    obs = [env.reset(seed=seed + i)[0] for i, env in enumerate(envs)]
    returns, active = np.zeros(episodes), list(range(episodes))
    while active:
        batch = np.stack([obs[i] for i in active]).astype(np.float32)
        actions = act(batch if obs_norm is None else obs_norm(batch, update=False))
        still = []
        for i, action in zip(active, actions):
            if not hasattr(envs[i].action_space, "n"):
                action = np.clip(action, envs[i].action_space.low, envs[i].action_space.high)
            obs[i], reward, term, trunc, _ = envs[i].step(action)
            returns[i] += reward
            if not (term or trunc):
                still.append(i)
        active = still
    for env in envs:
        env.close()
    return returns.tolist()


def check_env_id(env_id: str) -> None:
    """A ConfigError naming close ids (and how to list them all) when Gymnasium has no `env_id`; one saying what
    to install when it needs MuJoCo and that is missing."""
    registry = gymnasium().envs.registry
    if env_id not in registry:
        close = difflib.get_close_matches(env_id, list(registry), n=5, cutoff=0.5)
        hint = f"did you mean {', '.join(close)}? " if close else ""
        raise ConfigError(
            f"classic.env: Gymnasium has no environment {env_id!r}; {hint}list them with "
            "`python -c 'import gymnasium; gymnasium.pprint_registry()'`"
        )
    entry = str(registry[env_id].entry_point)
    if "mujoco" in entry:
        try:
            import mujoco  # noqa: F401
        except ImportError:
            raise ConfigError(f"classic.env={env_id} needs MuJoCo: pip install 'ascent[classic]'") from None
