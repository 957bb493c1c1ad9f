"""The `sum_regression` task: a numeric-regression task for batch-level regression rewards (the CCC reward, Du, Song
& Li 2026, arXiv:2605.01402, "deep imbalanced regression"), built on the addition task's generator.

The prompt is a sum of two one-decimal numbers, `2.7+3.5=`, and the answer the real-valued sum `6.2`, graded by
closeness (reward `closeness`: 1 - |error| / scale; 1 only for the exact value). Two things make it a regression
task of the paper's kind rather than an exact-answer one:

- imbalance: a share `1 - tail` of the rows draws both operands from the head range 1.0-3.9, the rest from the
  whole range 1.0-9.9, so targets above 7.8 (the rows' `part` = `tail`) are the minority (about 23% of the
  training rows and 20% of the held-out ones with tail=0.2);
- a teacher that regresses to the mean: with probability `teacher_shrink_rate` it writes m + (1 - shrink)(t - m),
  rounded to one decimal, instead of t (m = the training targets' mean), the scale compression toward the
  majority that imbalanced regression shows and the CCC's scale and location terms measure. Its errors grow
  with the distance from m, so the rare tail rows carry the largest ones.

    data.task=sum_regression                                  # tail=0.2, teacher_shrink=0.5, rate 0.6
    data.task=sum_regression(tail=0.1, teacher_shrink_rate=1.0)
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from ascent.config.schema import DataConfig
from ascent.policy.tokenizer import char_tokenizer
from ascent.tasks.base import TASKS, DataError, Row, TaskData, Teacher

HEAD_MAX = 39
"""Head operands are 1.0-3.9 (tenths 10-39); tail operands 1.0-9.9 (10-99)."""


@dataclass(frozen=True)
class SumRegressionParams:
    """The numeric-regression task."""

    tail: float = 0.2
    """Share of rows whose operands come from the whole range 1.0-9.9 (the rest: the head, 1.0-3.9), in [0, 1]."""
    teacher_shrink: float = 0.5
    """How far the teacher pulls a target toward the training mean when it errs, in [0, 1] (1: writes the mean)."""
    teacher_shrink_rate: float = 0.6
    """Probability that the warm-start teacher shrinks the target (its systematic mistake), in [0, 1]."""

    def __post_init__(self) -> None:
        for name in ("tail", "teacher_shrink", "teacher_shrink_rate"):
            if not 0 <= getattr(self, name) <= 1:
                raise ValueError(f"{name} must be in [0, 1], got {getattr(self, name)}")


def tenths(x: int) -> str:
    """A number of tenths written with one decimal.

    >>> tenths(62), tenths(100), tenths(7)
    ('6.2', '10.0', '0.7')
    """
    return f"{x // 10}.{x % 10}"


def draw(rng: random.Random, tail: float) -> tuple[int, int]:
    """One operand pair in tenths: both from the head (10-39) with probability 1 - tail, else from 10-99."""
    hi = 99 if rng.random() < tail else HEAD_MAX
    return rng.randint(10, hi), rng.randint(10, hi)


def row(a: int, b: int) -> Row:
    """The row of `a+b=` (tenths): `answer` the sum, `part` head / tail (sum above the head's largest, 7.8).

    >>> row(27, 35)
    {'prompt': '2.7+3.5=', 'answer': '6.2', 'a': 27, 'b': 35, 'part': 'head'}
    """
    return {
        "prompt": f"{tenths(a)}+{tenths(b)}=",
        "answer": tenths(a + b),
        "a": a,
        "b": b,
        "part": ("tail" if a + b > 2 * HEAD_MAX else "head"),
    }


def regression_rows(num_train: int, num_eval: int, seed: int, tail: float) -> tuple[list[Row], list[Row]]:
    """(train, held-out): `num_eval` distinct held-out problems, then `num_train` training draws from the same
    distribution (repeats allowed, as a sample of it) that never repeat a held-out problem."""
    pairs = (HEAD_MAX - 9) ** 2 if tail == 0 else 90**2
    if num_eval > pairs // 2:
        raise DataError(f"sum_regression(tail={tail}) has {pairs} distinct problems: data.num_eval={num_eval} > half")
    rng, held = random.Random(seed), {}
    while len(held) < num_eval:
        held.setdefault(draw(rng, tail), None)
    train = []
    while len(train) < num_train:
        a, b = draw(rng, tail)
        if (a, b) not in held:
            train.append(row(a, b))
    return train, [row(a, b) for a, b in held]


def shrink_teacher(mean: float, shrink: float, rate: float) -> Teacher:
    """With probability `rate` writes m + (1 - shrink)(t - m) rounded to a tenth (t the row's sum, m = `mean`, both
    in tenths), else t: 7.0+8.0= with m = 5.0, shrink 0.5 -> 10.0 instead of 15.0."""

    def teach(row: Row, rng: random.Random) -> str:
        t = int(row["a"]) + int(row["b"])
        if rng.random() < rate:
            t = int(round(mean + (1 - shrink) * (t - mean)))
        return tenths(t)

    return teach


@TASKS.register("sum_regression", params=SumRegressionParams, paper=None, fidelity="ascent")
def sum_regression(cfg: DataConfig, seed: int, params: SumRegressionParams = SumRegressionParams()) -> TaskData:
    """Real-valued sums `2.7+3.5=` -> `6.2` with imbalanced targets, graded by `closeness`; the teacher shrinks
    toward the mean (teacher_shrink) with probability teacher_shrink_rate."""
    train, held = regression_rows(cfg.num_train or 4000, cfg.num_eval, seed, params.tail)
    mean = sum(int(r["a"]) + int(r["b"]) for r in train) / len(train)
    return TaskData(
        train=train,
        eval=held,
        reward="closeness",
        teacher=shrink_teacher(mean, params.teacher_shrink, params.teacher_shrink_rate),
        tokenizer=char_tokenizer("0123456789+=. "),
    )
