"""Where the RL loop runs: `runtime=local` (one process) or `runtime=ray` (rollout workers as Ray actors).

Both runtimes are an `RLTrainer`: the same `step` (rollouts -> rewards -> advantages -> update) built from
the same registered pieces. The Ray runtime (`AsyncTrainer`) overrides ONE hook, `sample_and_score`: its
scored batches come from rollout workers (`RolloutWorker` actors in a `WorkerPool`) that sample and score
up to `ray.max_staleness` policy versions ahead of the learner, which stays in the driver. Optionally
`RewardWorker` actors score the batches (`ray.reward_workers`) and rollouts are interruptible, continued
under successive policy versions (`ray.partial_rollout_tokens`, `ascent.runtime.partial`), data is streamed
group by group through a store actor (`ray.handoff=sample`, `ascent.runtime.stream`) and weights travel down a
chain of workers (`ray.broadcast=chain`, `ascent.runtime.broadcast`).

    local   ascent.trainer.rl.RLTrainer                 rollouts, rewards and the update one after another
    ray     ascent.runtime.async_trainer.AsyncTrainer   learner here; RolloutWorker actors sample and score
"""

from __future__ import annotations

from typing import Callable

from ascent.config.schema import RunConfig
from ascent.registry import Registry
from ascent.trainer.rl import RLParts, RLTrainer

RUNTIMES: Registry[Callable[[RunConfig, RLParts], RLTrainer]] = Registry("runtime")


@RUNTIMES.register("local", paper=None, fidelity="ascent")
def local_runtime(cfg: RunConfig, parts: RLParts) -> RLTrainer:
    """In-process: rollouts, rewards and the update one after another (the loop of `RLTrainer.step`)."""
    return RLTrainer(cfg, parts)


@RUNTIMES.register("ray", paper=None, fidelity="ascent")
def ray_runtime(cfg: RunConfig, parts: RLParts) -> RLTrainer:
    """Ray: rollout workers sample and score up to ray.max_staleness versions ahead of the learner."""
    import importlib.util

    if importlib.util.find_spec("ray") is None:
        from ascent.typed import ConfigError

        raise ConfigError("runtime=ray needs Ray, which is not installed: pip install 'ascent[ray]' (or make test)")
    from ascent.runtime.async_trainer import AsyncTrainer  # imports Ray only when asked for

    if cfg.ray.handoff == "sample":
        from ascent.runtime.stream import StreamTrainer

        return StreamTrainer(cfg, parts)
    return AsyncTrainer(cfg, parts)


def make_trainer(cfg: RunConfig, parts: RLParts) -> RLTrainer:
    """The trainer of the configured runtime (`runtime=local|ray`)."""
    return RUNTIMES.get(cfg.runtime)(cfg, parts)
