"""`ToolEnv`: the common shape of tool-using environments. Each model turn either calls tools (every
`<tool_call>` block runs, concurrently; the results come back as one tool message) or ends the episode
with a final answer `<answer>...</answer>`. A turn with neither gets a reminder of the syntax.

Subclasses say what the first message is (`prompt`) and how an answer scores (`score`).

>>> from ascent.envs.tools import ToolSet, tool
>>> def double(x: int) -> int:
...     '''Twice x.'''
...     return 2 * x
>>> class Doubling(ToolEnv):
...     def prompt(self, task):
...         return Observation(text=f"What is twice {task}? " + self.tools.describe())
...     def score(self, answer):
...         return float(answer == str(2 * self.task)), {}
>>> env = Doubling(ToolSet([tool(double)]))
>>> _ = env.reset(21)
>>> env.step('<tool_call>{"name": "double", "arguments": {"x": 21}}</tool_call>').observation
'<tool_response>\\n42\\n</tool_response>'
>>> r = env.step("<answer>42</answer>")
>>> r.reward, r.done, r.info["num_tool_calls"]
(1.0, True, 1)
"""

from __future__ import annotations

import re
from typing import Any, Optional

from ascent.envs.base import Env, Observation, StepResult
from ascent.envs.tools import ToolResult, ToolSet, format_results

ANSWER_OPEN, ANSWER_CLOSE = "<answer>", "</answer>"
_ANSWER = re.compile(re.escape(ANSWER_OPEN) + r"(.*?)" + re.escape(ANSWER_CLOSE), re.DOTALL)
NO_ACTION = (
    "Error: no tool call and no answer found. "
    'Call a tool with <tool_call>{"name": ..., "arguments": {...}}</tool_call> '
    "or give your final answer as <answer>...</answer>."
)


def parse_answer(text: str) -> Optional[str]:
    """The stripped text of the first `<answer>...</answer>` block, or None.

    >>> parse_answer("I think <answer> Velmor </answer>"), parse_answer("no answer")
    ('Velmor', None)
    """
    m = _ANSWER.search(text)
    return None if m is None else m.group(1).strip()


class ToolEnv(Env):
    """A tool-using environment: tool calls until a final `<answer>`. Subclasses implement `prompt` and
    `score`; `self.calls` holds every `ToolResult` of the episode."""

    def __init__(self, tools: ToolSet) -> None:
        self.tools = tools
        self.task: Any = None
        self.calls: list[ToolResult] = []
        self.turns = 0
        self.done = False

    def prompt(self, task: Any) -> Observation:
        """The first user message for `task`."""
        raise NotImplementedError(f"{type(self).__name__} must implement prompt(task)")

    def score(self, answer: str) -> tuple[float, dict[str, Any]]:
        """(reward, info) of the final `answer` for `self.task`."""
        raise NotImplementedError(f"{type(self).__name__} must implement score(answer)")

    def final_answer(self, action: str) -> Optional[str]:
        """The final answer `action` gives, or None (a tool turn): `parse_answer` unless a subclass accepts more."""
        return parse_answer(action)

    def reset(self, task: Any) -> Observation:
        self.task, self.calls, self.turns, self.done = task, [], 0, False
        return self.prompt(task)

    def step(self, action: str) -> StepResult:
        if self.task is None:
            raise RuntimeError(f"{type(self).__name__}.step called before reset")
        if self.done:
            raise RuntimeError(f"{type(self).__name__}.step called after the episode ended; call reset")
        self.turns += 1
        answer = self.final_answer(action)
        if answer is not None:
            self.done = True
            reward, info = self.score(answer)
            return StepResult("", reward, True, {**self.summary(), "answer": answer, **info})
        results = self.tools.run(action)
        self.calls += results
        info = {"tool_calls": len(results), "tool_errors": sum(not r.ok for r in results)}
        return StepResult(format_results(results) if results else NO_ACTION, 0.0, False, info)

    def summary(self) -> dict[str, Any]:
        """Episode counters for the final step's info."""
        return {
            "turns": self.turns,
            "num_tool_calls": len(self.calls),
            "num_tool_errors": sum(not r.ok for r in self.calls),
            "tool_call_names": [r.name for r in self.calls],
        }
