"""The environment interface of multi-turn agents, and `check_env`, which validates a user environment.

An environment is reset with a task and then stepped with the model's text, one model turn per step:

    obs = env.reset(task)                     # Observation: the first user message (+ optional system prompt)
    result = env.step("<tool_call>...</tool_call>")   # StepResult(observation, reward, done, info)

Async: the interface is synchronous (easy to write) and async-friendly. The agent loop only ever awaits
`areset` / `astep`; their default implementations run `reset` / `step` in a worker thread
(`asyncio.to_thread`), so the steps of a batch of episodes (tool calls, I/O) overlap. An environment
that is natively asynchronous (an HTTP sandbox, a browser) overrides `areset` / `astep` instead; its
sync methods may then raise NotImplementedError.

>>> class Echo(Env):
...     def reset(self, task):
...         return Observation(text=f"Say {task}.")
...     def step(self, action):
...         return StepResult(observation="", reward=float(action.strip() == "hi"), done=True)
>>> env = Echo()
>>> env.reset("hi").text
'Say hi.'
>>> env.step("hi")
StepResult(observation='', reward=1.0, done=True, info={})
>>> check_env(Echo(), "hi")  # raises EnvCheckError listing every problem found; None when fine
"""

from __future__ import annotations

import asyncio
import math
import warnings
from dataclasses import dataclass, field
from typing import Any, Optional


@dataclass(frozen=True)
class Observation:
    """What `reset` returns: the first user message of the conversation."""

    text: str
    """The user message (the task, and how to use the tools)."""
    system: Optional[str] = None
    """A system prompt for the conversation (None: the chat template's default)."""
    info: dict[str, Any] = field(default_factory=dict)
    """Anything the environment wants to record about the episode's start."""


@dataclass(frozen=True)
class StepResult:
    """What `step` returns after one model turn."""

    observation: str
    """The text the model sees next (a tool message); ignored when `done`."""
    reward: float
    """Reward for this step (the episode's return is the sum over steps)."""
    done: bool
    """The episode is over (final answer given, or the environment ended it)."""
    info: dict[str, Any] = field(default_factory=dict)
    """Step diagnostics (tool calls, documents opened, correctness, ...); logged, never trained on."""


class Env:
    """Base class of environments: override `reset` and `step` (or `areset` and `astep`)."""

    def reset(self, task: Any) -> Observation:
        """Start an episode on `task`; returns the first user message."""
        raise NotImplementedError(f"{type(self).__name__} must implement reset(task) or areset(task)")

    def step(self, action: str) -> StepResult:
        """Apply the model's turn `action` (its text); returns the next observation, reward and done."""
        raise NotImplementedError(f"{type(self).__name__} must implement step(action) or astep(action)")

    async def areset(self, task: Any) -> Observation:
        """`reset` in a worker thread; override for natively async environments."""
        return await asyncio.to_thread(self.reset, task)

    async def astep(self, action: str) -> StepResult:
        """`step` in a worker thread; override for natively async environments."""
        return await asyncio.to_thread(self.step, action)


class EnvCheckError(ValueError):
    """`check_env` found problems; the message lists all of them."""


PROBE_ACTIONS = (
    "",
    "I am not sure.",
    "<tool_call>{not json</tool_call>",
    '<tool_call>{"name": "no_such_tool", "arguments": {}}</tool_call>',
    "<tool_call>",
    "<answer></answer>",
)
"""Turns `check_env` feeds an environment: none of them may crash it."""


def check_env(env: Env, task: Any, actions: tuple[str, ...] = PROBE_ACTIONS) -> None:
    """Validate a user environment the way the agent loop will use it (after SB3's `check_env`).

    Resets on `task`, then feeds each of `actions` (malformed and adversarial turns by default) as the
    first step of a fresh episode, through the async path the loop uses. Raises `EnvCheckError` listing
    every problem (wrong return types, non-finite rewards, exceptions on bad model text); warns on soft
    problems (a reset that is not deterministic).
    """
    problems: list[str] = []
    name = type(env).__name__
    if not isinstance(env, Env):
        for method in ("areset", "astep"):
            if not callable(getattr(env, method, None)):
                problems.append(
                    f"{name} has no {method}(); subclass ascent.envs.Env (it provides async wrappers of reset/step)"
                )
        if problems:
            raise EnvCheckError(_report(name, problems))
    first = _check_reset(env, task, problems)
    if first is not None:
        again = _check_reset(env, task, [])
        if again is not None and again.text != first.text:
            warnings.warn(
                f"{name}.reset({task!r}) returned different text on two calls; episodes will not be reproducible",
                stacklevel=2,
            )
        for action in actions:
            if _check_reset(env, task, problems) is None:
                break
            _check_step(env, action, problems)
    if problems:
        raise EnvCheckError(_report(name, problems))


def _report(name: str, problems: list[str]) -> str:
    return f"{name} failed check_env ({len(problems)} problem(s)):\n" + "\n".join(f"  - {p}" for p in problems)


def _check_reset(env: Env, task: Any, problems: list[str]) -> Optional[Observation]:
    name = type(env).__name__
    try:
        obs = asyncio.run(env.areset(task))
    except Exception as e:  # noqa: BLE001 - reported, not swallowed
        problems.append(f"{name}.reset({task!r}) raised {type(e).__name__}: {e}")
        return None
    if not isinstance(obs, Observation):
        problems.append(f"{name}.reset must return ascent.envs.Observation, got {type(obs).__name__}")
        return None
    if not isinstance(obs.text, str) or not obs.text:
        problems.append(f"{name}.reset returned an Observation whose text is not a non-empty str ({obs.text!r})")
    if obs.system is not None and not isinstance(obs.system, str):
        problems.append(f"Observation.system must be a str or None, got {type(obs.system).__name__}")
    return obs


def _check_step(env: Env, action: str, problems: list[str]) -> None:
    name, where = type(env).__name__, f"step({action!r})"
    try:
        res = asyncio.run(env.astep(action))
    except Exception as e:  # noqa: BLE001 - reported, not swallowed
        problems.append(
            f"{name}.{where} raised {type(e).__name__}: {e} "
            "(bad model text must become an error observation, not an exception)"
        )
        return
    if not isinstance(res, StepResult):
        problems.append(f"{name}.{where} must return ascent.envs.StepResult, got {type(res).__name__}")
        return
    if not isinstance(res.observation, str):
        problems.append(f"{name}.{where}: observation must be a str, got {type(res.observation).__name__}")
    if isinstance(res.reward, bool) or not isinstance(res.reward, (int, float)) or not math.isfinite(res.reward):
        problems.append(f"{name}.{where}: reward must be a finite float, got {res.reward!r}")
    if not isinstance(res.done, bool):
        problems.append(f"{name}.{where}: done must be a bool, got {type(res.done).__name__}")
    if not isinstance(res.info, dict):
        problems.append(f"{name}.{where}: info must be a dict, got {type(res.info).__name__}")
