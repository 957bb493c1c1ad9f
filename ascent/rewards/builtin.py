"""Built-in reward functions. Signature of every reward: `fn(prompts, completions, **fields) -> list[float | None]`
(`None`: no opinion on that sample). Fields are the dataset rows' other columns, one list entry per sample.
"""

from __future__ import annotations

import logging
import re
from typing import Any, Callable, Optional

from ascent.registry import Registry

REWARDS: Registry = Registry("reward")
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")


@REWARDS.register("exact_answer", paper=None, fidelity="ascent")
def exact_answer(
    prompts: list[str], completions: list[str], answer: Optional[list[Any]] = None, **_: Any
) -> list[Optional[float]]:
    """1 if the completion, stripped, equals the row's `answer` exactly, else 0 (None without an answer)."""
    if answer is None:
        return [None] * len(completions)
    return [None if a is None else float(c.strip() == str(a).strip()) for c, a in zip(completions, answer)]


@REWARDS.register("last_number", paper=None, fidelity="ascent")
def last_number(
    prompts: list[str], completions: list[str], answer: Optional[list[Any]] = None, **_: Any
) -> list[Optional[float]]:
    """1 if the last number in the completion equals the numeric `answer`, else 0."""
    if answer is None:
        return [None] * len(completions)
    out: list[Optional[float]] = []
    for c, a in zip(completions, answer):
        nums = _NUMBER.findall(c.replace(",", ""))
        try:
            out.append(float(bool(nums) and abs(float(nums[-1]) - float(str(a).replace(",", ""))) < 1e-6))
        except ValueError:
            out.append(None)
    return out


@REWARDS.register("math_verify", paper=None, fidelity="ascent")
def math_verify_reward(
    prompts: list[str], completions: list[str], answer: Optional[list[Any]] = None, **_: Any
) -> list[Optional[float]]:
    """1 if math-verify finds the completion's final answer equivalent to the row's `answer` (LaTeX,
    \\boxed{}, plain numbers and expressions), else 0. The runner's per-call timeout bounds it."""
    return _verified(completions, answer, lambda c: c)


def _verified(
    completions: list[str], answer: Optional[list[Any]], extract: Callable[[str], Optional[str]]
) -> list[Optional[float]]:
    """1 where math-verify finds `extract(completion)` equal to the row's answer, 0 where it does not or
    `extract` finds nothing, None where the row has no answer."""
    from math_verify import parse, verify

    logging.getLogger("math_verify").setLevel(logging.ERROR)  # it warns on every call that timeouts are ours
    if answer is None:
        return [None] * len(completions)
    out: list[Optional[float]] = []
    for c, a in zip(completions, answer):
        if a is None:
            out.append(None)
            continue
        text = extract(c)
        if text is None:
            out.append(0.0)
            continue
        gold, pred = parse(f"${a}$", parsing_timeout=None), parse(text, parsing_timeout=None)
        out.append(float(bool(gold) and bool(pred) and verify(gold, pred, timeout_seconds=None)))
    return out


_STATED = re.compile(r"the (?:final )?answer is[:\s]*\**\s*(\$?-?[\d,]*\.?\d+)", re.IGNORECASE)


def stated_answer(completion: str) -> Optional[str]:
    """The number of the completion's last "The answer is N" sentence (also "the final answer is", bold or
    with a dollar sign), commas removed; None when the completion never states its answer that way.

    >>> stated_answer("5 + 3 = 8. The answer is 8."), stated_answer("so 1,200 in all. The final answer is: $1,200")
    ('8', '1200')
    >>> stated_answer("It is 8.") is None
    True
    """
    found = _STATED.findall(completion)
    return found[-1].replace(",", "").lstrip("$") if found else None


@REWARDS.register("answer_is", paper=None, fidelity="ascent")
def answer_is(
    prompts: list[str], completions: list[str], answer: Optional[list[Any]] = None, **_: Any
) -> list[Optional[float]]:
    """The strict grader of tasks that ask for the answer as a final sentence "The answer is N.": 1 if the
    completion states its answer that way and math-verify finds it equal to the row's `answer`, else 0 (a right
    number anywhere else earns nothing; `last_number` is the lenient counterpart)."""
    return _verified(completions, answer, lambda c: None if (n := stated_answer(c)) is None else f"${n}$")


@REWARDS.register("closeness", paper=None, fidelity="ascent")
def closeness(
    prompts: list[str], completions: list[str], answer: Optional[list[Any]] = None, scale: float = 10.0, **_: Any
) -> list[Optional[float]]:
    """Regression reward: max(0, 1 - |prediction - answer| / scale), the prediction being the completion's last
    number (0 without one; None without a numeric answer). 1 only for the exact value, so with the default
    threshold held-out accuracy counts exact predictions; `scale` is the error that earns nothing.

    >>> closeness(["p"] * 3, ["6.8", "7.3", "x"], ["6.8", "6.8", "6.8"], scale=10)
    [1.0, 0.95, 0.0]
    """
    if not scale > 0:
        raise ValueError(f"closeness: scale must be > 0, got {scale}")
    if answer is None:
        return [None] * len(completions)
    out: list[Optional[float]] = []
    for c, a in zip(completions, answer):
        try:
            target = float(str(a).replace(",", ""))
        except ValueError:
            out.append(None)
            continue
        nums = _NUMBER.findall(c.replace(",", ""))
        out.append(round(max(0.0, 1.0 - abs(float(nums[-1]) - target) / scale), 12) if nums else 0.0)
    return out
