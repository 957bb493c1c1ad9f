"""The strict `answer_is` grader, its lenient counterpart `last_number`, and the sentence format of word_problems."""

from __future__ import annotations

import random

from ascent.config.schema import DataConfig
from ascent.rewards.builtin import answer_is, last_number, stated_answer
from ascent.tasks import load_task
from ascent.tasks.word_problems import SENTENCE_INSTRUCTION


def test_stated_answer_takes_the_last_sentence():
    assert stated_answer("3 + 4 = 7. The answer is 7.") == "7"
    assert stated_answer("The answer is 5. No wait, the answer is 6.") == "6"
    assert stated_answer("So the final answer is: **1,250**") == "1250"
    assert stated_answer("The answer is $12.") == "12"
    assert stated_answer("The answer is -3.5") == "-3.5"
    assert stated_answer("It is 7.") is None
    assert stated_answer("the answer is seven") is None


def test_strict_and_lenient_graders_disagree_exactly_on_the_format():
    completions = [
        "9 - 4 = 5. The answer is 5.",  # right, in the format
        "9 - 4 = 5, so 5 apples are left.",  # right number, no sentence: lenient only
        "The answer is 5.0",  # math-verify: 5.0 == 5
        "9 - 4 = 5. The answer is 6.",  # stated answer wrong, and it is the last number
        "The answer is 6, I mean 5",  # stated 6 is wrong; the last number 5 is right
        "",
    ]
    gold = ["5"] * len(completions)
    assert answer_is(None, completions, gold) == [1.0, 0.0, 1.0, 0.0, 0.0, 0.0]
    assert last_number(None, completions, gold) == [1.0, 1.0, 1.0, 0.0, 1.0, 0.0]
    assert answer_is(None, ["The answer is 5."], None) == [None]
    assert answer_is(None, ["The answer is 5."], [None]) == [None]


def test_word_problems_sentence_format():
    cfg = DataConfig(task="word_problems(answer_format=sentence)", num_eval=20, num_train=50)
    data = load_task(cfg, 0)
    assert data.reward == "answer_is" and data.lenient == "last_number"
    assert len(data.eval) == 20 and len(data.train) == 50
    assert all(r["prompt"].endswith(SENTENCE_INSTRUCTION) for r in data.train + data.eval)
    assert not {r["prompt"] for r in data.eval} & {r["prompt"] for r in data.train}
    demos = [data.teacher(r, random.Random(0)) for r in data.eval]
    assert demos[0] == f"The answer is {data.eval[0]['answer']}."
    assert answer_is(None, demos, [r["answer"] for r in data.eval]) == [1.0] * 20
    free = load_task(DataConfig(task="word_problems", num_eval=20, num_train=50), 0)
    assert free.reward == "math_verify" and free.lenient == "last_number"
    assert [r["prompt"] + SENTENCE_INSTRUCTION for r in free.eval] == [r["prompt"] for r in data.eval]
