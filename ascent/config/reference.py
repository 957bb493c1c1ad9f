"""`ascent config RECIPE [key=value ...]`: a recipe's resolved config as YAML, every key under its help text.

The output is itself a valid recipe (`ascent config default > mine.yaml`, edit, `ascent train mine.yaml`): the
help of each key, read from the docstring under its field in `ascent.config.schema`, is a `#` comment above it.
"""

from __future__ import annotations

import dataclasses
import textwrap
from typing import Any

import yaml

from ascent.typed import field_docs

WIDTH = 100


def scalar(value: Any) -> str:
    """A value in YAML flow style, on one line.

    >>> scalar(3e-4), scalar(None), scalar("auto"), scalar([1, 2]), scalar({"a": 1}), scalar("1.0")
    ('0.0003', 'null', 'auto', '[1, 2]', '{a: 1}', "'1.0'")
    """
    text = yaml.safe_dump(value, default_flow_style=True, width=10_000, sort_keys=False).strip()
    return text[: -len("...")].strip() if text.endswith("...") else text


def plain(value: Any) -> Any:
    """Tuples as lists (what config.yaml holds), recursively."""
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    return value


def reference_lines(obj: Any, indent: int = 0) -> list[str]:
    """The lines of `obj` (a config dataclass): each field's help as comments, then `key: value`; nested
    sections indented under their key."""
    docs, pad, out = field_docs(type(obj)), "  " * indent, []
    for f in dataclasses.fields(obj):
        value = getattr(obj, f.name)
        text = docs.get(f.name, "")
        if text:
            out += [f"{pad}# {line}" for line in textwrap.wrap(text, WIDTH - len(pad) - 2)]
        if dataclasses.is_dataclass(value):
            out.append(f"{pad}{f.name}:")
            out += reference_lines(value, indent + 1)
        else:
            out.append(f"{pad}{f.name}: {scalar(plain(value))}")
    return out


def config_reference(cfg: Any, source: str) -> str:
    """The whole reference: a header naming where it came from, then `reference_lines`."""
    head = [
        f"# The resolved config of {source}: every key below can be set on the command line as key=value",
        "# (dotted for nested keys: train.steps=100, rollout.temperature=0.7) or in a recipe YAML like this one.",
        "# Pieces (advantages, losses, rewards, tasks, ...) and their parameters: `ascent list --params`.",
    ]
    return "\n".join(head + reference_lines(cfg)) + "\n"
