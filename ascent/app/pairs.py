"""Preference pairs for reward models: the JSONL format, and pairs made from a built-in task's verifier.

One JSON object per line: `prompt`, `chosen`, `rejected` (strings: the prompt and two completions, the chosen one
preferred) and optionally `margin` (a number, subtracted inside the Bradley–Terry sigmoid). Pairs made here also
carry `flipped` (true where the noisy labeller swapped the two), which training ignores.

`make_pairs` labels pairs with the task's reward (its verifier): the chosen completion scores higher than the
rejected one. Where the completions come from:

- `pairs.policy=RUN_OR_FOLDER`: `pairs.samples` completions per prompt sampled from that policy; a prompt with a
  right and a wrong sample gives one pair (a random right one, a random wrong one); or
- no policy: the row's `answer` against the task teacher's answer where the teacher errs (the warm start's
  systematic mistakes), else against the answer with one digit (or character) changed.

`label_noise` then swaps chosen and rejected on exactly round(label_noise * n) training pairs picked with the
seed: a labeller that is wrong on a known share. Held-out pairs are made the same way from the task's held-out
rows and never flipped, so held-out pair accuracy measures agreement with the verifier.
"""

from __future__ import annotations

import random
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any, Optional

import torch

from ascent.app.export import policy_at
from ascent.app.pipeline import reward_specs
from ascent.config.reward_model import RewardModelJob
from ascent.data.prompts import PromptEncoder
from ascent.rewards.runner import RewardRunner
from ascent.rollout.backends import make_engine
from ascent.rollout.batch import assemble
from ascent.rollout.types import SamplingSettings
from ascent.tasks import DataError, Row, TaskData, load_task, write_jsonl
from ascent.tasks.jsonl import jsonl_objects


@dataclass(frozen=True)
class PreferencePair:
    """One labelled comparison: `chosen` is preferred to `rejected` as a completion of `prompt`."""

    prompt: str
    chosen: str
    rejected: str
    margin: Optional[float] = None
    """How much more the chosen one is preferred (the Bradley–Terry margin); None: no margin."""
    flipped: bool = False
    """The noisy labeller swapped chosen and rejected (bookkeeping only; training ignores it)."""

    def to_json(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if not (k == "margin" and v is None)}


def read_pairs(path: str | Path) -> list[PreferencePair]:
    """The pairs of a JSONL file, each line checked (DataError naming the file and line)."""
    pairs = []
    fields, missing = (
        ("prompt", "chosen", "rejected"),
        "a pair needs string fields prompt, chosen and rejected (got {got})",
    )
    for n, row in jsonl_objects(path, fields, missing, kind="pairs"):
        margin = row.get("margin")
        if margin is not None and (isinstance(margin, bool) or not isinstance(margin, (int, float))):
            raise DataError(f"{path}:{n}: margin must be a number, got {margin!r}")
        pairs.append(
            PreferencePair(
                row["prompt"],
                row["chosen"],
                row["rejected"],
                None if margin is None else float(margin),
                bool(row.get("flipped", False)),
            )
        )
    if not pairs:
        raise DataError(f"pairs file {str(path)!r} holds no pairs")
    return pairs


def write_pairs(pairs: list[PreferencePair], path: str | Path) -> Path:
    """Write pairs as JSONL, atomically."""
    return write_jsonl((p.to_json() for p in pairs), path)


def flip_labels(pairs: list[PreferencePair], share: float, seed: int) -> list[PreferencePair]:
    """The pairs with chosen and rejected swapped on exactly round(share * len(pairs)) of them, picked with `seed`
    (marked `flipped`).

    >>> ps = [PreferencePair("p", "good", "bad") for _ in range(10)]
    >>> sum(p.flipped for p in flip_labels(ps, 0.2, seed=0)), flip_labels(ps, 0.2, seed=0)[0].chosen in ("good", "bad")
    (2, True)
    """
    picked = set(random.Random(seed).sample(range(len(pairs)), round(share * len(pairs))))
    return [
        replace(p, chosen=p.rejected, rejected=p.chosen, flipped=not p.flipped) if i in picked else p
        for i, p in enumerate(pairs)
    ]


def corrupt(answer: str, rng: random.Random) -> str:
    """`answer` with one character changed: a digit to another digit where it has digits, else a letter.

    >>> corrupt("42", random.Random(0)) != "42", corrupt("", random.Random(0))
    (True, '0')
    """
    if not answer:
        return "0"
    digits = [i for i, c in enumerate(answer) if c.isdigit()]
    i = rng.choice(digits) if digits else rng.randrange(len(answer))
    pool = "0123456789" if digits else "abcdefghijklmnopqrstuvwxyz"
    return answer[:i] + rng.choice([c for c in pool if c != answer[i]]) + answer[i + 1 :]


def fields(row: Row) -> dict[str, Any]:
    return {k: v for k, v in row.items() if k != "prompt"}


def _labelled(
    runner: RewardRunner, rows: list[Row], options: list[list[str]], rng: random.Random
) -> list[PreferencePair]:
    """For each row, its options scored by the verifier: one pair (a random best-scoring option, a random
    lowest-scoring one) where they differ."""
    prompts = [r["prompt"] for r, opts in zip(rows, options) for _ in opts]
    flat = [c for opts in options for c in opts]
    meta = [fields(r) for r, opts in zip(rows, options) for _ in opts]
    scored = runner.score(prompts, flat, meta)
    values = torch.where(scored.valid, scored.rewards, torch.full_like(scored.rewards, float("nan"))).tolist()
    pairs, at = [], 0
    for row, opts in zip(rows, options):
        got = [(v, c) for v, c in zip(values[at : at + len(opts)], opts) if v == v]  # NaN: not scored
        at += len(opts)
        if not got:
            continue
        hi, lo = max(v for v, _ in got), min(v for v, _ in got)
        if hi > lo:
            chosen = rng.choice([c for v, c in got if v == hi])
            rejected = rng.choice([c for v, c in got if v == lo])
            pairs.append(PreferencePair(row["prompt"], chosen, rejected))
    return pairs


def teacher_options(task: TaskData, row: Row, rng: random.Random, wrong: tuple[str, ...] = ("teacher",)) -> list[str]:
    """The row's answer (else the teacher's), then the wrong candidates `wrong` asks for: the teacher's answer
    where it differs (`teacher`), a corruption of the right answer (`corrupt`, and whenever nothing else is wrong).

    >>> task = TaskData([], [], "exact_answer", teacher=lambda row, rng: "7")
    >>> rng = random.Random(0)
    >>> teacher_options(task, {"answer": "8"}, rng), len(teacher_options(task, {"answer": "7"}, rng))
    (['8', '7'], 2)
    """
    answer = str(row["answer"]) if "answer" in row else None
    said = task.teacher(row, rng) if task.teacher is not None else None
    if answer is None and said is None:
        raise DataError("pairs without pairs.policy need rows with an 'answer' field or a task with a teacher")
    right = answer if answer is not None else said
    out = [right] + ([said] if "teacher" in wrong and said is not None and said != right else [])
    return out + ([corrupt(right, rng)] if "corrupt" in wrong or len(out) == 1 else [])


def policy_options(job: RewardModelJob, task: TaskData, rows: list[Row], seed: int) -> list[list[str]]:
    """`pairs.samples` completions of each row sampled from `pairs.policy` at `pairs.temperature`."""
    policy = policy_at(job.pairs.policy, job.run)
    run = job.run
    encoder = PromptEncoder(policy.tokenizer, run.data.chat_template, run.data.system_prompt)
    r, n = run.rollout, job.pairs.samples
    settings = SamplingSettings(r.max_new_tokens, policy.eos_id, policy.pad_id, job.pairs.temperature, r.top_p, r.top_k)
    engine = make_engine(r, precision="model")
    generator = torch.Generator().manual_seed(seed)
    policy.model.eval()
    out = []
    for i in range(0, len(rows), 64):
        chunk = rows[i : i + 64]
        ids = [encoder(row["prompt"]) for row in chunk]
        gen = engine.generate(policy.model, ids, n, settings, generator)
        batch = assemble(
            [row["prompt"] for row in chunk], ids, [fields(row) for row in chunk], gen, n, policy.tokenizer
        )
        out += [batch.completions[k * n : (k + 1) * n] for k in range(len(chunk))]
    return out


def pairs_from_rows(
    job: RewardModelJob, task: TaskData, rows: list[Row], limit: int, seed: int
) -> list[PreferencePair]:
    """Up to `limit` verifier-labelled pairs from `rows` (shuffled with `seed`), in chunks until enough."""
    rng = random.Random(seed)
    order = rng.sample(rows, len(rows))
    runner = RewardRunner(reward_specs(job.run, task), job.run.reward_weights, job.run.reward_timeout_s)
    pairs: list[PreferencePair] = []
    step = max(64, 2 * limit)
    for i in range(0, len(order), step):
        chunk = order[i : i + step]
        if job.pairs.policy is not None:
            options = policy_options(job, task, chunk, seed + i)
        else:
            options = [teacher_options(task, row, rng, tuple(job.pairs.wrong)) for row in chunk]
        pairs += _labelled(runner, chunk, options, rng)
        if len(pairs) >= limit:
            break
    return pairs[:limit]


def make_pairs(job: RewardModelJob) -> tuple[list[PreferencePair], list[PreferencePair]]:
    """(training pairs with `pairs.label_noise` of their labels flipped, clean held-out pairs) made from the
    recipe's task: training pairs from its training rows, held-out ones from its held-out rows."""
    run, seed = job.run, job.pairs_seed
    task = load_task(run.data, run.seed if run.data.split_seed is None else run.data.split_seed)
    if task.agent is not None:
        raise DataError("pairs from the verifier are made for single-turn tasks; give agent tasks' pairs as pairs.file")
    train = pairs_from_rows(job, task, task.train, job.pairs.num_train, seed)
    held = pairs_from_rows(job, task, task.eval, job.pairs.num_eval, seed + 1)
    if not train or not held:
        raise DataError(
            f"the verifier separated no completions of the task's {'training' if not train else 'held-out'} rows; "
            "raise pairs.samples or pairs.temperature, or give pairs.file"
        )
    return flip_labels(train, job.pairs.label_noise, seed), held


def load_pairs(job: RewardModelJob) -> tuple[list[PreferencePair], list[PreferencePair]]:
    """(training, held-out) pairs: read from `pairs.file` (held out: `pairs.eval_file`, else its last `eval_frac`;
    `label_noise` flips the training ones), or made from the task (`make_pairs`)."""
    p = job.pairs
    if p.file is None:
        return make_pairs(job)
    pairs = read_pairs(p.file)
    if p.eval_file is not None:
        train, held = pairs, read_pairs(p.eval_file)
    else:
        cut = len(pairs) - max(1, round(p.eval_frac * len(pairs)))
        if cut < 1:
            raise DataError(f"pairs file {p.file!r} has {len(pairs)} pair(s): too few to hold some out")
        train, held = pairs[:cut], pairs[cut:]
    return flip_labels(train, p.label_noise, job.pairs_seed), held
