"""The `contextual` classic wrapper: CARL's train-on-some-contexts, evaluate-on-held-out-contexts protocol in a run.

CARL (Benjamins et al. 2023, "Contextualize Me -- The Case for Context in Reinforcement Learning", TMLR,
arXiv:2202.04500): the training environments draw, at every reset, a context c whose key i is the environment's
default value times a factor uniform in [low_i, high_i]; the evaluation environments (`training=False`) run the
held-out contexts instead, one per evaluation episode in turn (episode j of an evaluation seeded s, s+1, ... takes
held-out context (s + j) mod H):

    training:    c_i = f_i * default_i,   f_i ~ U[low_i, high_i]          (per episode)
    evaluation:  c = (f_h,i * default_i)_i,   h = reset seed mod H          (held_out[h] = [f_h,1, ...])
    o_t = s_t  (hidden)   or   [s_t, c]  (visible: keys sorted)

So `final_return` of a run is its zero-shot return on the held-out contexts. The physics are applied by
`ascent.classic.contextual.ContextualEnv` (CartPole, Acrobot, any MuJoCo environment).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ascent import papers
from ascent.classic.wrappers import CLASSIC_WRAPPERS
from ascent.typed import ConfigError


@dataclass(frozen=True)
class ContextualParams:
    """Which physics constants vary, their training ranges and the held-out evaluation contexts (all as factors
    of the environment's default values)."""

    keys: list[str] = field(default_factory=lambda: ["length"])
    """Context keys (e.g. CartPole's gravity, length, masscart, masspole, force_mag, tau; Acrobot's link_mass_2;
    MuJoCo's gravity, mass_scale, ...); an unknown one fails at construction with the environment's valid keys."""
    low: list[float] = field(default_factory=lambda: [0.5])
    """Per key, the smallest training factor of the default value (> 0)."""
    high: list[float] = field(default_factory=lambda: [1.5])
    """Per key, the largest training factor (>= low; low == high: one fixed training context)."""
    held_out: list[list[float]] = field(default_factory=list)
    """Evaluation contexts, each a list of factors (one per key), e.g. [[0.25], [3.0]]; empty: the evaluation
    environments draw from the training ranges too."""
    visible: bool = False
    """Append the context's values to the observation (CARL's visible context); False: hidden."""
    seed: int = 0
    """Seed of the context stream (combined with each environment's reset seed), >= 0."""

    def __post_init__(self) -> None:
        n = len(self.keys)
        if n == 0 or len(set(self.keys)) != n:
            raise ConfigError(f"contextual: keys must be a non-empty list of distinct names, got {self.keys}")
        if len(self.low) != n or len(self.high) != n:
            raise ConfigError(f"contextual: low and high need one factor per key ({n}), got {self.low}, {self.high}")
        if any(not 0 < lo <= hi for lo, hi in zip(self.low, self.high)):
            raise ConfigError(f"contextual: need 0 < low <= high per key, got low={self.low} high={self.high}")
        for h in self.held_out:
            if len(h) != n or any(f <= 0 for f in h):
                raise ConfigError(f"contextual: each held_out context needs {n} factors > 0 (one per key), got {h}")
        if self.seed < 0:
            raise ConfigError(f"contextual: seed must be >= 0, got {self.seed}")


def context_params(env: Any, params: ContextualParams, training: bool) -> Any:
    """The `ContextParams` of the training (ranges) or evaluation (held-out contexts) environments of `env`."""
    from ascent.classic.contextual import ContextParams, default_context

    defaults = default_context(env)
    unknown = [k for k in params.keys if k not in defaults]
    if unknown:
        raise ValueError(f"contextual: unknown key(s) {unknown}; valid keys: {', '.join(defaults)}")
    if training or not params.held_out:
        ranges = {k: (lo * defaults[k], hi * defaults[k]) for k, lo, hi in zip(params.keys, params.low, params.high)}
        return ContextParams(ranges=ranges, visible=params.visible, seed=params.seed)
    contexts = tuple({k: f * defaults[k] for k, f in zip(params.keys, h)} for h in params.held_out)
    return ContextParams(contexts=contexts, visible=params.visible, selection="by_seed", seed=params.seed)


@CLASSIC_WRAPPERS.register(
    "contextual",
    params=ContextualParams,
    paper=papers.CARL,
    fidelity="faithful",
    departures=("CartPole, Acrobot and MuJoCo physics contexts only, not CARL's wider environment families",),
)
def contextual(env: Any, training: bool, params: ContextualParams) -> Any:
    """CARL contexts (Benjamins et al. 2023, TMLR, arXiv:2202.04500): training draws c_i = U[low_i, high_i] x
    default_i per episode, evaluation cycles the held-out contexts by reset seed; o = s or [s, c] (visible)."""
    from ascent.classic.contextual import ContextualEnv

    return ContextualEnv(env, context_params(env, params, training))


__all__ = ["ContextualParams", "context_params", "contextual"]
