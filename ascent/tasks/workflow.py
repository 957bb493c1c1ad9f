"""The `workflow` task: the policy is a query-level meta-agent (FlowReasoner, Gao et al. 2025, arXiv:2504.15257)
that reads an addition query `a+b=` and writes the workflow that answers it, e.g. `solve`, `solve>check` or
`split` (the DSL and its execution: `ascent/rewards/workflow.py`, reward `workflow_exec`).

    data.task=workflow(digits=[2, 3, 4], hard_share=0.5)     # YAML: task: {workflow: {hard_share: 0.5}}

Queries of graded difficulty: d digits (uniform over `digits`); an easy query has only digits 0-4, so no column
carries, a hard one at least one carry (share `hard_share`); a query shows which it is (a digit of 5-9). The
worker drops carries, so `solve` (one call) is right on an easy query and often wrong on a hard one, where `split`
(one call per column) or `solve>check` pay off: the best workflow depends on the query. The warm-start teacher
writes one of `teacher_workflows` uniformly at random, or with probability `teacher_best` the query's best workflow
(a weak meta-agent to distil from), so RL has to learn which workflow suits which query. Rows: `{"prompt",
"answer", "a", "b", "hard", "digits"}`; `answer` is a + b (what the workflow's execution must reach; the warm start
imitates the teacher).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from ascent.config.schema import DataConfig
from ascent.policy.tokenizer import char_tokenizer
from ascent.rewards.workflow import OPERATORS, parse_workflow
from ascent.tasks.base import TASKS, DataError, Row, TaskData, Teacher, split_rows


@dataclass(frozen=True)
class WorkflowTaskParams:
    """The workflow task."""

    digits: list[int] = field(default_factory=lambda: [2, 3, 4])
    """Operand digit counts, drawn uniformly per query; each in 1..6."""
    hard_share: float = 0.5
    """Share of queries with at least one carry (the others have none), in [0, 1]."""
    teacher_workflows: list[str] = field(default_factory=lambda: ["solve", "split", "solve>check"])
    """The warm-start teacher writes one of these uniformly at random (query-blind); each a valid workflow."""
    teacher_best: float = 0.0
    """The teacher's chance of writing the query's best workflow under the default reward (`solve` on an easy query,
    `split` on a hard one) instead of a uniform pick (FlowReasoner's warm start is distilled from a stronger
    meta-agent); in [0, 1]; 0: query-blind."""
    num_rows: int = 20000
    """Queries generated (held-out ones first), > data.num_eval."""

    def __post_init__(self) -> None:
        if not self.digits or any(not 1 <= d <= 6 for d in self.digits):
            raise ValueError(f"digits must be a non-empty list of values in 1..6, got {self.digits}")
        if not 0.0 <= self.teacher_best <= 1.0:
            raise ValueError(f"teacher_best must be in [0, 1], got {self.teacher_best}")
        if not 0.0 <= self.hard_share <= 1.0:
            raise ValueError(f"hard_share must be in [0, 1], got {self.hard_share}")
        bad = [w for w in self.teacher_workflows if parse_workflow(w) is None]
        if not self.teacher_workflows or bad:
            raise ValueError(f"teacher_workflows must be valid workflows over {OPERATORS}, got {bad or '[]'}")


def carries(a: int, b: int) -> int:
    """The number of carries of the exact column addition a + b.

    >>> carries(58, 67), carries(12, 34), carries(999, 1)
    (2, 0, 3)
    """
    n, carry = 0, 0
    while a or b:
        carry = int(a % 10 + b % 10 + carry >= 10)
        n += carry
        a, b = a // 10, b // 10
    return n


def query(digits: int, hard: bool, rng: random.Random) -> tuple[int, int]:
    """Operands of `digits` digits: hard, at least one carry (rejection sampling over all digits); easy, every digit
    in 0-4 (so no column can carry; the leading digit 1-4 beyond one digit). A carry needs a digit >= 5, so what
    makes a query hard is visible in it: it has a digit of 5-9."""
    if not hard:
        first = 1 if digits > 1 else 0
        return tuple(  # type: ignore[return-value]
            int("".join(str(rng.randint(first if i == 0 else 0, 4)) for i in range(digits))) for _ in range(2)
        )
    lo, hi = (10 ** (digits - 1) if digits > 1 else 0), 10**digits
    while True:
        a, b = rng.randrange(lo, hi), rng.randrange(lo, hi)
        if carries(a, b) > 0:
            return a, b


def workflow_teacher(workflows: list[str], best: float = 0.0) -> Teacher:
    """With probability `best` the query's best workflow (`split` if it is hard, else `solve`), otherwise one of
    `workflows` uniformly at random (best = 0: query-blind)."""

    def teach(row: Row, rng: random.Random) -> str:
        if best and rng.random() < best:
            return "split" if row["hard"] else "solve"
        return rng.choice(workflows)

    return teach


@TASKS.register("workflow", params=WorkflowTaskParams, paper=None, fidelity="ascent")
def workflow(cfg: DataConfig, seed: int, params: WorkflowTaskParams = WorkflowTaskParams()) -> TaskData:
    """Addition queries of graded difficulty for a meta-agent that writes a workflow (reward `workflow_exec`)."""
    if cfg.num_eval >= params.num_rows:
        raise DataError(
            f"data.num_eval={cfg.num_eval} leaves no training queries (workflow.num_rows={params.num_rows})"
        )
    rng = random.Random(seed)
    rows = []
    for _ in range(params.num_rows):
        d, hard = rng.choice(params.digits), rng.random() < params.hard_share
        a, b = query(d, hard, rng)
        rows.append({"prompt": f"{a}+{b}=", "answer": str(a + b), "a": a, "b": b, "hard": hard, "digits": d})
    train, held = split_rows(rows, cfg)  # no training query repeats a held-out one
    if cfg.num_train:
        train = train[: cfg.num_train]
    tokenizer = char_tokenizer("0123456789+=> ", pieces=list(OPERATORS))
    return TaskData(
        train=train,
        eval=held,
        reward="workflow_exec",
        teacher=workflow_teacher(list(params.teacher_workflows), params.teacher_best),
        tokenizer=tokenizer,
    )
