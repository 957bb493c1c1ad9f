"""Multi-constraint instruction following with rule-checkable constraints (after the self-supervised RL of
Ren et al., 2025, arXiv:2510.14420, "Instructions are all you need").

A row carries a `constraints` field: a list of dicts such as `{"type": "max_words", "value": 20}` (a JSON string
of that list is accepted too). Each dict is one atomic constraint, checked by the checker registered for its
type in CONSTRAINTS; the reward aggregates the per-constraint verdicts (share satisfied by default). The paper
learns a constraint-wise classifier from pseudo-labels: that is `reward:constraint_rm` (constraint_rm.py); here
every constraint is checked by a rule instead.

Checkers (`text` is the completion with surrounding whitespace stripped; string comparisons ignore case unless
the dict says `"case_sensitive": true`):

| type | satisfied when |
| --- | --- |
| max_words / min_words | number of whitespace-separated words <= / >= value |
| max_chars / min_chars | number of characters <= / >= value |
| contains / not_contains | value occurs / does not occur as a substring |
| starts_with / ends_with | text starts / ends with value |
| regex | re.search(value, text) finds a match (case_sensitive honoured) |
| no_commas | no "," in text |
| lowercase / uppercase | text equals its lower- / upper-case form |
"""

from __future__ import annotations

import json
import re
from typing import Any, Callable, Optional

from ascent import papers
from ascent.registry import Registry
from ascent.rewards.builtin import REWARDS

Checker = Callable[[str, dict[str, Any]], bool]
CONSTRAINTS: Registry = Registry("constraint")


def _value(spec: dict[str, Any]) -> Any:
    if "value" not in spec:
        raise ValueError(f"constraint {spec!r} needs a 'value'")
    return spec["value"]


def _int_value(spec: dict[str, Any]) -> int:
    value = _value(spec)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"constraint {spec!r}: 'value' must be a number")
    return int(value)


def _fold(text: str, spec: dict[str, Any]) -> tuple[str, str]:
    value = str(_value(spec))
    return (text, value) if spec.get("case_sensitive") else (text.lower(), value.lower())


@CONSTRAINTS.register("max_words", paper=None, fidelity="ascent")
def max_words(text: str, spec: dict[str, Any]) -> bool:
    """At most `value` whitespace-separated words."""
    return len(text.split()) <= _int_value(spec)


@CONSTRAINTS.register("min_words", paper=None, fidelity="ascent")
def min_words(text: str, spec: dict[str, Any]) -> bool:
    """At least `value` whitespace-separated words."""
    return len(text.split()) >= _int_value(spec)


@CONSTRAINTS.register("max_chars", paper=None, fidelity="ascent")
def max_chars(text: str, spec: dict[str, Any]) -> bool:
    """At most `value` characters."""
    return len(text) <= _int_value(spec)


@CONSTRAINTS.register("min_chars", paper=None, fidelity="ascent")
def min_chars(text: str, spec: dict[str, Any]) -> bool:
    """At least `value` characters."""
    return len(text) >= _int_value(spec)


@CONSTRAINTS.register("contains", paper=None, fidelity="ascent")
def contains(text: str, spec: dict[str, Any]) -> bool:
    """`value` occurs in the text."""
    t, v = _fold(text, spec)
    return v in t


@CONSTRAINTS.register("not_contains", paper=None, fidelity="ascent")
def not_contains(text: str, spec: dict[str, Any]) -> bool:
    """`value` does not occur in the text."""
    t, v = _fold(text, spec)
    return v not in t


@CONSTRAINTS.register("starts_with", paper=None, fidelity="ascent")
def starts_with(text: str, spec: dict[str, Any]) -> bool:
    """The text starts with `value`."""
    t, v = _fold(text, spec)
    return t.startswith(v)


@CONSTRAINTS.register("ends_with", paper=None, fidelity="ascent")
def ends_with(text: str, spec: dict[str, Any]) -> bool:
    """The text ends with `value`."""
    t, v = _fold(text, spec)
    return t.endswith(v)


@CONSTRAINTS.register("regex", paper=None, fidelity="ascent")
def regex(text: str, spec: dict[str, Any]) -> bool:
    """re.search(`value`, text) matches."""
    return re.search(str(_value(spec)), text, 0 if spec.get("case_sensitive") else re.IGNORECASE) is not None


@CONSTRAINTS.register("no_commas", paper=None, fidelity="ascent")
def no_commas(text: str, spec: dict[str, Any]) -> bool:
    """No comma in the text."""
    return "," not in text


@CONSTRAINTS.register("lowercase", paper=None, fidelity="ascent")
def lowercase(text: str, spec: dict[str, Any]) -> bool:
    """No upper-case letter."""
    return text == text.lower()


@CONSTRAINTS.register("uppercase", paper=None, fidelity="ascent")
def uppercase(text: str, spec: dict[str, Any]) -> bool:
    """No lower-case letter."""
    return text == text.upper()


def check(text: str, spec: dict[str, Any]) -> bool:
    """One constraint's verdict; an unknown or malformed constraint raises ValueError naming the valid types.

    >>> check("hello world", {"type": "max_words", "value": 2})
    True
    >>> check("Hello", {"type": "shout"})  # doctest: +NORMALIZE_WHITESPACE
    Traceback (most recent call last):
    ...
    ValueError: unknown constraint type 'shout'; valid types: contains, ends_with, lowercase, max_chars, max_words,
    min_chars, min_words, no_commas, not_contains, regex, starts_with, uppercase
    """
    if not isinstance(spec, dict) or "type" not in spec:
        raise ValueError(
            f"a constraint must be a dict with a 'type' (valid types: {', '.join(CONSTRAINTS.names())}), got {spec!r}"
        )
    kind = spec["type"]
    if kind not in CONSTRAINTS:
        raise ValueError(f"unknown constraint type {kind!r}; valid types: {', '.join(CONSTRAINTS.names())}")
    return bool(CONSTRAINTS.get(kind)(text.strip(), spec))


def _as_list(row_constraints: Any) -> Optional[list]:
    if row_constraints is None:
        return None
    if isinstance(row_constraints, str):
        row_constraints = json.loads(row_constraints)
    if isinstance(row_constraints, dict):
        row_constraints = [row_constraints]
    if not isinstance(row_constraints, (list, tuple)):
        raise ValueError(
            f"the 'constraints' field must be a list of constraint dicts, got {type(row_constraints).__name__}"
        )
    return list(row_constraints)


@REWARDS.register(
    "constraints",
    paper=papers.INSTRUCTION_FOLLOWING_SELF_SUPERVISED_RL,
    fidelity="reduced",
    departures=(
        (
            "rule-checkable constraints checked by rules; the paper's constraint-wise classifier reward model trained "
            "on pseudo-labels is reward:constraint_rm"
        ),
    ),
)
def constraints_reward(
    prompts: list[str],
    completions: list[str],
    constraints: Optional[list[Any]] = None,
    aggregate: str = "mean",
    **_: Any,
) -> list[Optional[float]]:
    """Share of the row's rule-checkable `constraints` that the completion satisfies (Ren et al., 2025,
    arXiv:2510.14420).

    aggregate: "mean" (default: share satisfied, a dense signal) or "all" (1 only if every constraint holds).
    A row without constraints (missing or empty list): None. An unknown constraint type raises ValueError
    naming the valid types, which the runner records as a failed reward.

    >>> constraints_reward(
    ...     [], ["short answer, here"], constraints=[[{"type": "max_words", "value": 5}, {"type": "no_commas"}]]
    ... )
    [0.5]
    """
    if aggregate not in ("mean", "all"):
        raise ValueError(f"aggregate must be 'mean' or 'all', not {aggregate!r}")
    rows = list(constraints) if constraints is not None else [None] * len(completions)
    out: list[Optional[float]] = []
    for text, row in zip(completions, rows):
        specs = _as_list(row)
        if not specs:
            out.append(None)
            continue
        verdicts = [check(text, spec) for spec in specs]
        out.append(sum(verdicts) / len(verdicts) if aggregate == "mean" else float(all(verdicts)))
    return out
