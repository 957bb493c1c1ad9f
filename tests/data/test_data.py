"""The resumable sampler, prompt encoding, pass@k and the learning-rate schedule (the tasks' datasets are
tested in tests/tasks/)."""

from __future__ import annotations

import itertools
import math

import pytest

from ascent.config.schema import OptimConfig
from ascent.data import RowSampler
from ascent.data.prompts import PromptEncoder
from ascent.policy.tokenizer import char_tokenizer
from ascent.trainer.evaluate import pass_at_k
from ascent.trainer.optim import lr_factor


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
