"""A sparse-reward key-and-door gridworld that narrates what happens, for ONI (Zheng, Henaff, Zhang, Grover & Amos
2024, arXiv:2410.23022), whose annotator reads the game's messages (NetHack's, in the paper).

A `size` x `size` room split by a wall column with one locked door. The agent starts left of the wall, a key lies
left of it, the goal right of it. Four moves (east / south / west / north). Stepping on the key picks it up;
walking into the door with the key unlocks and opens it (without the key the agent stays put). Entering the goal
gives +1 and ends the episode; nothing else is rewarded; episodes are cut after `max_steps` (default 2 size^2). At
the default 7 x 7 (98 steps) a uniform random policy picks up the key in 79% of episodes and reaches the goal in 9%.

Every step reports `info["message"]`, the text a roguelike would print: "You pick up the red key.", "You unlock the
red door.", "The red door is locked.", "You bump into the wall.", now and then flavour text ("You hear a distant
noise.") and "" when nothing happened. The colour is drawn per episode from four, so the same event has several
wordings, as game messages have.

Observation (float32, `5 * size^2 + 1`): one-hot planes wall, closed door, key, goal, agent (cell (x, y) is entry
`x * size + y`), then 1.0 when the agent holds the key. Registered as `ascent/KeyDoor-v0` (7 x 7, 98 steps).
"""

from __future__ import annotations

from typing import Any, Optional

import numpy as np

MOVES = ((1, 0), (0, 1), (-1, 0), (0, -1))
COLOURS = ("red", "blue", "green", "yellow")
FLAVOUR = ("You hear a distant noise.", "You feel a draft.", "You hear the splashing of a naiad.")


def _env_class():
    if "KeyDoor" in globals():
        return globals()["KeyDoor"]
    import gymnasium
    from gymnasium import spaces

    class KeyDoor(gymnasium.Env):
        """See the module docstring."""

        metadata = {"render_modes": []}

        def __init__(self, size: int = 7, max_steps: int = 0, flavour: float = 0.05) -> None:
            if size < 5:
                raise ValueError(f"KeyDoor: size must be >= 5, got {size}")
            if not 0.0 <= flavour <= 1.0:
                raise ValueError(
                    f"KeyDoor: flavour (the chance of a flavour message a step) must be in [0, 1], got {flavour}"
                )
            self.size, self.max_steps, self.flavour = size, max_steps or 2 * size * size, flavour
            self.wall_x = size // 2
            self.observation_space = spaces.Box(0.0, 1.0, (5 * size * size + 1,), np.float32)
            self.action_space = spaces.Discrete(4)
            self.rng = np.random.default_rng()
            self._new_episode()

        def _new_episode(self) -> None:
            s, w, rng = self.size, self.wall_x, self.rng
            self.door = (w, int(rng.integers(s)))
            left = [(x, y) for x in range(w) for y in range(s)]
            a, k = rng.choice(len(left), 2, replace=False)
            self.pos, self.key = left[a], left[k]
            self.goal = (int(rng.integers(w + 1, s)), int(rng.integers(s)))
            self.has_key, self.open, self.t = False, False, 0
            self.colour = COLOURS[int(rng.integers(len(COLOURS)))]

        def obs(self) -> np.ndarray:
            s, n = self.size, self.size * self.size
            out = np.zeros(5 * n + 1, np.float32)
            out[self.wall_x * s : (self.wall_x + 1) * s] = 1.0
            if not self.open:
                out[n + self.door[0] * s + self.door[1]] = 1.0
            else:
                out[self.door[0] * s + self.door[1]] = 0.0
            if not self.has_key:
                out[2 * n + self.key[0] * s + self.key[1]] = 1.0
            out[3 * n + self.goal[0] * s + self.goal[1]] = 1.0
            out[4 * n + self.pos[0] * s + self.pos[1]] = 1.0
            out[-1] = float(self.has_key)
            return out

        def reset(self, *, seed: Optional[int] = None, options: Optional[dict] = None):
            super().reset(seed=seed)
            if seed is not None:
                self.rng = np.random.default_rng(seed)
            self._new_episode()
            return self.obs(), {"message": ""}

        def step(self, action: int):
            dx, dy = MOVES[int(action)]
            x, y = self.pos[0] + dx, self.pos[1] + dy
            self.t += 1
            message = ""
            if not (0 <= x < self.size and 0 <= y < self.size):
                message = "You bump into the wall."
            elif (x, y) == self.door and not self.open:
                if self.has_key:
                    self.open, self.pos = True, (x, y)
                    message = f"You unlock the {self.colour} door."
                else:
                    message = f"The {self.colour} door is locked."
            elif x == self.wall_x and (x, y) != self.door:
                message = "You bump into the wall."
            else:
                self.pos = (x, y)
                if self.pos == self.key and not self.has_key:
                    self.has_key, message = True, f"You pick up the {self.colour} key."
            if not message and self.rng.random() < self.flavour:
                message = FLAVOUR[int(self.rng.integers(len(FLAVOUR)))]
            goal = self.pos == self.goal
            return self.obs(), float(goal), goal, self.t >= self.max_steps and not goal, {"message": message}

    KeyDoor.__module__, KeyDoor.__qualname__ = __name__, "KeyDoor"
    globals()["KeyDoor"] = KeyDoor
    return KeyDoor


def __getattr__(name: str) -> Any:
    if name == "KeyDoor":  # built on first use, so importing this module needs no gymnasium
        return _env_class()
    raise AttributeError(name)


def make(**kwargs: Any) -> Any:
    """The gymnasium entry point of `ascent/KeyDoor-v0`."""
    return _env_class()(**kwargs)
