"""Built-in tasks and user datasets: train/eval rows, a tokenizer for scratch models, the default reward,
and the teacher whose demonstrations the warm start imitates.

A row is a dict with a `prompt` field; its other fields reach reward functions as keyword arguments, and
an `answer` field is what the warm start imitates when the task has no teacher of its own.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Optional

from ascent.config.schema import DataConfig
from ascent.policy.tokenizer import char_tokenizer
from ascent.registry import Registry

Row = dict[str, Any]
Teacher = Callable[[Row, random.Random], str]
TASKS: Registry = Registry("task")


class DataError(ValueError):
    """A dataset problem the user can fix."""


@dataclass
class TaskData:
    """Everything a run needs from its task."""

    train: list[Row]
    eval: list[Row]
    reward: str
    teacher: Optional[Teacher] = None
    tokenizer: Any = None
    """Tokenizer for scratch models (None: the model brings its own)."""


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


@TASKS.register("addition")
def addition(cfg: DataConfig, seed: int) -> TaskData:
    """d-digit addition `a+b=` checked exactly; the teacher drops the ones-carry (data.teacher_carry_drop)."""
    lo, hi = 10 ** (cfg.digits - 1) if cfg.digits > 1 else 0, 10**cfg.digits
    pairs = [(a, b) for a in range(lo, hi) for b in range(lo, hi)]
    rng = random.Random(seed)
    if len(pairs) > 200_000:
        pairs = [(rng.randrange(lo, hi), rng.randrange(lo, hi)) for _ in range(200_000)]
    rng.shuffle(pairs)
    if cfg.num_eval >= len(pairs):
        raise DataError(f"data.num_eval={cfg.num_eval} leaves no training problems ({len(pairs)} in all)")
    rows = [{"prompt": f"{a}+{b}=", "answer": str(a + b), "a": a, "b": b} for a, b in pairs]
    train = rows[cfg.num_eval:]
    if cfg.num_train:
        train = train[: cfg.num_train]
    return TaskData(train=train, eval=rows[: cfg.num_eval], reward="exact_answer", teacher=addition_teacher(cfg.teacher_carry_drop), tokenizer=char_tokenizer("0123456789+= "))


def read_jsonl(path: str | Path) -> list[Row]:
    """Rows of a JSONL file; each must be an object with a string `prompt`."""
    path = Path(path)
    if not path.exists():
        raise DataError(f"data file {str(path)!r} does not exist")
    rows = []
    for n, line in enumerate(path.read_text().splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as err:
            raise DataError(f"{path}:{n}: not valid JSON ({err.msg})") from None
        if not isinstance(row, dict) or not isinstance(row.get("prompt"), str):
            raise DataError(f"{path}:{n}: each row needs a string field 'prompt' (got keys: {sorted(row) if isinstance(row, dict) else type(row).__name__})")
        rows.append(row)
    if not rows:
        raise DataError(f"data file {str(path)!r} has no rows")
    return rows


def answer_teacher(row: Row, rng: random.Random) -> str:
    """Imitate the row's `answer` field."""
    if "answer" not in row:
        raise DataError("the warm start imitates each row's 'answer' field, and a row has none; add it or set warmstart.steps=0")
    return str(row["answer"])


def alphabet(rows: list[Row]) -> str:
    """Every character of the rows' prompts and answers (the vocabulary of a scratch model on user data)."""
    return "".join(sorted({ch for r in rows for key in ("prompt", "answer") for ch in str(r.get(key, ""))}))


def load_task(cfg: DataConfig, seed: int) -> TaskData:
    """The task a config names: JSONL files when `data.train` is set, else a built-in task."""
    if cfg.train is not None or cfg.task == "jsonl":
        if cfg.train is None or cfg.eval is None:
            raise DataError("user data needs both data.train=FILE.jsonl and data.eval=FILE.jsonl")
        train, held_out = read_jsonl(cfg.train), read_jsonl(cfg.eval)
        return TaskData(train=train, eval=held_out, reward="exact_answer", teacher=answer_teacher, tokenizer=char_tokenizer(alphabet(train + held_out)))
    return TASKS.get(cfg.task)(cfg, seed)
