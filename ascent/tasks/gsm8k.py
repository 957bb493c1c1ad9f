"""The `gsm8k` task: GSM8K's grade-school math word problems (Cobbe et al. 2021, "Training Verifiers to Solve Math
Word Problems", arXiv:2110.14168), shipped with the package so that it works with no network.

    data.task=gsm8k                                  # train on the 7,473 train problems, evaluate on the 1,319 test
    data.task="gsm8k(prompt_format=plain, steps=[1, 2])"  # YAML: task: {gsm8k: {steps: [1, 2]}}

The files under `ascent/tasks/data/gsm8k/` are the original `train.jsonl` and `test.jsonl` of openai/grade-school-math,
unchanged but gzipped, with their MIT license (LICENSE next to them). Each problem's worked solution ends with
`#### N`; the row's `answer` is N normalised (`1,000` -> `1000`). Calculator annotations `<<48/2=24>>` mark each
arithmetic step, and their count is the row's `steps` and `difficulty` (the field the `staged` sampler bins on):
test has 65 one-step, 357 two-step and 364 three-step problems. 18 test and 95 train solutions carry no annotation
and get 0; the paper's annotations, not a judgement of ours, decide the count.

Rows: `{"prompt", "answer", "solution" (the worked solution), "steps", "difficulty", "source": "gsm8k/<split>/<line>"}`.
Held-out rows are the test file's (its first data.num_eval when that is smaller); training rows the train file's
(its first data.num_train when set). The teacher (warm start, SFT) writes the worked solution without its
annotations, ending with the format's final sentence.
"""

from __future__ import annotations

import gzip
import json
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from random import Random
from typing import Literal, Optional

from ascent.config.schema import DataConfig
from ascent.registry import Paper
from ascent.tasks.base import TASKS, DataError, Row, TaskData
from ascent.tasks.gsm_symbolic import final_answer

DATA_DIR = Path(__file__).parent / "data" / "gsm8k"
"""The shipped GSM8K files: train.jsonl.gz, test.jsonl.gz, LICENSE."""
_ANNOTATION = re.compile(r"<<[^>]*>>")

INSTRUCTIONS = {
    "sentence": ' Explain briefly and end with "The answer is <number>."',
    "step_by_step": ' Solve it step by step, then end with "The answer is <number>."',
    "plain": "",
}
"""What each prompt format appends to the question (`sentence` is the word_problems task's own instruction)."""


def calculator_steps(solution: str) -> int:
    """The number of calculator annotations `<<...>>` in a GSM8K solution (its arithmetic steps).

    >>> calculator_steps("Janet sells 16 - 3 - 4 = <<16-3-4=9>>9 eggs.\\nShe makes 9 * 2 = $<<9*2=18>>18.\\n#### 18")
    2
    """
    return len(_ANNOTATION.findall(solution))


def worked_solution(solution: str) -> str:
    """The solution as a demonstration: annotations removed, `#### N` turned into "The answer is N."

    >>> worked_solution("She makes 9 * 2 = $<<9*2=18>>18 a day.\\n#### 18")
    'She makes 9 * 2 = $18 a day.\\nThe answer is 18.'
    """
    body = solution.strip().rsplit("####", 1)[0].rstrip()
    return f"{_ANNOTATION.sub('', body)}\nThe answer is {final_answer(solution)}."


@lru_cache(maxsize=None)
def _read(split: str) -> tuple[tuple[str, str], ...]:
    """(question, solution) of every line of the shipped `split` file (cached)."""
    path = DATA_DIR / f"{split}.jsonl.gz"
    if not path.exists():
        raise DataError(f"the GSM8K {split} file is missing from the package ({path}); reinstall ascent")
    with gzip.open(path, "rt", encoding="utf-8") as handle:
        return tuple((obj["question"], obj["answer"]) for obj in map(json.loads, handle))


def gsm8k_rows(split: Literal["train", "test"], prompt_format: str = "sentence") -> list[Row]:
    """Every problem of the shipped GSM8K `split` as rows, in file order (see the module docstring).

    >>> rows = gsm8k_rows("test")
    >>> len(rows), rows[0]["answer"], rows[0]["steps"], rows[0]["source"]
    (1319, '18', 2, 'gsm8k/test/1')
    """
    suffix = INSTRUCTIONS[prompt_format]
    rows = []
    for n, (question, solution) in enumerate(_read(split), start=1):
        steps = calculator_steps(solution)
        rows.append(
            {
                "prompt": question + suffix,
                "answer": final_answer(solution),
                "solution": solution,
                "steps": steps,
                "difficulty": steps,
                "source": f"gsm8k/{split}/{n}",
            }
        )
    return rows


@dataclass(frozen=True)
class Gsm8kParams:
    """The gsm8k task."""

    prompt_format: Literal["sentence", "step_by_step", "plain"] = "sentence"
    """sentence: the question asks for a brief explanation ending with "The answer is <number>." (the word_problems
    task's wording), graded strictly by `answer_is` (only an answer stated that way counts); step_by_step: the same
    final sentence after a step-by-step solution; plain: the bare question, graded by `math_verify` on the whole
    completion. All report the lenient `last_number` grader too."""
    steps: Optional[list[int]] = None
    """Keep only problems with these numbers of calculator steps, in training and evaluation (None: all)."""

    def __post_init__(self) -> None:
        if self.steps is not None and (not self.steps or any(s < 0 for s in self.steps)):
            raise ValueError(f"steps must be a non-empty list of step counts >= 0 (or null), got {self.steps}")


def gsm8k_teacher(row: Row, rng: Random) -> str:
    """The row's worked solution, ending with "The answer is N."."""
    return worked_solution(row["solution"])


GSM8K = Paper(
    "GSM8K",
    "Cobbe et al.",
    2021,
    "Training Verifiers to Solve Math Word Problems",
    "arXiv:2110.14168",
    note="the answer rule `gsm8k` (the number after `####`) of task `hf`",
)


@TASKS.register(
    "gsm8k",
    params=Gsm8kParams,
    paper=GSM8K,
    fidelity="faithful",
    departures=(
        "prompts end with an instruction asking for a final sentence 'The answer is N.' (prompt_format=plain: the "
        "bare question): the paper fine-tunes on its worked solutions and reads the answer after ####, and a small "
        "instruct model given no format rarely states its answer where a strict grader can find it",
        "difficulty = the number of calculator annotations <<...>> in the worked solution (the paper uses them for "
        "its calculator, not as a difficulty)",
    ),
)
def gsm8k(cfg: DataConfig, seed: int, params: Gsm8kParams = Gsm8kParams()) -> TaskData:
    """GSM8K (Cobbe et al. 2021, arXiv:2110.14168), shipped offline: train file for training, test file held out;
    `answer_is` (or `math_verify` for the plain format) and the lenient `last_number`."""
    keep = None if params.steps is None else set(params.steps)
    train, test = (
        [r for r in gsm8k_rows(s, params.prompt_format) if keep is None or r["steps"] in keep]
        for s in ("train", "test")
    )
    if not train or not test:
        raise DataError(f"no GSM8K problem has {sorted(keep or ())} calculator steps")
    if cfg.num_train:
        train = train[: cfg.num_train]
    held = test[: cfg.num_eval] if cfg.num_eval else test
    reward = "math_verify" if params.prompt_format == "plain" else "answer_is"
    return TaskData(train=train, eval=held, reward=reward, teacher=gsm8k_teacher, lenient="last_number")
