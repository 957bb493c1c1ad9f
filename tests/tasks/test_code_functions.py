"""The code_functions task: every reference solution passes its hidden tests in the sandbox, a wrong one
does not, rows are deterministic and JSON-able, held-out prompts never reach training, and the scratch
tokenizer spells every solution exactly."""

from __future__ import annotations

import json

from ascent.config import load_config
from ascent.rewards.sandbox import Limits, run_code, score_tests
from ascent.tasks import load_task
from ascent.tasks.code_functions import PROBLEMS, code_function_rows


def test_every_kind_is_solved_by_its_reference_and_not_by_a_wrong_function():
    rows = code_function_rows(2 * len(PROBLEMS), seed=3)
    assert {r["entry_point"] for r in rows} == {p(__import__("random").Random(0))[0] for p in PROBLEMS}
    limits = Limits(cpu_s=3, call_s=1, wall_s=6)
    for row in rows:
        inputs, expected = [t["args"] for t in row["tests"]], [t["expected"] for t in row["tests"]]
        assert (
            score_tests(run_code(row["solution"], row["entry_point"], inputs, limits, mode="unsafe-local"), expected)
            == 1.0
        ), row
        wrong = f"def {row['entry_point']}(*args):\n    return None\n"
        assert score_tests(run_code(wrong, row["entry_point"], inputs, limits, mode="unsafe-local"), expected) < 1.0, (
            row
        )
        assert row["answer"] == f"```python\n{row['solution']}```" and row["prompt"].endswith("code block.")


def test_rows_are_deterministic_prefixes_and_json():
    a, b = code_function_rows(30, seed=7), code_function_rows(50, seed=7)
    assert a == b[:30] and a != code_function_rows(30, seed=8)
    assert json.loads(json.dumps(a)) == a


def test_task_split_reward_and_tokenizer():
    cfg = load_config("default", ["data.task=code_functions", "data.num_train=100", "data.num_eval=24"])
    task = load_task(cfg.data, seed=0)
    assert task.reward == "code_tests" and len(task.eval) == 24
    assert not {r["prompt"] for r in task.train} & {r["prompt"] for r in task.eval}
    tok = task.tokenizer
    for row in task.train[:20]:
        text = row["prompt"] + row["answer"]
        assert tok.decode(tok(text)["input_ids"], skip_special_tokens=True) == text
