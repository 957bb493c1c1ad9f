"""The `opt_modelling` task: small optimisation problems described in words, which the model answers with a
mixed-integer model in `milp_solver`'s text format (ascent/rewards/milp_solver.py); the reward solves the model
with HiGHS and compares its optimum with the row's `answer` (the SDRL row's solver-verified reward; SIRL, Chen et
al. 2025, arXiv:2505.11792).

Two kinds of problem, generated offline from a seed:

- production (`whole`): two products with profits, two resources with per-unit use and a limit, whole units only:
  `max p1 x + p2 y  s.t.  a1 x + a2 y <= A,  b1 x + b2 y <= B,  int x, y`;
- selection (`pick`): three projects with values and costs and a budget, each taken at most once:
  `max v1 a + v2 b + v3 c  s.t.  c1 a + c2 b + c3 c <= C,  bin a, b, c`.

Every instance is drawn until its integer optimum differs from its LP relaxation's, so a model without the
integrality declaration is wrong (the reward checks the integer modelling, not only the arithmetic). The teacher
writes the correct model but forgets the `int` / `bin` line with probability `teacher_drop_int`: the systematic
mistake that the warm start imitates and RL with the solver's reward can remove.

A third kind is continuous, for SIRL's LP verifier (`lp_solver`), and is drawn alone (`kinds=[blend]`):

- blend (`blend`): the production problem with divisible amounts, a plain LP:
  `max p1 x + p2 y  s.t.  a1 x + a2 y <= A,  b1 x + b2 y <= B` (answer: the LP optimum, often fractional).
  Every instance is drawn until both constraints matter (leaving out the second changes the optimum), and the
  teacher leaves out the second resource line with probability `teacher_drop_row`: its systematic mistake, a
  model that still parses and solves but to the wrong optimum.

    data.task=opt_modelling(style=compact, teacher_drop_int=0.5)    # the scratch model's recipe (opt-milp)
    data.task=opt_modelling(style=prose)                            # full sentences, for SmolLM2
    data.task="opt_modelling(kinds=[blend],teacher_drop_row=0.5)"    # continuous LPs, reward lp_solver (SIRL)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from random import Random
from typing import Literal

from ascent.config.schema import DataConfig
from ascent.policy.tokenizer import char_tokenizer
from ascent.tasks.base import TASKS, DataError, Row, TaskData, split_rows

KINDS = ("whole", "pick", "blend")
PIECES = (
    "max ",
    "<=",
    "int x,y",
    "bin a,b,c",
    "whole ",
    "pick ",
    "blend ",
    "profit ",
    "use ",
    "cost ",
    "budget ",
    "model:",
)


@dataclass(frozen=True)
class OptModellingParams:
    """The optimisation-modelling task."""

    style: Literal["compact", "prose"] = "compact"
    """compact: terse keyword prompts for the scratch model's character tokenizer; prose: full sentences."""
    kinds: list[str] = field(default_factory=lambda: ["whole", "pick"])
    """Problem kinds to draw from: whole (production, integer variables), pick (selection, binary variables), or
    blend alone (production with continuous amounts, a plain LP checked by `lp_solver`)."""
    teacher_drop_int: float = 0.5
    """Probability that the warm-start teacher leaves out the integrality line (its systematic mistake)."""
    teacher_drop_row: float = 0.5
    """blend: probability that the warm-start teacher leaves out the second resource constraint."""

    def __post_init__(self) -> None:
        if not self.kinds or any(k not in KINDS for k in self.kinds):
            raise ValueError(f"kinds must be a non-empty subset of {KINDS}, got {self.kinds}")
        if "blend" in self.kinds and len(set(self.kinds)) > 1:
            raise ValueError(f"kinds: blend (continuous, reward lp_solver) is drawn alone, got {self.kinds}")
        for name in ("teacher_drop_int", "teacher_drop_row"):
            if not 0 <= getattr(self, name) <= 1:
                raise ValueError(f"{name} must be in [0, 1], got {getattr(self, name)}")


def _optimum(obj: list[int], rows: list[tuple[list[int], int]], upper: int) -> tuple[float, float]:
    """(integer optimum by enumerating every point of {0..upper}^n, LP-relaxation optimum by HiGHS's simplex) of
    max obj.x s.t. a.x <= b for (a, b) in rows, 0 <= x <= upper (the generator's small integer models)."""
    import itertools

    import numpy as np
    from scipy.optimize import linprog

    pts = np.array(list(itertools.product(range(upper + 1), repeat=len(obj))))  # (P, n)
    ok = np.all([pts @ np.array(a) <= b for a, b in rows], axis=0)
    best = float((pts[ok] @ np.array(obj)).max())
    res = linprog(
        -np.array(obj, dtype=float),
        A_ub=np.array([a for a, _ in rows], dtype=float),
        b_ub=np.array([b for _, b in rows], dtype=float),
        bounds=[(0, upper)] * len(obj),
        method="highs",
    )
    if res.status != 0:
        raise DataError(f"generated model not solvable: {obj}, {rows}")
    return best, float(-res.fun)


def _whole(rng: Random, style: str) -> tuple[str, str, float, float]:
    p, a, b = (
        [rng.randint(2, 9) for _ in range(2)],
        [rng.randint(1, 6) for _ in range(2)],
        [rng.randint(1, 6) for _ in range(2)],
    )
    A, B = rng.randint(8, 30), rng.randint(8, 30)
    model = f"max {p[0]}x+{p[1]}y\n{a[0]}x+{a[1]}y<={A}\n{b[0]}x+{b[1]}y<={B}\nint x,y"
    value, relaxed = _optimum(p, [(a, A), (b, B)], upper=30)  # a, b >= 1 and A, B <= 30 bound x, y by 30
    if style == "compact":
        prompt = f"whole profit {p[0]} {p[1]} use {a[0]} {a[1]} <={A} use {b[0]} {b[1]} <={B} model:"
    else:
        prompt = (
            f"A workshop makes chairs (x) and tables (y). Each chair earns {p[0]} and each table {p[1]}. "
            f"A chair uses {a[0]} hours of wood work and a table {a[1]}, with {A} hours available; a chair uses "
            f"{b[0]} hours of painting and a table {b[1]}, with {B} hours available. Only whole items can be made. "
            "Write the model that maximises profit (objective line, constraints, then the integer declaration)."
        )
    return prompt, model, value, relaxed


def _pick(rng: Random, style: str) -> tuple[str, str, float, float]:
    v, c = [rng.randint(2, 9) for _ in range(3)], [rng.randint(2, 9) for _ in range(3)]
    C = rng.randint(4, sum(c) - 1)
    model = f"max {v[0]}a+{v[1]}b+{v[2]}c\n{c[0]}a+{c[1]}b+{c[2]}c<={C}\nbin a,b,c"
    value, relaxed = _optimum(v, [(c, C)], upper=1)
    if style == "compact":
        prompt = f"pick profit {v[0]} {v[1]} {v[2]} cost {c[0]} {c[1]} {c[2]} budget <={C} model:"
    else:
        prompt = (
            f"Three projects a, b and c are worth {v[0]}, {v[1]} and {v[2]} and cost {c[0]}, {c[1]} and {c[2]}. "
            f"The budget is {C} and each project is taken once or not at all. Write the model that maximises the "
            "total worth (objective line, constraints, then the binary declaration)."
        )
    return prompt, model, value, relaxed


def _lp_optimum(obj: list[int], rows: list[tuple[list[int], int]]) -> float:
    """The optimum of max obj.x s.t. a.x <= b for (a, b) in rows, x >= 0, by HiGHS's simplex."""
    import numpy as np
    from scipy.optimize import linprog

    res = linprog(
        -np.array(obj, dtype=float),
        A_ub=np.array([a for a, _ in rows], dtype=float),
        b_ub=np.array([b for _, b in rows], dtype=float),
        bounds=[(0, None)] * len(obj),
        method="highs",
    )
    if res.status != 0:
        raise DataError(f"generated model not solvable: {obj}, {rows}")
    return float(-res.fun) + 0.0


def _blend(rng: Random, style: str) -> tuple[str, str, float, float]:
    """(prompt, model, LP optimum, optimum without the second constraint): a continuous production problem."""
    p, a, b = (
        [rng.randint(2, 9) for _ in range(2)],
        [rng.randint(1, 6) for _ in range(2)],
        [rng.randint(1, 6) for _ in range(2)],
    )
    A, B = rng.randint(8, 30), rng.randint(8, 30)
    model = f"max {p[0]}x+{p[1]}y\n{a[0]}x+{a[1]}y<={A}\n{b[0]}x+{b[1]}y<={B}"
    value, dropped = _lp_optimum(p, [(a, A), (b, B)]), _lp_optimum(p, [(a, A)])
    if style == "compact":
        prompt = f"blend profit {p[0]} {p[1]} use {a[0]} {a[1]} <={A} use {b[0]} {b[1]} <={B} model:"
    else:
        prompt = (
            f"A refinery blends two products x and y (any non-negative amounts). Each unit of x earns {p[0]} and of "
            f"y {p[1]}. A unit of x uses {a[0]} hours of distilling and a unit of y {a[1]}, with {A} hours "
            f"available; a unit of x uses {b[0]} hours of mixing and a unit of y {b[1]}, with {B} hours available. "
            "Write the linear program that maximises profit (objective line, then the constraints)."
        )
    return prompt, model, round(value, 4), dropped


def opt_rows(n: int, seed: int, params: OptModellingParams) -> list[Row]:
    """n distinct rows, each with a positive integrality gap, or (blend) a binding second constraint (module
    docstring)."""
    rng, rows, seen = Random(seed), [], set()
    make = {"whole": _whole, "pick": _pick, "blend": _blend}
    while len(rows) < n:
        kind = rng.choice(params.kinds)
        prompt, model, value, other = make[kind](rng, params.style)
        if prompt in seen:
            continue
        if abs(value - other) <= 1e-3:  # integrality (the second constraint, for blend) would not matter
            continue
        seen.add(prompt)
        rows.append({"prompt": prompt, "answer": f"{value:g}", "model": model, "kind": kind})
    return rows


def model_teacher(drop_int: float, drop_row: float = 0.0):
    """Writes the row's correct model, leaving out its last line (the integrality declaration; the second resource
    constraint of a blend row) with probability `drop_int` (`drop_row` for blend rows)."""

    def teach(row: Row, rng: Random) -> str:
        model = row["model"]
        drop = drop_row if row.get("kind") == "blend" else drop_int
        return model.rsplit("\n", 1)[0] if rng.random() < drop else model

    return teach


@TASKS.register("opt_modelling", params=OptModellingParams, paper=None, fidelity="ascent")
def opt_modelling(cfg: DataConfig, seed: int, params: OptModellingParams = OptModellingParams()) -> TaskData:
    """Optimisation problems answered with a MILP in milp_solver's format; reward `milp_solver` (HiGHS); the teacher
    forgets the integrality declaration with probability teacher_drop_int. kinds=[blend]: continuous LPs, reward
    `lp_solver` (SIRL), the teacher forgets the second constraint with probability teacher_drop_row."""
    if cfg.num_train is not None and cfg.num_train < 1:
        raise DataError("data.num_train must be >= 1 for opt_modelling")
    rows = opt_rows((cfg.num_train or 4000) + cfg.num_eval, seed, params)
    train, held = split_rows(rows, cfg)
    tokenizer = None
    if params.style == "compact":
        tokenizer = char_tokenizer("0123456789abcxy+<=:,\n " + "".join(sorted(set("".join(PIECES)))), PIECES)
    return TaskData(
        train=train,
        eval=held,
        reward="lp_solver" if set(params.kinds) == {"blend"} else "milp_solver",
        teacher=model_teacher(params.teacher_drop_int, params.teacher_drop_row),
        tokenizer=tokenizer,
    )
