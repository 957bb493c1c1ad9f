"""The `addition` task (the default recipe's): d-digit sums `a+b=` checked exactly, and a rule-based teacher
with one systematic mistake (it sometimes drops the ones-carry) for the warm start to imitate.

    data.task=addition(digits=3, teacher_carry_drop=1.0)      # YAML: task: {addition: {digits: 3}}
    data.task=addition(digits=3, column_drop=[0.6, 0.97])     # the hard recipe's teacher: two carry mistakes
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from ascent.config.schema import DataConfig
from ascent.policy.tokenizer import char_tokenizer
from ascent.tasks.base import TASKS, DataError, Row, TaskData, Teacher


@dataclass(frozen=True)
class AdditionParams:
    """The addition task."""

    digits: int = 2
    """Operand digits (1: 0-9, 2: 10-99, ...)."""
    teacher_carry_drop: float = 0.6
    """Probability that the warm-start teacher drops the ones-carry (its systematic mistake), in [0, 1]."""
    column_drop: list[float] = field(default_factory=list)
    """Per-column carry-drop probabilities of the teacher, ones column first (replaces teacher_carry_drop when
    given): [0.6, 0.97] forgets the carry out of the ones column 60% of the time and the carry out of the tens
    column 97% of the time, so the warm start rarely samples a correct tens carry (an exploration problem)."""

    def __post_init__(self) -> None:
        if self.digits < 1:
            raise ValueError(f"digits must be >= 1, got {self.digits}")
        if not 0 <= self.teacher_carry_drop <= 1:
            raise ValueError(f"teacher_carry_drop must be in [0, 1], got {self.teacher_carry_drop}")
        if len(self.column_drop) > self.digits or any(not 0 <= p <= 1 for p in self.column_drop):
            raise ValueError(
                f"column_drop needs at most digits={self.digits} probabilities in [0, 1], got {self.column_drop}"
            )


def addition_teacher(carry_drop: float) -> Teacher:
    """A rule-based adder with a systematic mistake: with probability `carry_drop` it forgets the carry
    out of the ones column (so 17+25 -> 32 instead of 42)."""

    def teach(row: Row, rng: random.Random) -> str:
        a, b = int(row["a"]), int(row["b"])
        total = a + b
        if (a % 10) + (b % 10) >= 10 and rng.random() < carry_drop:
            total -= 10
        return str(total)

    return teach


def column_teacher(column_drop: list[float]) -> Teacher:
    """A column-by-column adder that forgets the carry out of column i (ones = 0) with probability
    column_drop[i] when there is one (columns past the list never drop): [0.6, 0.97] turns 58+67 = 125 into
    115 (ones carry dropped), 25 (tens carry dropped) or 15 (both)."""

    def teach(row: Row, rng: random.Random) -> str:
        a, b = int(row["a"]), int(row["b"])
        total, carry, column = 0, 0, 0
        while a or b or carry:
            s = a % 10 + b % 10 + carry
            carry = int(s >= 10)
            if carry and column < len(column_drop) and rng.random() < column_drop[column]:
                carry = 0
            total += (s % 10) * 10**column
            a, b, column = a // 10, b // 10, column + 1
        return str(total)

    return teach


@TASKS.register("addition", params=AdditionParams, paper=None, fidelity="ascent")
def addition(cfg: DataConfig, seed: int, params: AdditionParams = AdditionParams()) -> TaskData:
    """d-digit addition `a+b=` checked exactly; the teacher drops the ones-carry (teacher_carry_drop)."""
    lo, hi = 10 ** (params.digits - 1) if params.digits > 1 else 0, 10**params.digits
    pairs = [(a, b) for a in range(lo, hi) for b in range(lo, hi)]
    rng = random.Random(seed)
    if len(pairs) > 200_000:
        pairs = [(rng.randrange(lo, hi), rng.randrange(lo, hi)) for _ in range(200_000)]
    rng.shuffle(pairs)
    if cfg.num_eval >= len(pairs):
        raise DataError(f"data.num_eval={cfg.num_eval} leaves no training problems ({len(pairs)} in all)")
    rows = [{"prompt": f"{a}+{b}=", "answer": str(a + b), "a": a, "b": b} for a, b in pairs]
    train = rows[cfg.num_eval :]
    if cfg.num_train:
        train = train[: cfg.num_train]
    teacher = column_teacher(params.column_drop) if params.column_drop else addition_teacher(params.teacher_carry_drop)
    tokenizer = char_tokenizer("0123456789+= ")
    return TaskData(train=train, eval=rows[: cfg.num_eval], reward="exact_answer", teacher=teacher, tokenizer=tokenizer)
