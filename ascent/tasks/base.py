"""What every task shares: the `TASKS` registry, `TaskData` (what a run needs from its task), `DataError`,
rows and teachers, and `load_task`.

A task is a function `fn(cfg: DataConfig, seed, params) -> TaskData` registered with its own frozen params
dataclass (`TASKS.register("addition", params=AdditionParams)`), set in the spec `data.task`:
`data.task=addition(digits=3)` on the command line, `task: {addition: {digits: 3}}` in YAML. The generic
fields of `DataConfig` (num_train, num_eval, train/eval files, chat template, split seed) reach it as `cfg`.

A row is a dict with a `prompt` field; its other fields reach reward functions as keyword arguments, and
an `answer` field is what the warm start imitates when the task has no teacher of its own.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any, Callable, Optional

from ascent.config.schema import DataConfig
from ascent.registry import Piece, Registry
from ascent.typed import parse_spec

Row = dict[str, Any]
Teacher = Callable[[Row, random.Random], str]
TASKS: Registry = Registry("task")
"""Every task, registered where it is defined (`ascent.tasks` imports them all)."""


class DataError(ValueError):
    """A dataset problem the user can fix."""


@dataclass
class TaskData:
    """Everything a run needs from its task."""

    train: list[Row]
    eval: list[Row]
    reward: str
    teacher: Optional[Teacher] = None
    lenient: Optional[str] = None
    """A lenient grader (a reward spec, e.g. `last_number`) that evaluation reports next to the reward's strict
    accuracy, so that a gain from learning the output format alone shows as such; None: the task has none."""
    tokenizer: Any = None
    """Tokenizer for scratch models (None: the model brings its own)."""
    agent: Any = None
    """An `ascent.tasks.agent.AgentTask` for agent tasks (episodes through an environment; RL with the agent
    collector, warm start on its demonstrator's trajectories); None for single-turn tasks."""


def answer_teacher(row: Row, rng: random.Random) -> str:
    """Imitate the row's `answer` field."""
    if "answer" not in row:
        raise DataError(
            "the warm start imitates each row's 'answer' field, and a row has none; add it or set warmstart.steps=0"
        )
    return str(row["answer"])


def split_rows(rows: list[Row], cfg: DataConfig) -> tuple[list[Row], list[Row]]:
    """(train, held-out): the first data.num_eval rows are held out, and no training row repeats a held-out prompt."""
    held = rows[: cfg.num_eval]
    seen = {r["prompt"] for r in held}
    return [r for r in rows[cfg.num_eval :] if r["prompt"] not in seen], held


def task_piece(cfg: DataConfig) -> Piece:
    """The task a config names, resolved with its checked parameters: `jsonl` when `data.train` is set,
    else the spec `data.task`. An unknown name raises UnknownNameError (a KeyError) listing the valid ones,
    bad parameters a ConfigError."""
    spec = "jsonl" if cfg.train is not None else cfg.task
    TASKS.entry(parse_spec(spec)[0])
    return TASKS.resolve(spec, key="data.task")


def load_task(cfg: DataConfig, seed: int) -> TaskData:
    """The task a config names (`task_piece`), built for `seed`."""
    return task_piece(cfg)(cfg, seed)


def fit_to_context(
    task: TaskData, encode: Callable[[str], list[int]], positions: Optional[int], max_new_tokens: int
) -> tuple[TaskData, Optional[str]]:
    """The task without the rows whose prompt leaves no room in the model's `positions` for `max_new_tokens`
    (the prompt alone when max_new_tokens does not fit either), and a line saying how many were left out (None
    when none). A position past the model's context is extrapolated silently (RoPE) or fails mid-run, so such
    prompts are counted and dropped here; a task left with no training or held-out row is a DataError.
    Agent tasks (episodes, no single prompt) are returned as they are."""
    if task.agent is not None or not positions:
        return task, None
    room = positions - max_new_tokens if positions > max_new_tokens else positions
    fits = lambda row: "prompt" not in row or len(encode(row["prompt"])) <= room  # noqa: E731
    train, held = [r for r in task.train if fits(r)], [r for r in task.eval if fits(r)]
    dropped = (len(task.train) - len(train), len(task.eval) - len(held))
    if not any(dropped):
        return task, None
    note = (
        f"prompts longer than the model's context left out: {dropped[0]} of {len(task.train)} training and "
        f"{dropped[1]} of {len(task.eval)} held-out (over {room} tokens: {positions} positions"
        + (f" - rollout.max_new_tokens {max_new_tokens})" if room < positions else ")")
    )
    if not train or not held:
        raise DataError(f"{note}; no {'training' if not train else 'held-out'} prompt fits: shorten the prompts")
    from dataclasses import replace

    return replace(task, train=train, eval=held), note
