"""The `drifting` classic wrapper: physics constants that change over episodes on a sinusoidal schedule.

The non-stationary setting of COREP (Zhang et al. 2024, arXiv:2306.02747) and of the work it compares with (FN-VAE,
LILAC): the environment's dynamics change between episodes, following a smooth periodic function of the episode
index that the agent is not told. Episode e of one environment runs with

    f_k(e) = 1 + amplitude_k * sin(2 pi floor(e / hold) / period + phase_k)
    c_k(e) = f_k(e) * default_k                          (key k: CartPole's length, force_mag, gravity, ...)

so the context changes every `hold` episodes and returns to its start after `period * hold` episodes. Each
environment of a vector env follows the schedule from its own first episode. The physics are set by
`ascent.classic.contextual.ContextualEnv` (a fixed set of contexts taken in turn); the evaluation environments
(`training=False`) start the schedule at (reset seed mod the schedule's length), so an evaluation of several
episodes covers several phases of the drift.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from ascent import papers
from ascent.classic.wrappers import CLASSIC_WRAPPERS
from ascent.typed import ConfigError


@dataclass(frozen=True)
class DriftingParams:
    """Which physics constants drift, how far (as factors of the default values) and how fast."""

    keys: list[str] = field(default_factory=lambda: ["length", "force_mag"])
    """Context keys of the environment's family (CartPole: gravity, masscart, masspole, length, force_mag, tau;
    Acrobot's and MuJoCo's keys as in `contextual`); an unknown one fails with the valid keys."""
    amplitude: list[float] = field(default_factory=lambda: [0.6, 0.6])
    """Per key, the drift's amplitude as a factor of the default: f in [1 - a, 1 + a]; 0 <= a < 1."""
    phase: list[float] = field(default_factory=list)
    """Per key, the sinusoid's phase in radians; empty: key i gets i * pi / 2 (the keys drift out of step)."""
    period: int = 8
    """Context changes per full cycle of the sinusoid, >= 2."""
    hold: int = 4
    """Episodes each context lasts before the next change, >= 1."""

    def __post_init__(self) -> None:
        n = len(self.keys)
        if n == 0 or len(set(self.keys)) != n:
            raise ConfigError(f"drifting: keys must be a non-empty list of distinct names, got {self.keys}")
        if len(self.amplitude) != n or any(not 0 <= a < 1 for a in self.amplitude):
            raise ConfigError(f"drifting: amplitude needs one value in [0, 1) per key ({n}), got {self.amplitude}")
        if self.phase and len(self.phase) != n:
            raise ConfigError(f"drifting: phase needs one value per key ({n}) or none, got {self.phase}")
        if self.period < 2 or self.hold < 1:
            raise ConfigError(f"drifting: need period >= 2 and hold >= 1, got {self.period}, {self.hold}")

    def factors(self) -> list[list[float]]:
        """The schedule, one list of factors (one per key) per episode of a full cycle (period * hold episodes)."""
        phases = self.phase or [i * math.pi / 2 for i in range(len(self.keys))]
        cycle = []
        for e in range(self.period * self.hold):
            angle = 2 * math.pi * (e // self.hold) / self.period
            cycle.append([1 + a * math.sin(angle + ph) for a, ph in zip(self.amplitude, phases)])
        return cycle


@CLASSIC_WRAPPERS.register(
    "drifting",
    params=DriftingParams,
    paper=papers.COREP,
    fidelity="reduced",
    departures=(
        "between-episode drift of CartPole / Acrobot / MuJoCo physics constants only; the paper's DMC tasks also "
        "change within episodes and change rewards",
    ),
)
def drifting(env: Any, training: bool, params: DriftingParams) -> Any:
    """Non-stationary physics (COREP's setting, arXiv:2306.02747): episode e runs with c_k = default_k *
    (1 + amplitude_k sin(2 pi floor(e / hold) / period + phase_k)); evaluation starts at reset seed mod the cycle."""
    from ascent.classic.contextual import ContextParams, ContextualEnv, default_context

    defaults = default_context(env)
    unknown = [k for k in params.keys if k not in defaults]
    if unknown:
        raise ConfigError(f"drifting: unknown key(s) {unknown}; valid keys: {', '.join(defaults)}")
    contexts = tuple({k: f * defaults[k] for k, f in zip(params.keys, fs)} for fs in params.factors())
    selection = "cycle" if training else "by_seed"
    return ContextualEnv(env, ContextParams(contexts=contexts, selection=selection))


__all__ = ["DriftingParams", "drifting"]
