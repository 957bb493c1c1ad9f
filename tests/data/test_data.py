"""Datasets (JSONL, the addition task and its teacher), the resumable sampler, prompt encoding, pass@k and
the learning-rate schedule."""

from __future__ import annotations

import itertools
import json
import math
import random

import pytest

from ascent.config.schema import DataConfig, OptimConfig
from ascent.data import DataError, RowSampler, load_task, read_jsonl
from ascent.data.prompts import PromptEncoder
from ascent.data.tasks import addition_teacher
from ascent.policy.tokenizer import char_tokenizer
from ascent.trainer.evaluate import pass_at_k
from ascent.trainer.optim import lr_factor


# ---------------------------------------------------------------------------------------------------------
# read_jsonl
# ---------------------------------------------------------------------------------------------------------
def one_line(err: pytest.ExceptionInfo) -> str:
    msg = str(err.value)
    assert "\n" not in msg
    return msg


def test_read_jsonl_ok(tmp_path):
    path = tmp_path / "d.jsonl"
    path.write_text('{"prompt": "1+1=", "answer": "2"}\n\n{"prompt": "2+2=", "answer": 4, "x": [1]}\n')
    rows = read_jsonl(path)
    assert rows == [{"prompt": "1+1=", "answer": "2"}, {"prompt": "2+2=", "answer": 4, "x": [1]}]


def test_read_jsonl_missing_file(tmp_path):
    with pytest.raises(DataError) as err:
        read_jsonl(tmp_path / "nope.jsonl")
    msg = one_line(err)
    assert "nope.jsonl" in msg and "does not exist" in msg


def test_read_jsonl_bad_json_names_line(tmp_path):
    path = tmp_path / "d.jsonl"
    path.write_text('{"prompt": "a"}\n{"prompt": "b"}\n{"prompt": "c",\n{"prompt": "d"}\n')
    with pytest.raises(DataError) as err:
        read_jsonl(path)
    msg = one_line(err)
    assert f"{path}:3:" in msg and "JSON" in msg


@pytest.mark.parametrize("line", ['{"question": "a"}', '{"prompt": 5}', '["prompt", "a"]', '"just text"'])
def test_read_jsonl_row_without_prompt(tmp_path, line):
    path = tmp_path / "d.jsonl"
    path.write_text('{"prompt": "ok"}\n' + line + "\n")
    with pytest.raises(DataError) as err:
        read_jsonl(path)
    msg = one_line(err)
    assert f"{path}:2:" in msg and "'prompt'" in msg
    if line.startswith('{"question"'):
        assert "question" in msg  # shows the keys it got


@pytest.mark.parametrize("text", ["", "\n\n  \n"])
def test_read_jsonl_empty(tmp_path, text):
    path = tmp_path / "d.jsonl"
    path.write_text(text)
    with pytest.raises(DataError) as err:
        read_jsonl(path)
    assert "no rows" in one_line(err)


def test_load_task_jsonl(tmp_path):
    train, ev = tmp_path / "t.jsonl", tmp_path / "e.jsonl"
    train.write_text(json.dumps({"prompt": "a", "answer": "1"}) + "\n")
    ev.write_text(json.dumps({"prompt": "b", "answer": "2"}) + "\n")
    task = load_task(DataConfig(task="jsonl", train=str(train), eval=str(ev)), seed=0)
    assert [r["prompt"] for r in task.train] == ["a"] and [r["prompt"] for r in task.eval] == ["b"]
    assert task.reward == "exact_answer"
    with pytest.raises(DataError, match="data.eval"):
        load_task(DataConfig(task="jsonl", train=str(train)), seed=0)


# ---------------------------------------------------------------------------------------------------------
# the addition task and its teacher
# ---------------------------------------------------------------------------------------------------------
def test_addition_task_split_and_answers():
    task = load_task(DataConfig(task="addition", digits=2, num_eval=200), seed=0)
    assert len(task.eval) == 200
    assert len(task.train) == 90 * 90 - 200  # every 2-digit pair, minus the held-out ones
    train_prompts = {r["prompt"] for r in task.train}
    eval_prompts = {r["prompt"] for r in task.eval}
    assert len(eval_prompts) == 200 and len(train_prompts) == len(task.train)  # no duplicates
    assert not train_prompts & eval_prompts
    for row in task.train[:500] + task.eval:
        a, b = int(row["a"]), int(row["b"])
        assert 10 <= a <= 99 and 10 <= b <= 99
        assert row["prompt"] == f"{a}+{b}="
        assert row["answer"] == str(a + b)
    assert task.reward == "exact_answer"


def test_addition_task_num_train_and_determinism():
    cfg = DataConfig(task="addition", digits=2, num_eval=50, num_train=300)
    a, b = load_task(cfg, seed=1), load_task(cfg, seed=1)
    assert len(a.train) == 300 and len(a.eval) == 50
    assert a.train == b.train and a.eval == b.eval
    c = load_task(cfg, seed=2)
    assert [r["prompt"] for r in c.eval] != [r["prompt"] for r in a.eval]


def test_addition_task_num_eval_too_large():
    with pytest.raises(DataError, match="num_eval"):
        load_task(DataConfig(task="addition", digits=1, num_eval=100), seed=0)


def test_unknown_task_lists_names():
    with pytest.raises(KeyError, match="addition"):
        load_task(DataConfig(task="multiplication"), seed=0)


def carries(a: int, b: int) -> bool:
    return (a % 10) + (b % 10) >= 10


def test_teacher_never_wrong_without_ones_carry():
    teach = addition_teacher(0.6)
    rng = random.Random(0)
    for a in range(10, 100):
        for b in range(10, 100, 7):
            if not carries(a, b):
                assert teach({"a": a, "b": b}, rng) == str(a + b)


def test_teacher_drops_carry_at_its_rate():
    teach = addition_teacher(0.6)
    pick = random.Random(1)
    rng = random.Random(2)
    wrong = 0
    draws = 2000
    for _ in range(draws):
        while True:
            a, b = pick.randrange(10, 100), pick.randrange(10, 100)
            if carries(a, b):
                break
        out = int(teach({"a": a, "b": b}, rng))
        assert out in (a + b, a + b - 10)  # when wrong, wrong by exactly -10
        wrong += out == a + b - 10
    # binomial std at p=0.6, n=2000: 0.011; 0.05 is > 4 sigma
    assert wrong / draws == pytest.approx(0.6, abs=0.05)


def test_teacher_without_mistakes():
    teach = addition_teacher(0.0)
    rng = random.Random(0)
    for a, b in [(17, 25), (99, 99), (55, 55), (10, 10), (19, 81)]:
        assert teach({"a": a, "b": b}, rng) == str(a + b)
    always = addition_teacher(1.0)
    assert always({"a": 17, "b": 25}, rng) == "32"  # the documented mistake: 17+25 -> 32
    assert always({"a": 12, "b": 25}, rng) == "37"


# ---------------------------------------------------------------------------------------------------------
# RowSampler
# ---------------------------------------------------------------------------------------------------------
def test_sampler_epochs_cover_all_rows_without_repeats():
    s = RowSampler(10, seed=3)
    first, second = s.next(10), s.next(10)
    assert sorted(first) == list(range(10)) and sorted(second) == list(range(10))
    assert first != second  # a fresh permutation per epoch
    s2 = RowSampler(10, seed=3)
    chunks = [s2.next(3) for _ in range(3)] + [s2.next(1)]
    assert sum(chunks, []) == first  # chunking does not change the order
    crossing = s2.next(4)  # the next epoch starts
    assert crossing == second[:4]


def test_sampler_deterministic_and_seeded():
    assert RowSampler(50, seed=0).next(120) == RowSampler(50, seed=0).next(120)
    assert RowSampler(50, seed=0).next(50) != RowSampler(50, seed=1).next(50)


def test_sampler_resume_exactly():
    one_go = RowSampler(11, seed=5).next(27)
    s = RowSampler(11, seed=5)
    head = s.next(7)
    state = s.state_dict()
    resumed = RowSampler(11, seed=999)  # the seed comes from the state
    resumed.load_state_dict(state)
    assert head + resumed.next(20) == one_go
    # resuming across an epoch boundary as well
    s = RowSampler(11, seed=5)
    head = s.next(15)
    r2 = RowSampler(11, seed=5)
    r2.load_state_dict(s.state_dict())
    assert head + r2.next(12) == one_go


def test_sampler_errors():
    with pytest.raises(ValueError, match="empty"):
        RowSampler(0, seed=0)
    s = RowSampler(5, seed=0)
    with pytest.raises(ValueError, match="same data"):
        s.load_state_dict(RowSampler(6, seed=0).state_dict())


# ---------------------------------------------------------------------------------------------------------
# PromptEncoder
# ---------------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def tok():
    return char_tokenizer("0123456789+= ")


def test_prompt_encoder_char_tokenizer(tok):
    enc = PromptEncoder(tok)
    ids = enc("12+3=")
    assert ids[0] == tok.bos_token_id
    assert ids[1:] == [tok.convert_tokens_to_ids(ch) for ch in "12+3="]
    assert tok.decode(ids, skip_special_tokens=True) == "12+3="
    comp = enc.completion("15")
    assert comp == [tok.convert_tokens_to_ids("1"), tok.convert_tokens_to_ids("5"), tok.eos_token_id]
    assert tok.bos_token_id not in comp
    assert len({tok.bos_token_id, tok.eos_token_id, tok.pad_token_id}) == 3


def test_prompt_encoder_chat_template_without_template(tok):
    with pytest.raises(ValueError, match="chat_template"):
        PromptEncoder(tok, chat_template=True)("1+1=")


# ---------------------------------------------------------------------------------------------------------
# pass@k
# ---------------------------------------------------------------------------------------------------------
def brute_pass_at_k(n: int, c: int, k: int) -> float:
    """Fraction of the k-subsets of n samples (c of them correct) that contain a correct one."""
    samples = [True] * c + [False] * (n - c)
    subsets = list(itertools.combinations(range(n), k))
    return sum(any(samples[i] for i in s) for s in subsets) / len(subsets)


def test_pass_at_k_matches_brute_force():
    for n in range(1, 9):
        for c in range(0, n + 1):
            for k in range(1, n + 1):
                assert pass_at_k(n, c, k) == pytest.approx(brute_pass_at_k(n, c, k), abs=1e-12), (n, c, k)


def test_pass_at_k_hand_values():
    assert pass_at_k(8, 2, 4) == pytest.approx(1 - 15 / 70)  # 1 - C(6,4)/C(8,4)
    assert pass_at_k(10, 3, 1) == pytest.approx(0.3)  # pass@1 is the fraction correct
    assert pass_at_k(5, 0, 5) == 0.0 and pass_at_k(5, 1, 5) == 1.0


# ---------------------------------------------------------------------------------------------------------
# lr_factor
# ---------------------------------------------------------------------------------------------------------
def test_lr_warmup_then_constant():
    c = OptimConfig(schedule="constant", warmup_steps=4)
    assert [lr_factor(s, 100, c) for s in range(6)] == [0.0, 0.25, 0.5, 0.75, 1.0, 1.0]
    assert lr_factor(99, 100, c) == 1.0
    assert lr_factor(0, 100, OptimConfig(schedule="constant")) == 1.0  # no warm-up


def test_lr_cosine():
    c = OptimConfig(schedule="cosine", warmup_steps=10, min_lr_ratio=0.0)
    # after warm-up: 0.5 (1 + cos(pi * (step - 10) / 100))
    assert lr_factor(5, 110, c) == pytest.approx(0.5)
    assert lr_factor(10, 110, c) == pytest.approx(1.0)
    assert lr_factor(35, 110, c) == pytest.approx(0.5 * (1 + math.cos(math.pi * 0.25)))  # 0.8535534
    assert lr_factor(60, 110, c) == pytest.approx(0.5)
    assert lr_factor(110, 110, c) == pytest.approx(0.0, abs=1e-12)
    assert lr_factor(500, 110, c) == pytest.approx(0.0, abs=1e-12)  # clamped past the end
    m = OptimConfig(schedule="cosine", warmup_steps=0, min_lr_ratio=0.1)
    assert lr_factor(0, 100, m) == pytest.approx(1.0)
    assert lr_factor(50, 100, m) == pytest.approx(0.1 + 0.9 * 0.5)  # 0.55
    assert lr_factor(100, 100, m) == pytest.approx(0.1)


def test_lr_linear():
    c = OptimConfig(schedule="linear", warmup_steps=0, min_lr_ratio=0.0)
    assert [lr_factor(s, 100, c) for s in (0, 25, 50, 100)] == pytest.approx([1.0, 0.75, 0.5, 0.0])
    m = OptimConfig(schedule="linear", warmup_steps=20, min_lr_ratio=0.2)
    assert lr_factor(10, 120, m) == pytest.approx(0.5)
    assert lr_factor(70, 120, m) == pytest.approx(0.2 + 0.8 * 0.5)  # 0.6
    assert lr_factor(120, 120, m) == pytest.approx(0.2)
