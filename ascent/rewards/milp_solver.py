"""Solver-verified reward for generated optimisation models with integer variables: the completion states a
mixed-integer linear program in a restricted text format, HiGHS's MILP solver (scipy.optimize.milp) solves it, and
the reward is 1 when the model's optimum equals the row's answer, else 0 with the reason recorded.

The solver-as-verifier reward of SIRL (Chen et al. 2025, arXiv:2505.11792: syntax, feasibility and the optimal
value checked by a real solver on the instance-level model), the verifier the issue's SDRL row (Strategy-Diverse
RL for LLMs as optimisation meta-solvers; arXiv id not found) trains with; `lp_solver` (ascent/rewards/lp_solver.py)
is its continuous-LP, partial-credit predecessor. The text is parsed, never run: no generated code is executed,
and a completion that holds program code is rejected as such.

The format is `lp_solver`'s (an objective line `maximize` / `minimize` + linear expression, constraints with
<=, >=, =, an optional `subject to` header, `free` declarations, `end`) plus integrality declarations:

    int x, y          (also `integer`, `integers`, `general`, `generals`, `gen`): x and y take integer values
    bin z             (also `binary`, `binaries`): z in {0, 1}

Variables are non-negative unless declared free; a declared integer or binary variable must appear in the model.
Reasons recorded per sample (`milp/<reason>_frac` in the run's metrics): ok, no_answer (the row has no numeric
answer: reward None), code_rejected, unparsable, too_large, infeasible, unbounded, solver_error, wrong_objective.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import dataclass
from typing import Any, Optional

from ascent import papers
from ascent.rewards.builtin import REWARDS
from ascent.rewards.lp_solver import LinearProgram, LPParseError, _lp_lines, parse_lp
from ascent.typed import build

REASONS = (
    "ok",
    "no_answer",
    "code_rejected",
    "unparsable",
    "too_large",
    "infeasible",
    "unbounded",
    "solver_error",
    "wrong_objective",
)
_DECLARE = re.compile(r"^(integers?|int|generals?|gen|binary|binaries|bin)\s*:?\s+(.+)$", re.IGNORECASE)
_CODE = re.compile(
    r"^\s*(import\s+\w|from\s+[\w.]+\s+import\b|def\s+\w+\s*\(|class\s+\w+\s*[:(])|\b(exec|eval|compile)\s*\(|"
    r"__\w+__|os\.system|subprocess|```\s*py(thon)?\b|\.addVar\(|\.addConstr|gurobipy|\bpulp\.|pyomo",
    re.IGNORECASE | re.MULTILINE,
)
"""Program code (Python statements, solver APIs): recorded as code_rejected; prose that merely says "return" or
"class" is not code."""


@dataclass
class MixedIntegerProgram:
    """A parsed MILP: the LP part and the integer / binary variables."""

    lp: LinearProgram
    integers: set[str]
    binaries: set[str]


@dataclass(frozen=True)
class Verdict:
    """The reward of one completion and why."""

    reward: Optional[float]
    reason: str
    value: Optional[float] = None
    """The model's optimum when it has one."""
    detail: str = ""


def parse_milp(text: str) -> MixedIntegerProgram:
    """Parse the documented format (module docstring); raises LPParseError saying what is wrong.

    >>> m = parse_milp("maximize 5x + 4y\\n6x + 4y <= 24\\nx + 2y <= 6\\nint x, y")
    >>> sorted(m.integers), m.lp.objective
    (['x', 'y'], {'x': 5.0, 'y': 4.0})
    """
    kept, integers, binaries = [], set(), set()
    for line in _lp_lines(text):
        m = _DECLARE.match(line)
        if not m:
            kept.append(line)
            continue
        names = [n for n in re.split(r"[\s,]+", m.group(2)) if n]
        if not names or not all(re.fullmatch(r"[A-Za-z_]\w*", n) for n in names):
            raise LPParseError(f"bad declaration {line!r}")
        (binaries if m.group(1).lower().startswith("bin") else integers).update(names)
    lp = parse_lp("\n".join(kept))
    known = set(lp.variables)
    unknown = sorted((integers | binaries) - known)
    if unknown:
        raise LPParseError(f"declared but not in the model: {', '.join(unknown)}")
    if binaries & lp.free:
        raise LPParseError(f"binary and free: {', '.join(sorted(binaries & lp.free))}")
    return MixedIntegerProgram(lp, integers - binaries, binaries)


def solve_milp(m: MixedIntegerProgram, time_limit_s: float = 5.0) -> tuple[str, Optional[float]]:
    """Solve with HiGHS (scipy.optimize.milp, gap 0): ("optimal", value), ("infeasible", None), ("unbounded",
    None) or ("error", None) (time limit, numerical trouble).

    >>> solve_milp(parse_milp("maximize 5x + 4y\\n6x + 4y <= 24\\nx + 2y <= 6\\nint x, y"))
    ('optimal', 20.0)
    """
    import numpy as np
    from scipy.optimize import Bounds, LinearConstraint, linprog, milp

    lp, names = m.lp, m.lp.variables
    col = {v: j for j, v in enumerate(names)}
    rows, lo, hi = [], [], []
    for coefs, op, rhs in lp.rows:
        row = np.zeros(len(names))
        for v, c in coefs.items():
            row[col[v]] = c
        if not row.any():  # a constant statement such as 0 <= 4
            if not {"<=": 0.0 <= rhs + 1e-9, ">=": 0.0 >= rhs - 1e-9, "=": abs(rhs) <= 1e-9}[op]:
                return "infeasible", None
            continue
        rows.append(row)
        lo.append(rhs if op in (">=", "=") else -np.inf)
        hi.append(rhs if op in ("<=", "=") else np.inf)
    sign = -1.0 if lp.sense == "max" else 1.0
    c = sign * np.array([lp.objective.get(v, 0.0) for v in names])
    lb = np.array([-np.inf if v in lp.free else 0.0 for v in names])
    ub = np.array([1.0 if v in m.binaries else np.inf for v in names])
    res = milp(
        c,
        integrality=np.array([int(v in m.integers or v in m.binaries) for v in names]),
        bounds=Bounds(lb, ub),
        constraints=LinearConstraint(np.array(rows), lo, hi) if rows else (),
        options={"time_limit": float(time_limit_s), "mip_rel_gap": 0.0},
    )
    if res.status == 0 and res.x is not None:
        return "optimal", float(sign * res.fun) + lp.objective_const + 0.0
    if res.status == 2:
        return "infeasible", None
    if res.status == 3:
        return "unbounded", None
    if res.status == 4 and "unbounded or infeasible" in str(res.message):  # HiGHS's presolve could not tell
        relaxed = linprog(c, bounds=list(zip(lb, ub)), method="highs", **_rows_ub(rows, lo, hi))
        return {2: "infeasible", 3: "unbounded"}.get(relaxed.status, "error"), None
    return "error", None


def _rows_ub(rows: list, lo: list[float], hi: list[float]) -> dict:
    """Two-sided rows lo <= a.x <= hi as linprog's A_ub x <= b_ub."""
    import numpy as np

    a_ub, b_ub = [], []
    for row, low, high in zip(rows, lo, hi):
        if np.isfinite(high):
            a_ub.append(row)
            b_ub.append(high)
        if np.isfinite(low):
            a_ub.append(-row)
            b_ub.append(-low)
    return {"A_ub": np.array(a_ub), "b_ub": np.array(b_ub)} if a_ub else {}


@dataclass(frozen=True)
class MilpRewardParams:
    """The MILP reward's checks."""

    rtol: float = 1e-6
    """Relative tolerance of the optimum against the answer."""
    atol: float = 1e-6
    """Absolute tolerance of the optimum against the answer."""
    time_limit_s: float = 5.0
    """HiGHS time limit per model; a model not solved within it scores 0 (solver_error)."""
    max_vars: int = 50
    """Models with more variables score 0 (too_large) without being solved."""
    max_constraints: int = 100
    """Models with more constraints score 0 (too_large)."""
    max_chars: int = 20_000
    """Completions longer than this score 0 (too_large) without being parsed."""
    max_abs_coef: float = 1e9
    """Coefficients or right-hand sides above this in magnitude score 0 (too_large): numerics, not modelling."""

    def __post_init__(self) -> None:
        if self.rtol < 0 or self.atol < 0 or self.time_limit_s <= 0:
            raise ValueError("rtol and atol must be >= 0 and time_limit_s > 0")
        if min(self.max_vars, self.max_constraints, self.max_chars) < 1 or self.max_abs_coef <= 0:
            raise ValueError("max_vars, max_constraints, max_chars and max_abs_coef must be positive")


def verify(text: str, answer: Any, p: MilpRewardParams = MilpRewardParams()) -> Verdict:
    """The verdict on one completion against the row's numeric `answer` (module docstring); never raises on the
    completion's text."""
    try:
        target = float(str(answer).replace(",", "").strip()) if answer is not None else math.nan
    except ValueError:
        target = math.nan
    if not math.isfinite(target):
        return Verdict(None, "no_answer")
    if len(text) > p.max_chars:
        return Verdict(0.0, "too_large", detail=f"{len(text)} characters")
    code = _CODE.search(text)
    if code:
        return Verdict(0.0, "code_rejected", detail=f"program code ({code.group(0)!r}) is never run")
    try:
        m = parse_milp(text)
    except Exception as err:  # noqa: BLE001 - whatever the text is, it scores as "does not parse", never raises
        return Verdict(0.0, "unparsable", detail=str(err)[:200])
    numbers = [*m.lp.objective.values(), *(c for coefs, _, rhs in m.lp.rows for c in (*coefs.values(), rhs))]
    if len(m.lp.variables) > p.max_vars or len(m.lp.rows) > p.max_constraints:
        return Verdict(0.0, "too_large", detail=f"{len(m.lp.variables)} variables, {len(m.lp.rows)} constraints")
    if any(abs(x) > p.max_abs_coef for x in numbers):
        return Verdict(0.0, "too_large", detail=f"a coefficient above {p.max_abs_coef:g}")
    try:
        status, value = solve_milp(m, p.time_limit_s)
    except (ImportError, ModuleNotFoundError):
        raise
    except Exception as err:  # noqa: BLE001 - a solver failure on model-written input scores like "not solved"
        return Verdict(0.0, "solver_error", detail=str(err)[:200])
    if status != "optimal" or value is None:
        return Verdict(0.0, {"error": "solver_error"}.get(status, status))
    if abs(value - target) <= p.atol + p.rtol * abs(target):
        return Verdict(1.0, "ok", value)
    return Verdict(0.0, "wrong_objective", value, detail=f"optimum {value:g}, answer {target:g}")


@REWARDS.register(
    "milp_solver",
    params=MilpRewardParams,
    paper=(papers.SDRL, papers.SIRL),
    fidelity="reduced",
    departures=(
        "the model is ascent's restricted text format (LP statements plus int/bin declarations), parsed and solved "
        "by HiGHS; SIRL runs generated Gurobi code and reads its .lp file, which ascent never executes",
        "a binary reward (1: the optimum equals the answer) without SIRL's partial syntax/feasibility credit "
        "(`lp_solver` keeps the partial credit) and without SDRL's strategy-diversity term (`gated_diversity`)",
    ),
)
class MilpSolverReward:
    """Solver-verified MILP modelling reward: r = 1 if the completion's model (int/bin declarations included)
    parses, HiGHS solves it to optimality and |optimum - answer| <= atol + rtol |answer|; else 0 with the reason
    recorded (module docstring); None for a row without a numeric answer. `metrics()` reports the last call's
    share of each reason; `last_verdicts` holds the verdicts themselves."""

    def __init__(self, **params: Any) -> None:
        self.params = build(MilpRewardParams, params, "milp_solver")
        self.last_verdicts: list[Verdict] = []
        self.cache: dict[tuple[str, str], Verdict] = {}
        """Verdicts by (completion, answer): a group's identical samples are solved once (at most 10,000 kept)."""
        self.__name__ = "milp_solver"

    def _verify(self, text: str, answer: Any) -> Verdict:
        key = (text, str(answer))
        if key not in self.cache:
            if len(self.cache) >= 10_000:
                self.cache.pop(next(iter(self.cache)))
            self.cache[key] = verify(text, answer, self.params)
        return self.cache[key]

    def __call__(
        self, prompts: list[str], completions: list[str], answer: Optional[list[Any]] = None, **_: Any
    ) -> list[Optional[float]]:
        rows = list(answer) if answer is not None else [None] * len(completions)
        self.last_verdicts = [self._verify(text, a) for text, a in zip(completions, rows)]
        return [v.reward for v in self.last_verdicts]

    def metrics(self) -> dict[str, float]:
        n = max(len(self.last_verdicts), 1)
        counts = Counter(v.reason for v in self.last_verdicts)
        return {f"milp/{reason}_frac": counts[reason] / n for reason in REASONS}
