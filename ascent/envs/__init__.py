"""Environments for multi-turn agents: the `Env` interface and `check_env`, tools and tool-call parsing,
the `ToolEnv` base, and the built-in `search_world`."""

from ascent.envs.base import Env, EnvCheckError, Observation, StepResult, check_env
from ascent.envs.tool_env import ToolEnv, parse_answer
from ascent.envs.tools import Tool, ToolCall, ToolResult, ToolSet, format_results, parse_tool_calls, tool

__all__ = [
    "Env",
    "EnvCheckError",
    "Observation",
    "StepResult",
    "Tool",
    "ToolCall",
    "ToolEnv",
    "ToolResult",
    "ToolSet",
    "check_env",
    "format_results",
    "parse_answer",
    "parse_tool_calls",
    "tool",
]
