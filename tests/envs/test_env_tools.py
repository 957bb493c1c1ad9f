"""Tools: schema from hints + docstring, parsing, validation, errors as observations, concurrency, timeouts."""

from __future__ import annotations

import time
from typing import Literal, Optional

import pytest

from ascent.envs.tools import ToolSet, format_results, parse_tool_calls, tool, truncate, validate


def lookup(
    key: str, limit: int = 3, mode: Literal["exact", "fuzzy"] = "exact", tags: Optional[list[str]] = None
) -> dict:
    """Look a key up.

    Args:
        key: what to look up.
        limit (int): at most this many
            results.
    """
    return {"key": key, "limit": limit, "mode": mode, "tags": tags}


def boom(x: int) -> int:
    """Always fails."""
    raise ZeroDivisionError("division by zero")


def call(name: str, args: str) -> str:
    return f'<tool_call>{{"name": "{name}", "arguments": {args}}}</tool_call>'


@pytest.fixture
def tools() -> ToolSet:
    return ToolSet([tool(lookup), tool(boom)], timeout=2.0, max_output_chars=200)


def test_schema_from_hints_and_docstring(tools):
    t = tools["lookup"]
    assert t.description == "Look a key up."
    assert t.parameters == {
        "type": "object",
        "properties": {
            "key": {"type": "string", "description": "what to look up."},
            "limit": {"type": "integer", "description": "at most this many results."},
            "mode": {"enum": ["exact", "fuzzy"]},
            "tags": {"type": ["array", "null"], "items": {"type": "string"}},
        },
        "required": ["key"],
        "additionalProperties": False,
    }
    assert t.spec()["function"]["name"] == "lookup"
    declared = tool(
        lambda q: q,
        name="echo",
        parameters={"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]},
    )
    assert declared.name == "echo" and declared.parameters["required"] == ["q"]
    with pytest.raises(TypeError, match="no type hint"):
        tool(lambda q: q)


def test_good_call_runs(tools):
    [r] = tools.run("Let me look. " + call("lookup", '{"key": "a", "tags": ["x"], "mode": "fuzzy"}'))
    assert r.ok and r.error is None and r.name == "lookup"
    assert r.output == '{"key": "a", "limit": 3, "mode": "fuzzy", "tags": ["x"]}'
    [r] = tools.run(
        '<tool_call>{"name": "lookup", "arguments": "{\\"key\\": \\"b\\"}"}</tool_call>'
    )  # OpenAI-style string
    assert r.ok and '"key": "b"' in r.output


def test_parsing_several_calls_and_no_call():
    text = call("a", "{}") + " then " + call("b", '{"x": [1, 2]}')
    assert [(c.name, c.arguments) for c in parse_tool_calls(text)] == [("a", {}), ("b", {"x": [1, 2]})]
    assert parse_tool_calls("just text") == []


@pytest.mark.parametrize(
    "text, kind, message",
    [
        ('<tool_call>{"name": "lookup", "arguments": {"key": }</tool_call>', "malformed", "invalid JSON"),
        ('<tool_call>["lookup"]</tool_call>', "malformed", 'expected {"name"'),
        ('<tool_call>{"name": "lookup", "arguments": [1]}</tool_call>', "malformed", "arguments must be a JSON object"),
        ('<tool_call>{"name": "lookup", "arguments": {"key": "a"}}', "malformed", "without a closing </tool_call>"),
        (call("nope", "{}"), "unknown_tool", "unknown tool 'nope'; available tools: lookup, boom"),
        (call("lookup", "{}"), "bad_arguments", "missing required argument 'key'"),
        (call("lookup", '{"key": 1}'), "bad_arguments", "key must be of type string, got int"),
        (call("lookup", '{"key": "a", "limit": true}'), "bad_arguments", "limit must be of type integer, got bool"),
        (call("lookup", '{"key": "a", "mode": "x"}'), "bad_arguments", "mode must be one of ['exact', 'fuzzy']"),
        (call("lookup", '{"key": "a", "tags": [1]}'), "bad_arguments", "tags[0] must be of type string"),
        (call("lookup", '{"key": "a", "colour": 1}'), "bad_arguments", "unknown argument 'colour'"),
        (call("boom", '{"x": 1}'), "raised", "tool 'boom' raised ZeroDivisionError: division by zero"),
    ],
)
def test_errors_become_observations(tools, text, kind, message):
    [r] = tools.run(text)
    assert not r.ok and r.error == kind
    assert r.output.startswith("Error: ") and message in r.output


def test_hanging_tool_times_out_and_others_still_answer():
    def hang(seconds: float) -> str:
        """Sleeps."""
        time.sleep(seconds)
        return "woke"

    tools = ToolSet([tool(hang), tool(lookup)], timeout=0.2)
    start = time.perf_counter()
    slow, fast = tools.run(call("hang", '{"seconds": 30}') + call("lookup", '{"key": "k"}'))
    assert time.perf_counter() - start < 1.0
    assert slow.error == "timeout" and slow.output == "Error: tool 'hang' timed out after 0.2 s"
    assert fast.ok
    own = ToolSet([tool(hang, timeout=0.05)], timeout=10.0)  # a tool's own timeout overrides the set's
    assert own.run(call("hang", '{"seconds": 5}'))[0].output.endswith("timed out after 0.05 s")


def test_calls_in_one_turn_run_concurrently():
    def nap(seconds: float) -> str:
        """Sleeps then answers."""
        time.sleep(seconds)
        return f"slept {seconds}"

    async_calls = []

    async def anap(seconds: float) -> str:
        """Async sleep."""
        import asyncio

        await asyncio.sleep(seconds)
        async_calls.append(seconds)
        return "async"

    tools = ToolSet([tool(nap), tool(anap)])
    sleeps = [0.3, 0.3, 0.3, 0.3]
    text = "".join(call("nap" if i % 2 else "anap", f'{{"seconds": {s}}}') for i, s in enumerate(sleeps))
    start = time.perf_counter()
    results = tools.run(text)
    wall = time.perf_counter() - start
    assert all(r.ok for r in results) and [r.output for r in results] == ["async", "slept 0.3", "async", "slept 0.3"]
    assert wall < 0.6 * sum(sleeps), f"calls ran one after another: {wall:.2f} s for sleeps summing to {sum(sleeps)} s"
    assert async_calls == [0.3, 0.3]


def test_limits_on_output_and_calls():
    def big() -> str:
        """A long output."""
        return "x" * 1000

    limited = ToolSet([tool(big)], max_output_chars=50, max_calls_per_turn=2)
    r1, r2, r3 = limited.run(call("big", "{}") * 3)
    assert r1.output == "x" * 50 + "...[truncated 950 chars]"
    assert r2.ok and not r3.ok and r3.error == "too_many_calls"
    assert truncate("short", 10) == "short"
    assert format_results([r1, r3]).count("<tool_response>\n") == 2
    with pytest.raises(ValueError, match="duplicate tool names"):
        ToolSet([tool(big), tool(big)])


def test_validate_nested():
    schema = {
        "type": "object",
        "properties": {"p": {"type": "object", "properties": {"q": {"type": "number"}}, "required": ["q"]}},
    }
    assert validate({"p": {"q": 1.5}}, schema) == []
    assert validate({"p": {"q": "no"}}, schema) == ["p.q must be of type number, got str"]
    assert validate([], schema) == ["arguments must be of type object, got list"]
