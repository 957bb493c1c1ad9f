"""Typed values from plain data: frozen dataclasses built from mappings with every key and value checked,
and piece specs (`name` or `name(key=value, ...)`) parsed and written back.

The run config (`ascent.config.loader`) and the parameters of registered pieces (`ascent.registry`) are
built by the same `build`, so a bad value fails the same way wherever it is written: naming the key and
what it accepts.
"""

from __future__ import annotations

import dataclasses
import json
import math
import typing
from typing import Any, Literal, Union, get_args, get_origin

import yaml


class ConfigError(ValueError):
    """A config problem the user can fix; the message says what to change."""


def type_name(tp: Any) -> str:
    """A readable name of an annotation (`one of 'a', 'b'` for a Literal)."""
    if get_origin(tp) is Literal:
        return "one of " + ", ".join(repr(a) for a in get_args(tp))
    if get_origin(tp) is Union:
        return " | ".join("null" if a is type(None) else type_name(a) for a in get_args(tp))
    if get_origin(tp) is list:
        return f"list[{type_name(get_args(tp)[0])}]"
    return getattr(tp, "__name__", str(tp)).replace("typing.", "")


def coerce(key: str, value: Any, tp: Any) -> Any:
    """Check `value` against annotation `tp`; return it converted (int -> float where a float is due)."""
    origin = get_origin(tp)
    if origin is typing.Annotated:
        return coerce(key, value, get_args(tp)[0])
    if origin is Union:
        options = get_args(tp)
        if value is None and type(None) in options:
            return None
        errors = []
        for opt in (o for o in options if o is not type(None)):
            try:
                return coerce(key, value, opt)
            except ConfigError as err:
                errors.append(str(err))
        if len(errors) == 1:
            raise ConfigError(errors[0])
        raise ConfigError(f"{key}: {value!r} fits none of " + ", ".join(type_name(o) for o in options))
    if origin is Literal:
        if value not in get_args(tp):
            raise ConfigError(f"{key}: {value!r} is not valid; choose {type_name(tp)}")
        return value
    if origin is list:
        if not isinstance(value, list):
            raise ConfigError(f"{key}: expected a list, got {value!r}")
        (inner,) = get_args(tp)
        return [coerce(f"{key}[{i}]", v, inner) for i, v in enumerate(value)]
    if dataclasses.is_dataclass(tp):
        return build(tp, value, prefix=key)
    return _scalar(key, value, tp)


def _scalar(key: str, value: Any, tp: Any) -> Any:
    if tp is Any:
        return value
    if tp is bool:
        if not isinstance(value, bool):
            raise ConfigError(f"{key}: expected true or false, got {value!r}")
        return value
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"{key}: expected an integer, got {value!r}")
        return value
    if tp is float:
        if isinstance(value, str):  # YAML 1.1 reads 1e-3 (no dot) as a string
            try:
                value = float(value)
            except ValueError:
                pass
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise ConfigError(f"{key}: expected a finite number, got {value!r}")
        return float(value)
    if tp is str:
        if not isinstance(value, str):
            raise ConfigError(f"{key}: expected a string, got {value!r}")
        return value
    raise ConfigError(f"{key}: unsupported type {tp}")


def build(cls: type, raw: Any, prefix: str = "") -> Any:
    """Construct dataclass `cls` from a mapping, checking every key and value; a `ValueError` raised by
    the class's own checks (`__post_init__`) becomes a ConfigError naming `prefix`."""
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise ConfigError(f"{prefix or 'config'}: expected a mapping, got {raw!r}")
    hints = typing.get_type_hints(cls, include_extras=True)
    fields = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(raw) - fields)
    if unknown:
        where = f" in {prefix}" if prefix else ""
        name = (prefix + "." if prefix else "") + str(unknown[0])
        raise ConfigError(f"unknown key {name}{where}; valid keys: {', '.join(sorted(fields))}")
    kwargs = {name: coerce(f"{prefix}.{name}" if prefix else name, raw[name], hints[name]) for name in raw}
    try:
        return cls(**kwargs)
    except ConfigError:
        raise
    except ValueError as err:
        raise ConfigError(f"{prefix}: {err}" if prefix else str(err)) from None


# -- piece specs -----------------------------------------------------------------------------------------


def split_top_level(text: str, sep: str = ",") -> list[str]:
    """Split at `sep` outside brackets and quotes.

    >>> split_top_level("a=1, b=[1, 2], c='x,y'")
    ['a=1', ' b=[1, 2]', " c='x,y'"]
    """
    parts, depth, quote, start = [], 0, "", 0
    for i, ch in enumerate(text):
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif ch == sep and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return parts


_PY_WORDS = {"True": True, "False": False, "None": None}


def _value(text: str) -> Any:
    text = text.strip()
    if text in _PY_WORDS:
        return _PY_WORDS[text]
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError:
        return text


def parse_spec(spec: str) -> tuple[str, dict[str, Any]]:
    """`name(key=value, ...)` -> (name, {key: value}). Values are YAML scalars or flow lists (numbers,
    true/false, null, quoted or bare strings, [1, 2]); Python's True/False/None are read too.

    >>> parse_spec("overlong(max_len=64, cache_len=16)")
    ('overlong', {'max_len': 64, 'cache_len': 16})
    >>> parse_spec("distil(teacher=runs/a, hops=[1, 2], whiten=False)")
    ('distil', {'teacher': 'runs/a', 'hops': [1, 2], 'whiten': False})
    >>> parse_spec("grpo")
    ('grpo', {})
    """
    spec = spec.strip()
    if "(" not in spec:
        return spec, {}
    name, _, args = spec.partition("(")
    if not args.endswith(")"):
        raise ConfigError(f"spec {spec!r}: write name(key=value, ...), e.g. taco(alpha=0.05)")
    kwargs: dict[str, Any] = {}
    for part in split_top_level(args[:-1]):
        if not part.strip():
            continue
        key, eq, text = part.partition("=")
        if not eq or not key.strip().isidentifier():
            raise ConfigError(f"spec {spec!r}: arguments must be named, key=value (got {part.strip()!r})")
        kwargs[key.strip()] = _value(text)
    return name.strip(), kwargs


def _format_value(value: Any) -> str:
    if isinstance(value, str):
        bare = (
            value and _value(value) == value and not any(c in value for c in ",()[]{}'\"=") and value.strip() == value
        )
        return value if bare else json.dumps(value)
    if isinstance(value, bool) or value is None:
        return json.dumps(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_format_value(v) for v in value) + "]"
    return repr(value)


def format_spec(name: str, kwargs: dict[str, Any]) -> str:
    """The spec string of a name and its arguments (`parse_spec`'s inverse).

    >>> format_spec("taco", {"alpha": 0.05, "floor": 0.1})
    'taco(alpha=0.05, floor=0.1)'
    >>> parse_spec(format_spec("x", {"p": "a b", "q": [1, "c,d"], "r": None}))
    ('x', {'p': 'a b', 'q': [1, 'c,d'], 'r': None})
    """
    if not kwargs:
        return name
    return f"{name}(" + ", ".join(f"{k}={_format_value(v)}" for k, v in kwargs.items()) + ")"


def spec_from_raw(raw: Any, key: str) -> str:
    """A spec written as a string (`taco(alpha=0.05)`) or as a one-key mapping (`{taco: {alpha: 0.05}}`,
    the YAML spelling) -> the string form."""
    if isinstance(raw, str):
        return raw
    if isinstance(raw, dict) and len(raw) == 1:
        ((name, args),) = raw.items()
        if args is None:
            args = {}
        if isinstance(name, str) and isinstance(args, dict):
            return format_spec(name, args)
    if isinstance(raw, dict):
        names = ", ".join(map(str, raw)) or "none"
        raise ConfigError(f"{key}: name one piece, e.g. taco or {{taco: {{alpha: 0.05}}}}; got {len(raw)} ({names})")
    raise ConfigError(f"{key}: expected a name or name(key=value, ...), got {raw!r}")


def spec_to_raw(raw: Any) -> Any:
    """A string spec -> its one-key mapping form (so `key.name.param=value` overrides merge into it);
    anything else unchanged."""
    if isinstance(raw, str):
        try:
            name, kwargs = parse_spec(raw)
        except ConfigError:
            return raw
        return {name: kwargs}
    return raw


def fields_help(cls: type) -> list[tuple[str, str, Any, str]]:
    """(name, type, default, help) of each field of a params dataclass; the help is the docstring line
    under the field, read from the class source."""
    docs = field_docs(cls)
    hints = typing.get_type_hints(cls)
    out = []
    for f in dataclasses.fields(cls):
        default = f.default if f.default is not dataclasses.MISSING else f.default_factory()  # type: ignore[misc]
        out.append((f.name, type_name(hints[f.name]), default, docs.get(f.name, "")))
    return out


def field_docs(cls: type) -> dict[str, str]:
    """{field: the string literal written right under it} of a dataclass (its help text)."""
    import ast
    import inspect
    import textwrap

    docs: dict[str, str] = {}
    for base in reversed(cls.__mro__[1:]):  # a subclass's params inherit their bases' help (its own wins)
        if dataclasses.is_dataclass(base):
            docs.update(field_docs(base))
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(cls)))
    except (OSError, TypeError):
        return docs
    body = tree.body[0].body if tree.body and isinstance(tree.body[0], ast.ClassDef) else []
    for node, nxt in zip(body, body[1:]):
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            if isinstance(nxt, ast.Expr) and isinstance(nxt.value, ast.Constant) and isinstance(nxt.value.value, str):
                docs[node.target.id] = " ".join(nxt.value.value.split())
    return docs
