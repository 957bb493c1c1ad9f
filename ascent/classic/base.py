"""The `classic` registry and the one interface every classic algorithm has.

A classic algorithm is registered as a factory `fn(ctx: ClassicContext, params) -> Algorithm`
(`@CLASSIC.register("ppo", params=PPOParams)`); `ascent list classic --params` prints them. The factory
carries `action_spaces` (the frozenset of "discrete" / "continuous" it handles) and may carry
`check(params, num_envs)` raising ValueError on settings that cannot run together. The loop
(`ascent.classic.loop.ClassicTrainer`) only calls the `Algorithm` methods, so no algorithm's name appears in it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import torch

from ascent.classic.envs import VecEnv
from ascent.registry import Registry

CLASSIC: Registry = Registry("classic algorithm")
"""Classic online deep-RL algorithms on Gymnasium environments: name -> factory(ctx, params) -> Algorithm."""


@dataclass
class ClassicContext:
    """What an algorithm is built from."""

    envs: VecEnv
    """The training environments (their observations already normalised when the run asks for it)."""
    total_steps: int
    """Environment steps of the whole run (for schedules: learning rate, clip range, exploration)."""
    seed: int
    """The run's seed (the algorithm seeds its own numpy generator from it)."""
    device: torch.device
    """Where the networks live."""
    dataset: str = ""
    """An offline dataset (`classic.dataset`: a Minari dataset folder or id) for the algorithms that learn from one
    (ascent.offline); empty for online runs."""


class Algorithm(Protocol):
    """One iteration collects some environment steps and learns from them; `act` is the evaluation policy."""

    steps: int
    """Environment steps taken so far."""
    steps_per_iteration: int
    """Environment steps one `iteration` takes."""

    def iteration(self, want_metrics: bool) -> dict[str, float]:
        """Collect and learn (PPO: one rollout and its epochs; DQN/SAC: train_freq steps and their gradient
        steps); the losses and schedules as `{"losses/...": v, "charts/...": v}` when `want_metrics`, else {}."""
        ...

    def act(self, obs: np.ndarray, deterministic: bool) -> np.ndarray:
        """Actions (E, ...) for normalised observations (E, obs_dim), without learning."""
        ...

    def modules(self) -> dict[str, torch.nn.Module]:
        """The networks, by name (their weights go to the checkpoint's model.safetensors)."""
        ...

    def state_dict(self) -> dict[str, Any]:
        """Everything else a resumed run needs: optimizers, counters, generators, buffers."""
        ...

    def load_state_dict(self, state: dict[str, Any]) -> None: ...
