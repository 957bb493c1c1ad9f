"""CARL-style contextual environments: physics constants drawn per episode, optionally shown to the agent.

CARL (Benjamins et al. 2023, "Contextualize Me -- The Case for Context in Reinforcement Learning", TMLR,
arXiv:2202.04500) turns an environment into a family of environments indexed by a *context* c, a vector of
physical constants (gravity, pole length, masses, ...). Each episode runs in one member of the family:

    c_e ~ p(c)                                   # drawn at reset, fixed for the episode
    s_{t+1} ~ T_{c_e}(s_t, a_t),   r_t = R_{c_e}(s_t, a_t)
    o_t = s_t            (hidden context)   or   o_t = [s_t, c_e]   (visible context)

and a policy trained on contexts from p(c) is evaluated on others to measure generalisation. `ContextualEnv`
is that construction as a gymnasium wrapper: `ContextParams` gives p(c), either a fixed set of contexts (CARL's
context instances; each episode takes one at random, or in turn) or independent uniform ranges per feature; the
context keys are the constants of the wrapped environment's family (`context_features(env)` lists them), and an
unknown key is a ValueError listing the valid ones. Keys not in the distribution keep the environment's values
at wrapping time, and every episode rebuilds the physics from those values, so nothing leaks between episodes.

Families: gymnasium's CartPole (`CartPoleEnv`), Acrobot (`AcrobotEnv`) and every MuJoCo environment
(`MujocoEnv`: HalfCheetah, Hopper, ...; gravity, mass, friction and damping through the compiled model's fields).
The context stream is seeded: `reset(seed=s)` reseeds it from (ContextParams.seed, s), so the same seeds give
the same contexts.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

import gymnasium as gym
import numpy as np

SELECTIONS = ("random", "cycle", "by_seed")
"""How an episode takes its context from a fixed set: uniformly at random, in turn (evaluation), or in turn
starting at index (reset seed mod the number of contexts), so that evaluation environments seeded s, s+1, ...
each built fresh still cover the set in order."""


@dataclass(frozen=True)
class ContextParams:
    """The context distribution p(c) of a `ContextualEnv`: a fixed set of contexts, or a uniform range per key."""

    contexts: tuple[Mapping[str, float], ...] = ()
    """A fixed set of contexts (CARL's instances), each {key: value} with the same keys; empty: use `ranges`."""
    ranges: Mapping[str, tuple[float, float]] = field(default_factory=dict)
    """{key: (low, high)}: each episode draws every key uniformly and independently in [low, high]."""
    visible: bool = False
    """Append the context's values (sorted by key) to the observation: CARL's visible-context setting."""
    selection: str = "random"
    """With `contexts`: 'random' (uniform draw per episode), 'cycle' (in order, for evaluating each in turn) or
    'by_seed' (in order from index reset-seed mod len(contexts))."""
    seed: int = 0
    """Seed of the context stream, combined with the seed given to `reset` (>= 0)."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "contexts", tuple(dict(c) for c in self.contexts))
        object.__setattr__(self, "ranges", {k: (float(lo), float(hi)) for k, (lo, hi) in dict(self.ranges).items()})
        if bool(self.contexts) == bool(self.ranges):
            raise ValueError("ContextParams: give exactly one of `contexts` (a fixed set) or `ranges` (uniform)")
        if self.selection not in SELECTIONS:
            raise ValueError(f"ContextParams.selection must be one of {SELECTIONS}, got {self.selection!r}")
        if self.selection != "random" and not self.contexts:
            raise ValueError(
                f"ContextParams.selection={self.selection!r} needs a fixed set of `contexts`, not `ranges`"
            )
        if self.seed < 0:
            raise ValueError(f"ContextParams.seed must be >= 0, got {self.seed}")
        keys = set(self.contexts[0]) if self.contexts else set(self.ranges)
        if not keys:
            raise ValueError("ContextParams: a context needs at least one key")
        for i, c in enumerate(self.contexts):
            if set(c) != keys:
                raise ValueError(
                    f"ContextParams.contexts[{i}] has keys {sorted(c)}; every context needs {sorted(keys)}"
                )
        for k, (lo, hi) in self.ranges.items():
            if not lo <= hi:
                raise ValueError(f"ContextParams.ranges[{k!r}] = ({lo}, {hi}): low must be <= high")

    @property
    def keys(self) -> list[str]:
        """The context keys, sorted (the order of the visible context in the observation)."""
        return sorted(self.contexts[0] if self.contexts else self.ranges)

    def bounds(self) -> dict[str, tuple[float, float]]:
        """{key: (smallest, largest)} value the distribution can give."""
        if self.ranges:
            return dict(self.ranges)
        return {k: (min(c[k] for c in self.contexts), max(c[k] for c in self.contexts)) for k in self.keys}


@dataclass(frozen=True)
class Feature:
    """One context key of a family: what it is, and the smallest value it accepts."""

    doc: str
    low: float = 0.0
    """Values must be > low (>= low where `closed`)."""
    closed: bool = False

    def check(self, key: str, value: float) -> None:
        ok = value >= self.low if self.closed else value > self.low
        if not (ok and np.isfinite(value)):
            raise ValueError(f"context {key}={value}: must be {'>=' if self.closed else '>'} {self.low} ({self.doc})")


@dataclass(frozen=True)
class Family:
    """How to read and write one kind of environment's context.

    `capture(env)` records what the physics are built from (read once, at wrapping time); `defaults(env, base)`
    is the context of those values; `apply(env, base, context)` rebuilds the physics from `base` and a full
    context (every key of `features(env)`).
    """

    name: str
    matches: Callable[[Any], bool]
    features: Callable[[Any], dict[str, Feature]]
    capture: Callable[[Any], Any]
    defaults: Callable[[Any, Any], dict[str, float]]
    apply: Callable[[Any, Any, dict[str, float]], None]


# -- CartPole: gymnasium's CartPoleEnv reads these attributes in step() --------------------------------------------

CARTPOLE = {
    "gravity": Feature("gravitational acceleration, m/s^2", 0.0, closed=True),
    "masscart": Feature("mass of the cart, kg"),
    "masspole": Feature("mass of the pole, kg"),
    "length": Feature("HALF the pole's length, m (gymnasium's `length`)"),
    "force_mag": Feature("magnitude of the push either way, N"),
    "tau": Feature("seconds between state updates"),
}


def _cartpole_apply(env: Any, base: Any, ctx: dict[str, float]) -> None:
    for k in CARTPOLE:
        setattr(env, k, float(ctx[k]))
    env.total_mass = env.masspole + env.masscart  # derived in CartPoleEnv.__init__, used by step()
    env.polemass_length = env.masspole * env.length


# -- Acrobot: AcrobotEnv's class constants, shadowed per instance --------------------------------------------------

ACROBOT = {
    "link_length_1": Feature("length of link 1, m (enters the dynamics through the inertia coupling)"),
    "link_length_2": Feature("length of link 2, m (gymnasium's dynamics do not use it; drawing and CARL only)"),
    "link_mass_1": Feature("mass of link 1, kg"),
    "link_mass_2": Feature("mass of link 2, kg"),
    "link_com_1": Feature("position of link 1's centre of mass along it, m"),
    "link_com_2": Feature("position of link 2's centre of mass along it, m"),
    "link_moi": Feature("moment of inertia of both links, kg m^2"),
    "torque_noise_max": Feature("uniform noise added to the torque, N m", 0.0, closed=True),
}
ACROBOT_ATTRS = {
    "link_length_1": "LINK_LENGTH_1",
    "link_length_2": "LINK_LENGTH_2",
    "link_mass_1": "LINK_MASS_1",
    "link_mass_2": "LINK_MASS_2",
    "link_com_1": "LINK_COM_POS_1",
    "link_com_2": "LINK_COM_POS_2",
    "link_moi": "LINK_MOI",
    "torque_noise_max": "torque_noise_max",
}


def _acrobot_apply(env: Any, base: Any, ctx: dict[str, float]) -> None:
    for k, attr in ACROBOT_ATTRS.items():
        setattr(env, attr, float(ctx[k]))


# -- MuJoCo: the compiled model's fields ---------------------------------------------------------------------------

MUJOCO = {
    "gravity": Feature("magnitude of gravity along -z, m/s^2 (model.opt.gravity = [0, 0, -g])", 0.0, closed=True),
    "mass_scale": Feature("factor on every body's mass and inertia"),
    "friction_scale": Feature("factor on every geom's sliding friction", 0.0, closed=True),
    "damping_scale": Feature("factor on every joint's damping", 0.0, closed=True),
}
"""Plus `mass:BODY` for each named body of the model: that body's mass in kg (its inertia scaled alike)."""


def _body_names(env: Any) -> list[str]:
    import mujoco

    m = env.model
    names = (mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_BODY, i) for i in range(1, m.nbody))  # 0 is the world
    return [n for n in names if n]


def _mujoco_features(env: Any) -> dict[str, Feature]:
    bodies = {f"mass:{b}": Feature(f"mass of body {b!r}, kg") for b in _body_names(env)}
    return {**MUJOCO, **bodies}


def _mujoco_capture(env: Any) -> dict[str, np.ndarray]:
    m = env.model
    return {
        "gravity": m.opt.gravity.copy(),
        "body_mass": m.body_mass.copy(),
        "body_inertia": m.body_inertia.copy(),
        "geom_friction": m.geom_friction.copy(),
        "dof_damping": m.dof_damping.copy(),
    }


def _mujoco_defaults(env: Any, base: dict[str, np.ndarray]) -> dict[str, float]:
    import mujoco

    out = {"gravity": float(-base["gravity"][2]), "mass_scale": 1.0, "friction_scale": 1.0, "damping_scale": 1.0}
    for b in _body_names(env):
        out[f"mass:{b}"] = float(base["body_mass"][mujoco.mj_name2id(env.model, mujoco.mjtObj.mjOBJ_BODY, b)])
    return out


def _mujoco_apply(env: Any, base: dict[str, np.ndarray], ctx: dict[str, float]) -> None:
    import mujoco

    m = env.model
    mass = base["body_mass"].copy()  # (nbody,)
    for b in _body_names(env):
        mass[mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_BODY, b)] = ctx[f"mass:{b}"]
    ratio = np.divide(mass, base["body_mass"], out=np.ones_like(mass), where=base["body_mass"] > 0)  # (nbody,)
    m.body_mass[:] = mass * ctx["mass_scale"]
    m.body_inertia[:] = base["body_inertia"] * (ratio * ctx["mass_scale"])[:, None]  # (nbody, 3)
    m.opt.gravity[:] = base["gravity"]
    m.opt.gravity[2] = -ctx["gravity"]
    m.geom_friction[:] = base["geom_friction"]
    m.geom_friction[:, 0] *= ctx["friction_scale"]  # sliding; torsional and rolling unchanged
    m.dof_damping[:] = base["dof_damping"] * ctx["damping_scale"]
    mujoco.mj_setConst(m, env.data)  # subtree masses and other constants derived from the changed fields


def _attrs(table: Mapping[str, str] | Mapping[str, Feature]) -> Callable[[Any], dict[str, float]]:
    names = table if isinstance(next(iter(table.values())), str) else {k: k for k in table}
    return lambda env: {k: float(getattr(env, attr)) for k, attr in names.items()}  # type: ignore[union-attr]


def _is(module: str, cls: str) -> Callable[[Any], bool]:
    def matches(env: Any) -> bool:
        import importlib

        try:
            return isinstance(env, getattr(importlib.import_module(module), cls))
        except ImportError:  # e.g. the mujoco wheel missing: no env can be of that class
            return False

    return matches


FAMILIES: tuple[Family, ...] = (
    Family(
        "cartpole",
        _is("gymnasium.envs.classic_control.cartpole", "CartPoleEnv"),
        lambda env: dict(CARTPOLE),
        _attrs(CARTPOLE),
        lambda env, base: dict(base),
        _cartpole_apply,
    ),
    Family(
        "acrobot",
        _is("gymnasium.envs.classic_control.acrobot", "AcrobotEnv"),
        lambda env: dict(ACROBOT),
        _attrs(ACROBOT_ATTRS),
        lambda env, base: dict(base),
        _acrobot_apply,
    ),
    Family(
        "mujoco",
        _is("gymnasium.envs.mujoco.mujoco_env", "MujocoEnv"),
        _mujoco_features,
        _mujoco_capture,
        _mujoco_defaults,
        _mujoco_apply,
    ),
)
"""The environment kinds a context can be set on, tried in order against `env.unwrapped`."""


def family_of(env: gym.Env) -> Family:
    """The family of `env.unwrapped`; a ValueError naming the supported ones otherwise."""
    raw = env.unwrapped
    for fam in FAMILIES:
        if fam.matches(raw):
            return fam
    names = ", ".join(f.name for f in FAMILIES)
    raise ValueError(f"no context family for {type(raw).__name__}; contextual environments support: {names}")


def context_features(env: gym.Env) -> dict[str, str]:
    """{key: description} of the context keys `env` accepts."""
    return {k: f.doc for k, f in family_of(env).features(env.unwrapped).items()}


def default_context(env: gym.Env) -> dict[str, float]:
    """The context `env` has now (every key of its family), e.g. {'gravity': 9.8, 'masscart': 1.0, ...}."""
    fam = family_of(env)
    return fam.defaults(env.unwrapped, fam.capture(env.unwrapped))


class ContextualEnv(gym.Wrapper):
    """A gymnasium environment whose physics context is drawn from `params` at every reset (CARL).

    The wrapper must sit on the environment itself or on wrappers that do not cache its physics (TimeLimit,
    OrderEnforcing, ...: what `gym.make` adds). `info['context']` and `self.context` give the episode's context.

    >>> env = ContextualEnv(gym.make("CartPole-v1"), ContextParams(contexts=({"gravity": 4.9},), visible=True))
    >>> obs, info = env.reset(seed=0)
    >>> obs.shape, info["context"], env.unwrapped.gravity
    ((5,), {'gravity': 4.9}, 4.9)
    """

    def __init__(self, env: gym.Env, params: ContextParams) -> None:
        super().__init__(env)
        self.params = params
        self.family = family_of(env)
        raw = env.unwrapped
        features = self.family.features(raw)
        unknown = [k for k in params.keys if k not in features]
        if unknown:
            raise ValueError(
                f"unknown context key(s) {unknown} for {self.family.name} ({type(raw).__name__}); "
                f"valid keys: {', '.join(features)}"
            )
        for i, c in enumerate(params.contexts):
            for k, v in c.items():
                features[k].check(k, v)
        for k, (lo, hi) in params.ranges.items():
            features[k].check(k, lo)
            features[k].check(k, hi)
        self._base = self.family.capture(raw)
        self._defaults = self.family.defaults(raw, self._base)
        self._rng = np.random.default_rng(params.seed)
        self._turn = 0
        self.context: dict[str, float] = {}
        if params.visible:
            self.observation_space = self._visible_space(env.observation_space)

    def _visible_space(self, space: gym.Space) -> gym.spaces.Box:
        if not isinstance(space, gym.spaces.Box) or len(space.shape) != 1:
            raise ValueError(f"visible context needs a flat Box observation space, got {space}")
        bounds = self.params.bounds()
        low = np.array([bounds[k][0] for k in self.params.keys], dtype=space.dtype)
        high = np.array([bounds[k][1] for k in self.params.keys], dtype=space.dtype)
        return gym.spaces.Box(np.concatenate([space.low, low]), np.concatenate([space.high, high]), dtype=space.dtype)

    def draw(self) -> dict[str, float]:
        """The next episode's context (the drawn keys only), from the seeded stream."""
        p = self.params
        if p.contexts:
            ordered = p.selection != "random"
            i = self._turn % len(p.contexts) if ordered else int(self._rng.integers(len(p.contexts)))
            self._turn += 1
            return {k: float(v) for k, v in p.contexts[i].items()}
        return {k: float(self._rng.uniform(lo, hi)) for k, (lo, hi) in sorted(p.ranges.items())}

    def _observe(self, obs: np.ndarray) -> np.ndarray:
        if not self.params.visible:
            return obs
        ctx = np.array([self.context[k] for k in self.params.keys], dtype=self.observation_space.dtype)
        return np.concatenate([np.asarray(obs, dtype=self.observation_space.dtype), ctx])

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict]:
        if seed is not None:
            self._rng = np.random.default_rng([self.params.seed, seed])
            self._turn = seed % len(self.params.contexts) if self.params.selection == "by_seed" else 0
        self.context = self.draw()
        self.family.apply(self.env.unwrapped, self._base, {**self._defaults, **self.context})
        obs, info = self.env.reset(seed=seed, options=options)
        return self._observe(obs), {**info, "context": dict(self.context)}

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict]:
        obs, reward, terminated, truncated, info = self.env.step(action)
        return self._observe(obs), reward, terminated, truncated, {**info, "context": dict(self.context)}

    def __getstate__(self) -> dict:
        """Pickled (a classic run's checkpoint) with the family by name: its functions are closures."""
        return {**self.__dict__, "family": self.family.name}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self.family = next(f for f in FAMILIES if f.name == state["family"])

    def wrapper_state(self) -> dict:
        """The context stream and the episode's context (a MuJoCo snapshot holds neither: see wrappers.py)."""
        return {"rng": self._rng.bit_generator.state, "turn": self._turn, "context": dict(self.context)}

    def load_wrapper_state(self, state: dict) -> None:
        """Back to the snapshot's stream, and its episode's physics rebuilt (a fresh model has the defaults)."""
        self._rng.bit_generator.state = state["rng"]
        self._turn, self.context = state["turn"], dict(state["context"])
        if not self.context:
            return
        raw = self.env.unwrapped
        if not hasattr(raw, "data"):
            self.family.apply(raw, self._base, {**self._defaults, **self.context})
            return
        import mujoco  # mj_setConst (in apply) works on data: keep the snapshot's integration state around it

        spec = mujoco.mjtState.mjSTATE_INTEGRATION
        sim = np.empty(mujoco.mj_stateSize(raw.model, spec))
        mujoco.mj_getState(raw.model, raw.data, sim, spec)
        self.family.apply(raw, self._base, {**self._defaults, **self.context})
        mujoco.mj_setState(raw.model, raw.data, sim, spec)


def make_contextual(env_id: str, params: ContextParams, **make_kwargs: Any) -> ContextualEnv:
    """`gym.make(env_id, **make_kwargs)` wrapped in a `ContextualEnv`."""
    return ContextualEnv(gym.make(env_id, **make_kwargs), params)


def scaled_contexts(env: gym.Env, key: str, factors: tuple[float, ...]) -> tuple[dict[str, float], ...]:
    """Contexts {key: default * f} for each factor f: e.g. gravity x (0.5, 1, 2) for a generalisation sweep."""
    defaults = default_context(env)
    if key not in defaults:
        raise ValueError(f"unknown context key {key!r}; valid keys: {', '.join(defaults)}")
    return tuple({key: defaults[key] * f} for f in factors)


__all__ = [
    "ContextParams",
    "ContextualEnv",
    "FAMILIES",
    "context_features",
    "default_context",
    "make_contextual",
    "scaled_contexts",
]
