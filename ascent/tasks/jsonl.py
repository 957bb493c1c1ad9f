"""User data: the `jsonl` task reads train and held-out rows from JSONL files (`data.train=FILE.jsonl`,
`data.eval=FILE.jsonl`; setting data.train selects it), and `write_jsonl` stores rows atomically.

Each row is a JSON object with a string `prompt`; its other fields reach the reward functions, and the warm
start imitates its `answer`. The reward is `exact_answer`; a scratch model gets a character tokenizer over
every character of the rows' prompts and answers.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any, Iterable

from ascent.config.schema import DataConfig
from ascent.policy.tokenizer import char_tokenizer
from ascent.tasks.base import TASKS, DataError, Row, TaskData, answer_teacher


def _no_constant(name: str) -> Any:
    """NaN, Infinity and -Infinity are not JSON (Python's reader accepts them; browsers and most tools do not)."""
    raise ValueError(f"{name} is not a JSON value; write null or a number")


def jsonl_objects(
    path: str | Path, fields: tuple[str, ...], missing: str, kind: str = "data"
) -> list[tuple[int, dict[str, Any]]]:
    """(line number, object) for every non-blank line of a JSONL file, each checked to be an object with string
    `fields`; a missing file, bad JSON or a missing field (`missing`, formatted with `got`: the line's keys) is a
    DataError naming the file and line."""
    path = Path(path)
    if not path.exists():
        raise DataError(f"{kind} file {str(path)!r} does not exist")
    out = []
    for n, raw in enumerate(path.read_bytes().splitlines(), start=1):
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError as err:
            raise DataError(f"{path}:{n}: not UTF-8 text ({err.reason} at byte {err.start} of the line)") from None
        if not line.strip():
            continue
        try:
            row = json.loads(line, parse_constant=_no_constant)
        except json.JSONDecodeError as err:
            raise DataError(f"{path}:{n}: not valid JSON ({err.msg})") from None
        except ValueError as err:
            raise DataError(f"{path}:{n}: {err}") from None
        if not isinstance(row, dict) or not all(isinstance(row.get(k), str) for k in fields):
            got = sorted(row) if isinstance(row, dict) else type(row).__name__
            raise DataError(f"{path}:{n}: " + missing.format(got=got))
        out.append((n, row))
    return out


def read_jsonl(path: str | Path) -> list[Row]:
    """Rows of a JSONL file; each must be an object with a string `prompt`."""
    rows = [
        row for _, row in jsonl_objects(path, ("prompt",), "each row needs a string field 'prompt' (got keys: {got})")
    ]
    if not rows:
        raise DataError(f"data file {str(path)!r} has no rows")
    return rows


def write_jsonl(rows: Iterable[dict[str, Any]], path: str | os.PathLike[str]) -> Path:
    """Write ``rows`` as JSON lines to ``path`` atomically (temp file + fsync + rename).

    Parent folders are created. Readers never see a partially written file.

    Returns:
        The path written.
    """
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            for row in rows:
                handle.write(json.dumps(row, ensure_ascii=False) + "\n")
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return target


def alphabet(rows: list[Row]) -> str:
    """Every character of the rows' prompts and answers (the vocabulary of a scratch model on user data)."""
    return "".join(sorted({ch for r in rows for key in ("prompt", "answer") for ch in str(r.get(key, ""))}))


@TASKS.register("jsonl", paper=None, fidelity="ascent")
def jsonl(cfg: DataConfig, seed: int) -> TaskData:
    """Your own rows: data.train=FILE.jsonl and data.eval=FILE.jsonl, reward exact_answer."""
    if cfg.train is None or cfg.eval is None:
        raise DataError("user data needs both data.train=FILE.jsonl and data.eval=FILE.jsonl")
    train, held_out = read_jsonl(cfg.train), read_jsonl(cfg.eval)
    tokenizer = char_tokenizer(alphabet(train + held_out))
    return TaskData(train=train, eval=held_out, reward="exact_answer", teacher=answer_teacher, tokenizer=tokenizer)
