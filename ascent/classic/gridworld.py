"""A RandDistShift-style lava gridworld (the test bed of Skipper: Zhao, Alver, van Seijen, Laroche, Precup & Bengio
2024, "Consciousness-Inspired Spatio-Temporal Abstractions for Better Generalization in Reinforcement Learning",
ICLR 2024, arXiv:2310.00229), in Gymnasium's API, written here after the authors' MiniGrid environment.

A `size` x `size` grid, fully observed. The agent starts in one edge column and must reach the goal in the opposite
edge column; the columns between are filled with lava, random routes from start toward goal are carved out of it,
and lava is then removed at random until exactly `int(difficulty * size * (size - 2))` cells remain lava (the
paper's difficulty: the lava density of the middle columns). Four actions move east / south / west / north (a move
into the border stays put). Entering the goal gives +1 and ends the episode, entering lava ends it with 0; episodes
are cut after `max_steps` (64 for 8 x 8, as the authors').

Observation: three flattened one-hot planes of `size * size` cells (x-major: cell (x, y) is entry `x * size + y`):
lava, goal, agent; float32 of length `3 * size * size`. The agent plane is the last one, so an algorithm that plans
over agent positions (Skipper's checkpoints) reads and writes it as `obs[-size * size:]`.

Tasks: with `layouts > 0` every reset draws one of a fixed pool of `layouts` layouts (made from `layout_seed`),
the paper's "50 training tasks"; with `layouts=0` every reset makes a fresh layout from the reset's seed, the
held-out tasks of a generalisation test (`difficulty` may then differ from training's: out of distribution).
Registered as `ascent/RandDistShift-v0` (8 x 8, difficulty 0.4, 50 layouts from layout seed 0: the paper's
setting) and `ascent/RandDistShift-6x6-v0` (6 x 6, difficulty 0.3: a budget a shared CPU affords, where a random
policy reaches the goal in 2% of episodes against 0.1% on 8 x 8); `gym.make("ascent/RandDistShift-v0", layouts=0,
difficulty=0.55)` gives a held-out family.
"""

from __future__ import annotations

from typing import Any, Optional

import numpy as np

ENV_ID = "ascent/RandDistShift-v0"
SMALL_ID = "ascent/RandDistShift-6x6-v0"
MOVES = ((1, 0), (0, 1), (-1, 0), (0, -1))  # east (x+), south (y+), west (x-), north (y-)


def make_layout(size: int, difficulty: float, rng: np.random.Generator, routes: int = 1) -> dict[str, Any]:
    """One layout: {"lava": (size, size) bool, "start": (x, y), "goal": (x, y)} (x: column). The lava count is
    `int(difficulty * size * (size - 2))` whenever the carved routes leave that many (they always do at the
    difficulties used here)."""
    if rng.random() < 0.5:
        start, goal = (0, int(rng.integers(size))), (size - 1, int(rng.integers(size)))
    else:
        start, goal = (size - 1, int(rng.integers(size))), (0, int(rng.integers(size)))
    max_lava = int(difficulty * size * (size - 2))
    for _ in range(100):
        lava = np.zeros((size, size), bool)
        lava[1 : size - 1, :] = True
        for _ in range(routes):
            _carve(lava, start, goal, rng)
        if lava.sum() >= max_lava:
            break
    cells = np.argwhere(lava)
    drop = rng.permutation(len(cells))[: max(0, len(cells) - max_lava)]
    lava[cells[drop, 0], cells[drop, 1]] = False
    return {"lava": lava, "start": start, "goal": goal}


def _carve(lava: np.ndarray, start: tuple[int, int], goal: tuple[int, int], rng: np.random.Generator) -> None:
    """A random walk from start to goal (runs of 1-3 steps toward the goal, now and then away from it, as the
    authors' `generate_random_path`) whose cells are cleared of lava."""
    size, (x, y), eps = lava.shape[0], start, 0.35
    for _ in range(10 * size * size):
        dx, dy = goal[0] - x, goal[1] - y
        toward = [(int(np.sign(dx)), 0)] * (dx != 0) + [(0, int(np.sign(dy)))] * (dy != 0)
        if not toward:
            return
        if rng.random() > eps:
            step = toward[int(rng.integers(len(toward)))]
        else:
            step = (-toward[0][0], -toward[0][1]) if rng.random() < 0.5 else MOVES[int(rng.integers(4))]
        for _ in range(int(rng.integers(1, 4))):
            x, y = int(np.clip(x + step[0], 0, size - 1)), int(np.clip(y + step[1], 0, size - 1))
            lava[x, y] = False
            if (x, y) == goal:
                return


def _env_class():
    if "RandDistShift" in globals():
        return globals()["RandDistShift"]
    import gymnasium
    from gymnasium import spaces

    class RandDistShift(gymnasium.Env):
        """See the module docstring."""

        metadata = {"render_modes": []}

        def __init__(
            self, size: int = 8, difficulty: float = 0.4, layouts: int = 50, layout_seed: int = 0, max_steps: int = 0
        ) -> None:
            if size < 3:
                raise ValueError(f"RandDistShift: size must be >= 3, got {size}")
            if not 0.0 <= difficulty < 1.0:
                raise ValueError(f"RandDistShift: difficulty (lava density) must be in [0, 1), got {difficulty}")
            if layouts < 0:
                raise ValueError(f"RandDistShift: layouts must be >= 0 (0: a fresh layout every reset), got {layouts}")
            self.size, self.difficulty, self.max_steps = size, difficulty, max_steps or size * size
            rng = np.random.default_rng(layout_seed)
            self.pool = [make_layout(size, difficulty, rng) for _ in range(layouts)]
            self.observation_space = spaces.Box(0.0, 1.0, (3 * size * size,), np.float32)
            self.action_space = spaces.Discrete(4)
            self.rng = np.random.default_rng()
            self.layout: dict[str, Any] = self.pool[0] if self.pool else make_layout(size, difficulty, self.rng)
            self.pos, self.t = self.layout["start"], 0

        def obs(self) -> np.ndarray:
            n = self.size * self.size
            out = np.zeros(3 * n, np.float32)
            out[:n] = self.layout["lava"].reshape(-1)
            gx, gy = self.layout["goal"]
            out[n + gx * self.size + gy] = 1.0
            out[2 * n + self.pos[0] * self.size + self.pos[1]] = 1.0
            return out

        def reset(self, *, seed: Optional[int] = None, options: Optional[dict] = None):
            super().reset(seed=seed)
            if seed is not None:
                self.rng = np.random.default_rng(seed)
            if self.pool:
                self.layout = self.pool[int(self.rng.integers(len(self.pool)))]
            else:
                self.layout = make_layout(self.size, self.difficulty, self.rng)
            self.pos, self.t = self.layout["start"], 0
            return self.obs(), {}

        def step(self, action: int):
            dx, dy = MOVES[int(action)]
            x = min(max(self.pos[0] + dx, 0), self.size - 1)
            y = min(max(self.pos[1] + dy, 0), self.size - 1)
            self.pos, self.t = (x, y), self.t + 1
            goal, lava = self.pos == self.layout["goal"], bool(self.layout["lava"][x, y])
            return self.obs(), float(goal), goal or lava, self.t >= self.max_steps and not (goal or lava), {}

    RandDistShift.__module__, RandDistShift.__qualname__ = __name__, "RandDistShift"
    globals()["RandDistShift"] = RandDistShift
    return RandDistShift


def __getattr__(name: str) -> Any:
    if name == "RandDistShift":  # the class is built on first use, so importing this module needs no gymnasium
        return _env_class()
    raise AttributeError(name)


def make(**kwargs: Any) -> Any:
    """The gymnasium entry point of `ascent/RandDistShift-v0`."""
    return _env_class()(**kwargs)


def register() -> None:
    """Register ascent's environments with gymnasium: `ascent/RandDistShift-v0`, `ascent/RandDistShift-6x6-v0` and
    `ascent/KeyDoor-v0`, `ascent/DecoyPoint-v0` (once; a no-op when gymnasium is not installed)."""
    try:
        import gymnasium
    except ImportError:
        return
    if ENV_ID not in gymnasium.envs.registry:
        gymnasium.register(ENV_ID, entry_point="ascent.classic.gridworld:make")
        gymnasium.register(SMALL_ID, entry_point="ascent.classic.gridworld:make", kwargs={"size": 6, "difficulty": 0.3})
        gymnasium.register("ascent/KeyDoor-v0", entry_point="ascent.classic.keydoor:make")
    if "ascent/DecoyPoint-v0" not in gymnasium.envs.registry:  # RPG's point mass (ascent/classic/pointmass.py)
        gymnasium.register("ascent/DecoyPoint-v0", entry_point="ascent.classic.pointmass:make")


def shortest_path(layout: dict[str, Any], source: tuple[int, int], target: tuple[int, int]) -> Optional[int]:
    """Moves from source to target that never enter lava or the goal on the way (breadth-first), None if none."""
    size, lava = layout["lava"].shape[0], layout["lava"]
    frontier, seen, d = [source], {source}, 0
    while frontier:
        if target in frontier:
            return d
        nxt = []
        for x, y in frontier:
            if (x, y) != source and (lava[x, y] or (x, y) == layout["goal"]):
                continue
            for dx, dy in MOVES:
                c = (min(max(x + dx, 0), size - 1), min(max(y + dy, 0), size - 1))
                if c not in seen:
                    seen.add(c)
                    nxt.append(c)
        frontier, d = nxt, d + 1
    return None
