"""Fixtures shared by the tests/runtime modules."""

from __future__ import annotations

import json

import pytest

from tests.trainer.test_learning import REWARD


@pytest.fixture(scope="module")
def seven(tmp_path_factory):
    """tests/trainer/test_learning.py's seven task: reward 1 when the completion starts with 7."""
    tmp = tmp_path_factory.mktemp("seven")
    rows = [{"prompt": f"{i}+{j}=", "answer": "7"} for i in range(10) for j in range(10)]
    (tmp / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (tmp / "eval.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows[:10]))
    (tmp / "seven.py").write_text(REWARD)
    return [
        f"data.train={tmp}/train.jsonl",
        f"data.eval={tmp}/eval.jsonl",
        f"reward={tmp}/seven.py:starts_with_seven",
        f"output_dir={tmp}",
    ]
