"""A deceptive 2-D point-mass task with a near, poor *decoy* and a far, better *goal*, for RPG (Huang, Liang, Ling,
Li, Gan & Su 2023, arXiv:2307.10710), whose claim is that a latent-conditioned multimodal policy escapes the local
optima a single-mode Gaussian policy (SAC) settles in.

The point starts near the origin (uniform jitter of +-0.05) in the square [-2, 2]^2 and moves by
`0.1 * clip(a, -1, 1)` a step (a in [-1, 1]^2). Every step pays a dense reward, the sum of two Gaussian bumps

    r(p) = 0.3 exp(-|p - decoy|^2 / (2 0.3^2)) + 1.0 exp(-|p - goal|^2 / (2 0.3^2)),

decoy (-0.4, 0), goal (1.2, 0): at the start the decoy's slope is the only signal (the goal's bump is ~1e-4 there)
and it points away from the goal. Episodes last `max_steps` (30) steps and never terminate early. Sitting on the
decoy from step 4 returns about 8; reaching the goal (12 steps at full speed) about 19; staying put about 3.6.

Observation (float32, 3): x, y and t / max_steps (so the time-limited task stays Markov). The point's coordinates,
the first two entries, are the "object" RPG's count bonus looks at. Registered as `ascent/DecoyPoint-v0`.
"""

from __future__ import annotations

from typing import Any, Optional

import numpy as np

DECOY, GOAL = np.array([-0.4, 0.0]), np.array([1.2, 0.0])
DECOY_PEAK, GOAL_PEAK, WIDTH, SPEED, BOUND = 0.3, 1.0, 0.3, 0.1, 2.0


def reward(pos: np.ndarray) -> np.ndarray:
    """r(p) of the module docstring for positions (..., 2).

    >>> round(float(reward(np.array([1.2, 0.0]))), 4), round(float(reward(np.array([-0.4, 0.0]))), 4)
    (1.0, 0.3)
    """
    bump = lambda c, peak: peak * np.exp(-((pos - c) ** 2).sum(-1) / (2 * WIDTH**2))  # noqa: E731
    return bump(DECOY, DECOY_PEAK) + bump(GOAL, GOAL_PEAK)


def _env_class():
    if "DecoyPoint" in globals():
        return globals()["DecoyPoint"]
    import gymnasium
    from gymnasium import spaces

    class DecoyPoint(gymnasium.Env):
        """See the module docstring."""

        metadata = {"render_modes": []}

        def __init__(self, max_steps: int = 30) -> None:
            if max_steps <= 0:
                raise ValueError(f"DecoyPoint: max_steps must be > 0, got {max_steps}")
            self.max_steps = max_steps
            self.observation_space = spaces.Box(-BOUND, BOUND, (3,), np.float32)
            self.action_space = spaces.Box(-1.0, 1.0, (2,), np.float32)
            self.pos, self.t = np.zeros(2), 0

        def _obs(self) -> np.ndarray:
            return np.array([self.pos[0], self.pos[1], self.t / self.max_steps], np.float32)

        def reset(self, *, seed: Optional[int] = None, options: Optional[dict] = None) -> tuple[np.ndarray, dict]:
            super().reset(seed=seed)
            self.pos, self.t = self.np_random.uniform(-0.05, 0.05, 2), 0
            return self._obs(), {}

        def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict]:
            a = np.clip(np.asarray(action, np.float64).reshape(2), -1.0, 1.0)
            self.pos = np.clip(self.pos + SPEED * a, -BOUND, BOUND)
            self.t += 1
            return self._obs(), float(reward(self.pos)), False, self.t >= self.max_steps, {}

    DecoyPoint.__module__, DecoyPoint.__qualname__ = __name__, "DecoyPoint"
    globals()["DecoyPoint"] = DecoyPoint
    return DecoyPoint


def __getattr__(name: str) -> Any:
    if name == "DecoyPoint":  # built on first use, so importing this module needs no gymnasium
        return _env_class()
    raise AttributeError(name)


def make(**kwargs: Any) -> Any:
    """The gymnasium entry point of `ascent/DecoyPoint-v0`."""
    return _env_class()(**kwargs)
