"""The `addition` task (the default recipe's): d-digit sums `a+b=` checked exactly, and a rule-based teacher
with one systematic mistake (it sometimes drops the ones-carry) for the warm start to imitate.

    data.task=addition(digits=3, teacher_carry_drop=1.0)      # YAML: task: {addition: {digits: 3}}
    data.task=addition(digits=3, column_drop=[0.6, 0.97])     # the hard recipe's teacher: two carry mistakes
    data.task=addition(referee_rows=0.5, open_ended=true)     # URPO's judging rows and unlabelled sums

`referee_rows` recasts a share of the training problems as judging tasks (URPO, Lu et al. 2025, arXiv:2507.17515:
preference data cast as generative tasks in the one GRPO loop): the prompt `a+b=c?` shows a candidate sum c, the
correct one or a wrong one with equal probability (the teacher's dropped carry where there is a carry, else an
error of 1 or 10), and the row's `answer` is the verdict, `1` (correct) or `0`. The teacher judges with its own
arithmetic (it says `1` when c equals the sum it would write itself), so a warm start learns a referee with the
player's blind spot. `open_ended=true` takes the `answer` off the other training rows (they keep `gold`, which no
reward reads): only a self-judge can score them, as URPO's open-ended instructions.
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
    referee_rows: float = 0.0
    """Share of the training problems recast as judging tasks `a+b=c?` -> `1`/`0` (URPO's referee data; the
    alphabet gains `?`); 0: none (the held-out rows are always sums)."""
    open_ended: bool = False
    """Training sums without an `answer` (kept as `gold`): no verifier can score them, only a self-judge."""

    def __post_init__(self) -> None:
        if self.digits < 1:
            raise ValueError(f"digits must be >= 1, got {self.digits}")
        if not 0 <= self.teacher_carry_drop <= 1:
            raise ValueError(f"teacher_carry_drop must be in [0, 1], got {self.teacher_carry_drop}")
        if len(self.column_drop) > self.digits or any(not 0 <= p <= 1 for p in self.column_drop):
            raise ValueError(
                f"column_drop needs at most digits={self.digits} probabilities in [0, 1], got {self.column_drop}"
            )
        if not 0 <= self.referee_rows < 1:
            raise ValueError(f"referee_rows must be in [0, 1), got {self.referee_rows}")


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


def referee_teacher(player: Teacher) -> Teacher:
    """The player teacher, and on judging rows (`candidate` c) the verdict of a referee with its arithmetic: `1`
    when c equals the sum the player teacher writes for (a, b) this time, else `0`."""

    def teach(row: Row, rng: random.Random) -> str:
        if row.get("candidate") is None:
            return player(row, rng)
        return "1" if player(row, rng) == str(row["candidate"]) else "0"

    return teach


def judging_row(a: int, b: int, rng: random.Random, wrong: Teacher) -> Row:
    """`a+b=c?` with the correct sum or a wrong one (equal odds); `answer` is the verdict `1` / `0`.

    >>> judging_row(17, 25, random.Random(0), addition_teacher(1.0))
    {'prompt': '17+25=32?', 'answer': '0', 'a': 17, 'b': 25, 'candidate': 32}
    """
    total = a + b
    if rng.random() < 0.5:
        c = total
    else:
        c = int(wrong({"a": a, "b": b}, rng))  # the teacher's mistake where there is a carry to drop
        if c == total:
            c = total + rng.choice([1, 10]) * (1 if total < 10 or rng.random() < 0.5 else -1)
    return {"prompt": f"{a}+{b}={c}?", "answer": "1" if c == total else "0", "a": a, "b": b, "candidate": c}


def carries(a: int, b: int) -> int:
    """How many columns of a + b produce a carry.

    >>> carries(17, 25), carries(58, 67), carries(12, 34)
    (1, 2, 0)
    """
    n, carry = 0, 0
    while a or b:
        carry = int(a % 10 + b % 10 + carry >= 10)
        n += carry
        a, b = a // 10, b // 10
    return n


def sum_variant(row: Row, harder: bool, rng: random.Random) -> Row | None:
    """A new sum one column-carry harder (or easier) than the row's, with operands of the same number of digits:
    among every change of one digit of a or b (leading digits stay non-zero), one of those with one carry more
    (harder) or one fewer (easier), drawn by `rng`; None when there is none (every column already carries, or
    none does) or the row is not a plain sum (a judging row).

    >>> sum_variant({"prompt": "12+34=", "answer": "46", "a": 12, "b": 34}, True, random.Random(0))
    {'prompt': '19+34=', 'answer': '53', 'a': 19, 'b': 34}
    """
    if row.get("candidate") is not None or not isinstance(row.get("a"), int) or not isinstance(row.get("b"), int):
        return None
    a, b = row["a"], row["b"]
    want = carries(a, b) + (1 if harder else -1)
    options = []
    for which, x in ((0, a), (1, b)):
        ds = str(x)
        for pos in range(len(ds)):
            for d in "0123456789":
                if d == ds[pos] or (pos == 0 and d == "0" and len(ds) > 1):
                    continue
                y = int(ds[:pos] + d + ds[pos + 1 :])
                pair = (y, b) if which == 0 else (a, y)
                if carries(*pair) == want:
                    options.append(pair)
    if not options:
        return None
    na, nb = rng.choice(options)
    return {"prompt": f"{na}+{nb}=", "answer": str(na + nb), "a": na, "b": nb}


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
    if params.open_ended:
        train = [{**{k: v for k, v in r.items() if k != "answer"}, "gold": r["answer"]} for r in train]
    if params.referee_rows:
        judge_rng = random.Random(seed + 1)
        wrong = column_teacher([1.0] * len(params.column_drop)) if params.column_drop else addition_teacher(1.0)
        for i in range(len(train)):
            if judge_rng.random() < params.referee_rows:
                train[i] = judging_row(train[i]["a"], train[i]["b"], judge_rng, wrong)
        teacher = referee_teacher(teacher)
    tokenizer = char_tokenizer("0123456789+= " + ("?" if params.referee_rows else ""))
    return TaskData(train=train, eval=rows[: cfg.num_eval], reward="exact_answer", teacher=teacher, tokenizer=tokenizer)
