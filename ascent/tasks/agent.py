"""`AgentTask`: what turns a task's rows into agent episodes, and the scripted demonstrations of warm starts.

A task (`ascent.tasks.base.TaskData`) with an `agent` is trained with the agent collector: each row is
an episode's task, `env_task(row)` what the environment's `reset` takes, `make_env()` a fresh environment
per episode. Its rows still carry a `prompt` (the question, for logs and reward functions) and the fields
the rewards read (e.g. `answer`, `evidence`).
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any, Callable, Optional

from ascent.agents.loop import AgentConfig, rollout
from ascent.agents.scripted import ScriptedEngine
from ascent.agents.trajectory import Trajectory
from ascent.envs.base import Env
from ascent.tasks.base import Row

Responder = Callable[[str], str]
"""A scripted agent: the rendered context so far -> the next reply (see `ScriptedEngine`)."""


@dataclass(frozen=True)
class AgentTask:
    """The environment side of an agent task (what `ascent.agents.collector.AgentCollector` and the evaluator
    run episodes with)."""

    make_env: Callable[[], Env]
    """A fresh environment (one per episode; episodes run concurrently)."""
    env_task: Callable[[Row], Any]
    """A dataset row -> the task `env.reset` takes."""
    demonstrator: Optional[Callable[[list[Row], random.Random], Responder]] = None
    """(rows, rng) -> a scripted agent for those rows' episodes: the warm start and the control imitate
    its trajectories (None: the task has no demonstrations)."""
    companions: tuple[Any, ...] = ()
    """Parts of the environment trained beside the policy in the RL step, on its advantages
    (`ascent.trainer.rl.CoTrained`, e.g. search_world's `plackett_luce` retriever)."""


def demonstrations(
    task: AgentTask, rows: list[Row], rng: random.Random, tokenizer: Any, cfg: AgentConfig
) -> list[Trajectory]:
    """One scripted episode per row, token-in/token-out through the agent loop (so the loss mask is 1 on
    the demonstrator's tokens only, 0 on prompts, template pieces and observations)."""
    if task.demonstrator is None:
        raise ValueError(
            "this agent task has no demonstrator to imitate; set warmstart.steps=0 and control.enabled=false"
        )
    from ascent.policy.model import Policy

    engine = ScriptedEngine(tokenizer, task.demonstrator(rows, rng))
    return rollout(
        engine, Policy(model=None, tokenizer=tokenizer), [task.env_task(r) for r in rows], task.make_env, cfg, n=1
    )
