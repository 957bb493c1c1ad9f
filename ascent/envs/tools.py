"""Tools: Python functions with a JSON schema, called from the model's text.

Call syntax (Qwen2.5 / Hermes style, which most open chat templates use): one JSON object per call,

    <tool_call>{"name": "search", "arguments": {"query": "Kalo Miran"}}</tool_call>

several per turn allowed. `ToolSet.run(text)` parses every call in a turn, validates its arguments against
the tool's schema, runs the calls concurrently (one daemon thread each, so a hanging tool cannot block
the others or the interpreter's exit) and returns one `ToolResult` per call. Nothing the model writes can
raise: a malformed call, an unknown tool, bad arguments, a tool that raises or exceeds its timeout each
become an error result whose text the model reads. Outputs are truncated to `max_output_chars` with a
marker.

>>> def add(a: int, b: int = 0) -> int:
...     '''Add two integers.
...
...     Args:
...         a: the first term.
...         b: the second term.
...     '''
...     return a + b
>>> tools = ToolSet([tool(add)])
>>> tools["add"].parameters["required"], tools["add"].parameters["properties"]["a"]
(['a'], {'type': 'integer', 'description': 'the first term.'})
>>> [r.output for r in tools.run('<tool_call>{"name": "add", "arguments": {"a": 2, "b": 3}}</tool_call>')]
['5']
>>> tools.run('<tool_call>{"name": "add", "arguments": {"a": "2"}}</tool_call>')[0].output
"Error: bad arguments for tool 'add': a must be of type integer, got str"
"""

from __future__ import annotations

import asyncio
import inspect
import json
import re
import threading
import time
import types
import typing
from dataclasses import dataclass, field
from typing import Any, Callable, Optional, Union

CALL_OPEN, CALL_CLOSE = "<tool_call>", "</tool_call>"
REPORT_OPEN, REPORT_CLOSE = "<report>", "</report>"
"""The evolving report of a workspace-reconstructed episode (`agent.context=workspace`, IterResearch):
the policy writes it in each turn, the next round's context carries it (`ascent.agents.workspace`)."""
_CALL = re.compile(re.escape(CALL_OPEN) + r"(.*?)" + re.escape(CALL_CLOSE), re.DOTALL)
_JSON_TYPES = {
    str: "string",
    int: "integer",
    float: "number",
    bool: "boolean",
    list: "array",
    dict: "object",
    tuple: "array",
}


@dataclass(frozen=True)
class Tool:
    """A callable the model may call, with the JSON schema of its arguments."""

    name: str
    fn: Callable[..., Any]
    description: str
    parameters: dict[str, Any]
    """JSON schema of the arguments: {"type": "object", "properties": {...}, "required": [...]}."""
    timeout: Optional[float] = None
    """Seconds before a call is abandoned (None: the ToolSet's timeout)."""

    def spec(self) -> dict[str, Any]:
        """The OpenAI-style function spec (what `apply_chat_template(tools=...)` accepts)."""
        return {
            "type": "function",
            "function": {"name": self.name, "description": self.description, "parameters": self.parameters},
        }


def tool(
    fn: Optional[Callable[..., Any]] = None,
    *,
    name: Optional[str] = None,
    description: Optional[str] = None,
    parameters: Optional[dict[str, Any]] = None,
    timeout: Optional[float] = None,
) -> Any:
    """Make a `Tool` from a function; usable as `tool(fn)`, `@tool` or `@tool(timeout=2.0)`.

    The schema comes from the type hints (str, int, float, bool, list[X], dict, Optional[X], Literal[...])
    and the Google-style `Args:` section of the docstring, unless `parameters` declares it. Parameters
    without a default are required; unknown arguments are rejected.
    """

    def make(f: Callable[..., Any]) -> Tool:
        doc_desc, arg_docs = parse_docstring(inspect.getdoc(f) or "")
        schema = parameters if parameters is not None else schema_from_signature(f, arg_docs)
        return Tool(
            name=name or f.__name__, fn=f, description=description or doc_desc, parameters=schema, timeout=timeout
        )

    return make(fn) if fn is not None else make


def parse_docstring(doc: str) -> tuple[str, dict[str, str]]:
    """(description, {argument: description}) from a Google-style docstring (sections `Args:`, `Returns:`...)."""
    lines = doc.splitlines()
    cut = next((i for i, line in enumerate(lines) if re.fullmatch(r"[A-Z]\w*:", line.strip())), len(lines))
    desc = " ".join(" ".join(lines[:cut]).split())
    if cut == len(lines) or lines[cut].strip() not in ("Args:", "Arguments:", "Parameters:"):
        return desc, {}
    args: dict[str, str] = {}
    current, indent = None, None
    for line in lines[cut + 1 :]:
        level = len(line) - len(line.lstrip())
        if not line.strip():
            continue
        if level == 0:  # the next section
            break
        m = re.match(r"(\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$", line.strip())
        if m and indent in (None, level):
            indent, current = level, m.group(1)
            args[current] = m.group(2)
        elif current is not None:  # a continuation line
            args[current] = f"{args[current]} {line.strip()}".strip()
    return desc, args


def json_type(hint: Any) -> dict[str, Any]:
    """The JSON schema of a Python type hint."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is typing.Literal:
        return {"enum": list(args)}
    if origin in (Union, types.UnionType):
        rest = [a for a in args if a is not type(None)]
        base = json_type(rest[0]) if len(rest) == 1 else {"anyOf": [json_type(a) for a in rest]}
        return base if len(rest) == len(args) else _nullable(base)
    if origin in (list, tuple) or hint in (list, tuple):
        return {"type": "array", "items": json_type(args[0])} if args and args[0] is not Ellipsis else {"type": "array"}
    if origin is dict or hint is dict:
        return {"type": "object"}
    if hint in _JSON_TYPES:
        return {"type": _JSON_TYPES[hint]}
    raise TypeError(f"cannot derive a JSON schema for type hint {hint!r}; pass parameters=... to tool()")


def _nullable(schema: dict[str, Any]) -> dict[str, Any]:
    """`schema` that also accepts null (Optional[X])."""
    if "enum" in schema:
        return {**schema, "enum": [*schema["enum"], None]}
    if "anyOf" in schema:
        return {**schema, "anyOf": [*schema["anyOf"], {"type": "null"}]}
    return {**schema, "type": [schema["type"], "null"]}


def schema_from_signature(fn: Callable[..., Any], arg_docs: dict[str, str]) -> dict[str, Any]:
    """JSON schema of `fn`'s keyword arguments from its type hints (every parameter needs one)."""
    hints = typing.get_type_hints(fn)
    props: dict[str, Any] = {}
    required: list[str] = []
    for p in inspect.signature(fn).parameters.values():
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            continue
        if p.name not in hints:
            raise TypeError(
                f"tool {fn.__name__}: parameter {p.name!r} has no type hint; add one or pass parameters=..."
            )
        props[p.name] = {
            **json_type(hints[p.name]),
            **({"description": arg_docs[p.name]} if p.name in arg_docs else {}),
        }
        if p.default is inspect.Parameter.empty:
            required.append(p.name)
    return {"type": "object", "properties": props, "required": required, "additionalProperties": False}


_TYPE_CHECKS: dict[str, Callable[[Any], bool]] = {
    "string": lambda v: isinstance(v, str),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
    "array": lambda v: isinstance(v, list),
    "object": lambda v: isinstance(v, dict),
    "null": lambda v: v is None,
}


def validate(value: Any, schema: dict[str, Any], path: str = "arguments") -> list[str]:
    """Errors of `value` against the subset of JSON schema that `tool` produces (type, properties,
    required, additionalProperties, items, enum, anyOf); [] when valid."""
    if "anyOf" in schema:
        return (
            []
            if any(not validate(value, s, path) for s in schema["anyOf"])
            else [f"{path} matches none of the allowed types"]
        )
    if "enum" in schema and value not in schema["enum"]:
        return [f"{path} must be one of {schema['enum']}, got {value!r}"]
    kinds = schema.get("type", [])
    kinds = [kinds] if isinstance(kinds, str) else kinds
    if kinds and not any(_TYPE_CHECKS[k](value) for k in kinds):
        return [f"{path} must be of type {' or '.join(kinds)}, got {type(value).__name__}"]
    kind = next((k for k in kinds if _TYPE_CHECKS[k](value)), None)
    errors: list[str] = []
    if kind == "array" and "items" in schema:
        for i, v in enumerate(value):
            errors += validate(v, schema["items"], f"{path}[{i}]")
    if kind == "object":
        props = schema.get("properties", {})
        errors += [f"missing required argument {k!r}" for k in schema.get("required", []) if k not in value]
        if schema.get("additionalProperties") is False:
            errors += [
                f"unknown argument {k!r} (expected: {', '.join(props) or 'none'})" for k in value if k not in props
            ]
        for k, v in value.items():
            if k in props:
                errors += validate(v, props[k], k if path == "arguments" else f"{path}.{k}")
    return errors


@dataclass(frozen=True)
class ToolCall:
    """One parsed call."""

    name: str
    arguments: dict[str, Any]


@dataclass(frozen=True)
class CallError:
    """A `<tool_call>` block that could not be parsed; `message` is shown to the model."""

    message: str


def parse_tool_calls(text: str) -> list[Union[ToolCall, CallError]]:
    """Every `<tool_call>{json}</tool_call>` block of `text`, in order; an unclosed trailing block is a
    `CallError`. `arguments` may also be a JSON-encoded string (OpenAI style).

    >>> parse_tool_calls(  # doctest: +NORMALIZE_WHITESPACE
    ...     'a <tool_call>{"name": "f", "arguments": {"x": 1}}</tool_call> b <tool_call>{oops</tool_call>'
    ... )
    [ToolCall(name='f', arguments={'x': 1}),
     CallError(message='malformed tool call: invalid JSON (Expecting property name enclosed in double quotes
     at char 1)')]
    """
    out: list[Union[ToolCall, CallError]] = [_parse_call(m.group(1)) for m in _CALL.finditer(text)]
    tail = text[text.rfind(CALL_CLOSE) + len(CALL_CLOSE) :] if CALL_CLOSE in text else text
    if CALL_OPEN in tail:
        out.append(CallError(f"malformed tool call: {CALL_OPEN} without a closing {CALL_CLOSE}"))
    return out


def _parse_call(body: str) -> Union[ToolCall, CallError]:
    try:
        obj = json.loads(body)
    except json.JSONDecodeError as e:
        return CallError(f"malformed tool call: invalid JSON ({e.msg} at char {e.pos})")
    if not isinstance(obj, dict) or not isinstance(obj.get("name"), str):
        return CallError('malformed tool call: expected {"name": <string>, "arguments": {...}}')
    args = obj.get("arguments", {})
    if isinstance(args, str):
        try:
            args = json.loads(args) if args.strip() else {}
        except json.JSONDecodeError:
            return CallError(f"malformed tool call to {obj['name']!r}: arguments is a string that is not JSON")
    if not isinstance(args, dict):
        return CallError(
            f"malformed tool call to {obj['name']!r}: arguments must be a JSON object, got {type(args).__name__}"
        )
    return ToolCall(name=obj["name"], arguments=args)


@dataclass(frozen=True)
class ToolResult:
    """The outcome of one call: `output` is what the model reads (an "Error: ..." text when not ok)."""

    name: Optional[str]
    """The tool called (None when the call could not be parsed)."""
    arguments: Optional[dict[str, Any]]
    output: str
    ok: bool
    error: Optional[str] = None
    """Kind of failure: malformed | unknown_tool | bad_arguments | raised | timeout | too_many_calls."""
    seconds: float = 0.0


@dataclass
class ToolSet:
    """The tools of an environment, with the limits on how they run."""

    tools: list[Tool]
    timeout: float = 10.0
    """Seconds a call may run (a tool's own `timeout` overrides it)."""
    max_output_chars: int = 2000
    """Longer outputs are cut, with a marker saying how much was dropped."""
    max_calls_per_turn: int = 8
    """Calls beyond this in one turn are not run; each gets an error result."""
    by_name: dict[str, Tool] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        names = [t.name for t in self.tools]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"duplicate tool names: {dupes}")
        if self.timeout <= 0 or self.max_output_chars < 1 or self.max_calls_per_turn < 1:
            raise ValueError("ToolSet needs timeout > 0, max_output_chars >= 1 and max_calls_per_turn >= 1")
        self.by_name = {t.name: t for t in self.tools}

    def __getitem__(self, name: str) -> Tool:
        return self.by_name[name]

    def specs(self) -> list[dict[str, Any]]:
        """OpenAI-style specs of every tool."""
        return [t.spec() for t in self.tools]

    def describe(self) -> str:
        """Instructions for the prompt: the tools' specs and the call syntax."""
        lines = [json.dumps(t.spec()["function"], separators=(", ", ": ")) for t in self.tools]
        return (
            "You can call these tools:\n"
            + "\n".join(lines)
            + "\nTo call a tool, write "
            + CALL_OPEN
            + '{"name": <tool name>, "arguments": {<arguments>}}'
            + CALL_CLOSE
            + "."
        )

    def run(self, text: str) -> list[ToolResult]:
        """Parse every call in the turn `text` and run them concurrently; one result per call, in order."""
        parsed = parse_tool_calls(text)
        results: list[Optional[ToolResult]] = [None] * len(parsed)
        jobs: list[tuple[int, ToolCall, Tool]] = []
        for i, call in enumerate(parsed):
            if isinstance(call, CallError):
                results[i] = ToolResult(None, None, f"Error: {call.message}", ok=False, error="malformed")
            elif i >= self.max_calls_per_turn:
                results[i] = ToolResult(
                    call.name,
                    call.arguments,
                    f"Error: more than {self.max_calls_per_turn} tool calls in one turn; this one was not run",
                    ok=False,
                    error="too_many_calls",
                )
            elif call.name not in self.by_name:
                known = ", ".join(self.by_name) or "none"
                results[i] = ToolResult(
                    call.name,
                    call.arguments,
                    f"Error: unknown tool {call.name!r}; available tools: {known}",
                    ok=False,
                    error="unknown_tool",
                )
            elif errs := validate(call.arguments, self.by_name[call.name].parameters):
                results[i] = ToolResult(
                    call.name,
                    call.arguments,
                    f"Error: bad arguments for tool {call.name!r}: {'; '.join(errs)}",
                    ok=False,
                    error="bad_arguments",
                )
            else:
                jobs.append((i, call, self.by_name[call.name]))
        for i, res in zip([j[0] for j in jobs], self._execute([(c, t) for _, c, t in jobs])):
            results[i] = res
        return [r for r in results if r is not None]

    async def arun(self, text: str) -> list[ToolResult]:
        """`run` in a worker thread (for async environments)."""
        return await asyncio.to_thread(self.run, text)

    def _execute(self, jobs: list[tuple[ToolCall, Tool]]) -> list[ToolResult]:
        """Run validated calls, one daemon thread each, all started before any is awaited."""
        boxes: list[dict[str, Any]] = [{} for _ in jobs]
        threads = [
            threading.Thread(target=_call_into, args=(t.fn, c.arguments, box), daemon=True)
            for (c, t), box in zip(jobs, boxes)
        ]
        start = time.perf_counter()
        for th in threads:
            th.start()
        out = []
        for (call, t), th, box in zip(jobs, threads, boxes):
            limit = t.timeout if t.timeout is not None else self.timeout
            th.join(max(0.0, start + limit - time.perf_counter()))
            out.append(self._result(call, limit, box, th.is_alive()))
        return out

    def _result(self, call: ToolCall, limit: float, box: dict[str, Any], hung: bool) -> ToolResult:
        secs = box.get("seconds", limit)
        if hung:
            return ToolResult(
                call.name,
                call.arguments,
                f"Error: tool {call.name!r} timed out after {limit:g} s",
                ok=False,
                error="timeout",
                seconds=limit,
            )
        if "error" in box:
            e = box["error"]
            return ToolResult(
                call.name,
                call.arguments,
                f"Error: tool {call.name!r} raised {type(e).__name__}: {e}",
                ok=False,
                error="raised",
                seconds=secs,
            )
        return ToolResult(
            call.name, call.arguments, truncate(_as_text(box["value"]), self.max_output_chars), ok=True, seconds=secs
        )


def _call_into(fn: Callable[..., Any], arguments: dict[str, Any], box: dict[str, Any]) -> None:
    """Thread body: call `fn` (awaiting it when it is a coroutine function) and store value or exception."""
    start = time.perf_counter()
    try:
        value = fn(**arguments)
        box["value"] = asyncio.run(value) if inspect.iscoroutine(value) else value
    except Exception as e:  # noqa: BLE001 - becomes an error observation for the model
        box["error"] = e
    box["seconds"] = time.perf_counter() - start


def _as_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value)
    except (TypeError, ValueError):
        return str(value)


def truncate(text: str, limit: int) -> str:
    """`text` cut to `limit` characters plus a marker saying how many were dropped.

    >>> truncate("abcdefgh", 3)
    'abc...[truncated 5 chars]'
    """
    return text if len(text) <= limit else f"{text[:limit]}...[truncated {len(text) - limit} chars]"


def format_results(results: list[ToolResult]) -> str:
    """The tool message for a turn: each result in a `<tool_response>` block (Qwen2.5 / Hermes style)."""
    return "\n".join(f"<tool_response>\n{r.output}\n</tool_response>" for r in results)
