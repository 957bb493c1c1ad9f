"""Solver-informed reward for optimisation modelling (SIRL, Chen et al., 2025, arXiv:2505.11792): the
completion states a linear program, an LP solver (scipy's HiGHS) checks it, and the reward adds up syntax,
feasibility and objective quality.

The text format (case-insensitive keywords, one statement per line):

    maximize 3x + 2y          objective: maximize/maximise/max or minimize/minimise/min, then a linear
                              expression; an optional name (`max z = 3x + 2y`, `obj: ...`); the expression
                              may stand on the next line instead
    subject to                optional header (also `s.t.`, `st`, `constraints`)
    c1: x + y <= 4            a constraint: linear expressions on both sides of <=, >=, = (also ==, <, >,
    x + 3y <= 6               =<, =>, the symbols ≤ ≥; strict is read as non-strict), an optional `label:`;
    0 <= y <= 5               chains such as 0 <= y <= 5 are two constraints
    free z                    optional: these variables may be negative (list separated by spaces/commas)
    end                       optional: stop reading here

Linear expressions: terms `3x`, `3 x`, `3*x`, `x*3`, `-2.5y`, `x`, numbers (constants move to the right-hand
side); variables are identifiers (`x1`, `flow_ab`). Variables are non-negative unless declared free (keyword
`nonneg=False` frees them all). The LP is the last ``` fenced block holding an objective line if there is one,
else the text from the last line that starts with an objective keyword; every non-blank line from there on
must be one of the statements above, else the text does not parse.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any, Optional

from ascent import papers
from ascent.rewards.builtin import REWARDS


class LPParseError(ValueError):
    """Text that is not a linear program in the documented format."""


@dataclass
class LinearProgram:
    """A parsed LP: maximize/minimize objective . x + objective_const subject to rows (coefs, op, rhs)."""

    sense: str
    """"max" or "min"."""
    objective: dict[str, float]
    objective_const: float = 0.0
    rows: list[tuple[dict[str, float], str, float]] = field(default_factory=list)
    """(coefficients, "<=" | ">=" | "=", right-hand side)."""
    free: set[str] = field(default_factory=set)

    @property
    def variables(self) -> list[str]:
        """Variables in order of first appearance."""
        seen: dict[str, None] = dict.fromkeys(self.objective)
        for coefs, _, _ in self.rows:
            seen.update(dict.fromkeys(coefs))
        seen.update(dict.fromkeys(sorted(self.free)))
        return list(seen)


_TOKEN = re.compile(r"\s*(?:(\d+(?:\.\d*)?(?:[eE][+-]?\d+)?|\.\d+(?:[eE][+-]?\d+)?)|([A-Za-z_]\w*)|([+\-*]))")
_OBJECTIVE = re.compile(r"^(maximi[sz]e|minimi[sz]e|max|min)\b\s*:?\s*(.*)$", re.IGNORECASE)
_NAME = re.compile(r"^([A-Za-z_]\w*)\s*(?::|=(?![=<>]))\s*(.*)$")
_HEADER = re.compile(r"^(subject\s+to|such\s+that|s\.\s*t\.?|st|constraints)\s*:?$", re.IGNORECASE)
_FREE = re.compile(r"^free\s+(.+)$", re.IGNORECASE)
_OPERATOR = re.compile(r"(<=|>=|=<|=>|==|≤|≥|<|>|=)")
_CANONICAL = {
    "<=": "<=",
    "=<": "<=",
    "≤": "<=",
    "<": "<=",
    ">=": ">=",
    "=>": ">=",
    "≥": ">=",
    ">": ">=",
    "=": "=",
    "==": "=",
}


def parse_linear(text: str) -> tuple[dict[str, float], float]:
    """A linear expression -> ({variable: coefficient}, constant).

    >>> parse_linear("3x - 2*y + x + 4")
    ({'x': 4.0, 'y': -2.0}, 4.0)
    >>> parse_linear("x * y")
    Traceback (most recent call last):
    ...
    ascent.rewards.lp_solver.LPParseError: 'x * y': expected a number after '*'
    """
    tokens: list[tuple[str, str]] = []
    pos, s = 0, text.strip()
    while pos < len(s):
        m = _TOKEN.match(s, pos)
        if not m or m.end() == pos:
            raise LPParseError(f"{text!r}: unexpected {s[pos : pos + 10]!r}")
        kind = "num" if m.group(1) else "var" if m.group(2) else m.group(3)
        tokens.append((kind, m.group(1) or m.group(2) or m.group(3)))
        pos = m.end()
    if not tokens:
        raise LPParseError("empty expression")
    coefs: dict[str, float] = {}
    const, i, first = 0.0, 0, True
    while i < len(tokens):
        sign, signed = 1.0, False
        while i < len(tokens) and tokens[i][0] in "+-":
            sign, signed, i = (-sign if tokens[i][0] == "-" else sign), True, i + 1
        if not signed and not first:
            raise LPParseError(f"{text!r}: expected + or - between terms")
        if i >= len(tokens):
            raise LPParseError(f"{text!r}: ends with an operator")
        kind, value = tokens[i]
        i += 1
        if kind == "num":
            coef = float(value)
            if i < len(tokens) and tokens[i][0] == "*":
                i += 1
                if i >= len(tokens) or tokens[i][0] != "var":
                    raise LPParseError(f"{text!r}: expected a variable after '*'")
            if i < len(tokens) and tokens[i][0] == "var":
                coefs[tokens[i][1]] = coefs.get(tokens[i][1], 0.0) + sign * coef
                i += 1
            else:
                const += sign * coef
        elif kind == "var":
            coef = 1.0
            if i < len(tokens) and tokens[i][0] == "*":
                if i + 1 >= len(tokens) or tokens[i + 1][0] != "num":
                    raise LPParseError(f"{text!r}: expected a number after '*'")
                coef, i = float(tokens[i + 1][1]), i + 2
            coefs[value] = coefs.get(value, 0.0) + sign * coef
        else:
            raise LPParseError(f"{text!r}: unexpected {value!r}")
        first = False
    if not all(math.isfinite(v) for v in [*coefs.values(), const]):
        raise LPParseError(f"{text!r}: non-finite number")
    return coefs, const


def _lp_lines(text: str) -> list[str]:
    blocks = re.findall(r"```[^\n]*\n(.*?)```", text, re.DOTALL)
    for block in reversed(blocks):
        lines = block.splitlines()
        if any(_OBJECTIVE.match(line.strip()) for line in lines):
            text = block
            break
    lines = [line.strip() for line in text.splitlines()]
    starts = [k for k, line in enumerate(lines) if _OBJECTIVE.match(line)]
    if not starts:
        raise LPParseError("no objective line (maximize ... / minimize ...)")
    return lines[starts[-1] :]


def parse_lp(text: str) -> LinearProgram:
    """Parse the documented LP text format; raises LPParseError.

    >>> lp = parse_lp("maximize 3x + 2y\\nsubject to\\nx + y <= 4\\nx + 3y <= 6")
    >>> lp.sense, lp.objective, lp.rows[1]
    ('max', {'x': 3.0, 'y': 2.0}, ({'x': 1.0, 'y': 3.0}, '<=', 6.0))
    """
    lines = _lp_lines(text)
    m = _OBJECTIVE.match(lines[0])
    sense = "max" if m.group(1).lower().startswith("max") else "min"
    rest, k = m.group(2).strip(), 1
    if not rest:  # the objective stands on the next non-blank line
        while k < len(lines) and not lines[k]:
            k += 1
        if k == len(lines):
            raise LPParseError("objective keyword without an expression")
        rest, k = lines[k], k + 1
    named = _NAME.match(rest)
    if named:
        rest = named.group(2)
    objective, objective_const = parse_linear(rest)
    lp = LinearProgram(sense=sense, objective=objective, objective_const=objective_const)
    for line in lines[k:]:
        if not line or _HEADER.match(line):
            continue
        if line.lower() == "end":
            break
        free = _FREE.match(line)
        if free:
            names = [n for n in re.split(r"[\s,]+", free.group(1)) if n]
            if not all(re.fullmatch(r"[A-Za-z_]\w*", n) for n in names):
                raise LPParseError(f"bad free declaration {line!r}")
            lp.free.update(names)
            continue
        labelled = re.match(r"^[A-Za-z_]\w*\s*:\s*(.*)$", line)
        body = labelled.group(1) if labelled else line
        parts = _OPERATOR.split(body)
        if len(parts) < 3 or len(parts) % 2 == 0:
            raise LPParseError(f"not a constraint: {line!r}")
        sides = [parse_linear(p) for p in parts[0::2]]
        for (lhs, lc), op, (rhs, rc) in zip(sides, parts[1::2], sides[1:]):
            coefs = dict(lhs)
            for var, v in rhs.items():
                coefs[var] = coefs.get(var, 0.0) - v
            lp.rows.append(({v: c for v, c in coefs.items()}, _CANONICAL[op], rc - lc))
    if not lp.variables:
        raise LPParseError("the program has no variables")
    return lp


def solve_lp(lp: LinearProgram, nonneg: bool = True, time_limit_s: float = 5.0) -> tuple[str, Optional[float]]:
    """Solve with scipy.optimize.linprog(method="highs"): ("optimal", objective value), ("infeasible", None),
    ("unbounded", None) or ("error", None) (iteration/time limit, numerical trouble).

    >>> solve_lp(parse_lp("maximize 3x + 2y\\nx + y <= 4\\nx + 3y <= 6"))
    ('optimal', 12.0)
    """
    import numpy as np
    from scipy.optimize import linprog

    names = lp.variables
    col = {v: j for j, v in enumerate(names)}
    ub_a, ub_b, eq_a, eq_b = [], [], [], []
    for coefs, op, rhs in lp.rows:
        row = np.zeros(len(names))
        for v, c in coefs.items():
            row[col[v]] = c
        if not row.any():  # a constant statement such as 0 <= 4
            holds = {"<=": 0.0 <= rhs + 1e-9, ">=": 0.0 >= rhs - 1e-9, "=": abs(rhs) <= 1e-9}[op]
            if not holds:
                return "infeasible", None
            continue
        if op == "=":
            eq_a.append(row)
            eq_b.append(rhs)
        else:
            sign = 1.0 if op == "<=" else -1.0
            ub_a.append(sign * row)
            ub_b.append(sign * rhs)
    c = np.array([lp.objective.get(v, 0.0) for v in names]) * (-1.0 if lp.sense == "max" else 1.0)
    bounds = [(None, None) if (not nonneg or v in lp.free) else (0, None) for v in names]
    res = linprog(
        c,
        A_ub=np.array(ub_a) if ub_a else None,
        b_ub=np.array(ub_b) if ub_b else None,
        A_eq=np.array(eq_a) if eq_a else None,
        b_eq=np.array(eq_b) if eq_b else None,
        bounds=bounds,
        method="highs",
        options={"time_limit": float(time_limit_s)},
    )
    if res.status == 0:
        value = float(res.fun) * (-1.0 if lp.sense == "max" else 1.0) + lp.objective_const
        return "optimal", value + 0.0  # + 0.0 turns -0.0 into 0.0
    return {2: "infeasible", 3: "unbounded"}.get(res.status, "error"), None


@REWARDS.register(
    "lp_solver",
    paper=papers.SIRL,
    fidelity="reduced",
    departures=(
        (
            "checks a continuous LP written in ascent's own text format, solved by HiGHS: no generated solver code is "
            "run and there are no integer variables"
        ),
    ),
)
def lp_solver(
    prompts: list[str],
    completions: list[str],
    answer: Optional[list[Any]] = None,
    parse_weight: float = 0.1,
    feasible_weight: float = 0.2,
    objective_weight: float = 0.7,
    rtol: float = 1e-4,
    atol: float = 1e-6,
    nonneg: bool = True,
    time_limit_s: float = 5.0,
    max_vars: int = 200,
    max_constraints: int = 500,
    **_: Any,
) -> list[Optional[float]]:
    """Solver-verified LP modelling reward (SIRL, Chen et al., 2025, arXiv:2505.11792): syntax + feasibility +
    objective quality.

    r = parse_weight [the completion parses as an LP, module docstring] + feasible_weight [HiGHS solves it to
    optimality: feasible and bounded] + objective_weight [|optimum - answer| <= atol + rtol |answer|], with the
    row's `answer` the optimal objective value. Defaults 0.1 / 0.2 / 0.7: garbage 0, infeasible or unbounded
    0.1, solvable with a wrong optimum 0.3, right optimum 1.0. Larger than max_vars / max_constraints, or a
    solver failure (time limit, numerics): parse credit only. Never raises on the completion's text; a row
    without a numeric answer gets None.
    """
    rows = list(answer) if answer is not None else [None] * len(completions)
    out: list[Optional[float]] = []
    for text, a in zip(completions, rows):
        try:
            target = float(str(a).replace(",", "").strip()) if a is not None else None
        except ValueError:
            target = None
        if target is None or not math.isfinite(target):
            out.append(None)
            continue
        try:
            lp = parse_lp(text)
        except Exception:  # noqa: BLE001 - whatever the text is, it scores as "does not parse", never raises
            out.append(0.0)
            continue
        reward = parse_weight
        if len(lp.variables) > max_vars or len(lp.rows) > max_constraints:
            out.append(reward)
            continue
        try:
            status, value = solve_lp(lp, nonneg=nonneg, time_limit_s=time_limit_s)
        except (ImportError, ModuleNotFoundError):
            raise
        except Exception:  # noqa: BLE001 - a solver failure on model-written input scores like "not solved"
            status, value = "error", None
        if status == "optimal" and value is not None:
            reward += feasible_weight
            if abs(value - target) <= atol + rtol * abs(target):
                reward += objective_weight
        out.append(reward)
    return out
