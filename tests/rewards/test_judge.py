"""The generative judge (`reward=judge(...)`): the judgement parser over well-formed and malformed replies, the
vote, the bounded cache, micro-batched engine calls, an end-to-end call with a tiny random-weight judge (whose
malformed judgements are recorded failures), and the errors a bad spec gives."""

from __future__ import annotations

import string

import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM

from ascent.config.loader import load_config
from ascent.policy.tokenizer import char_tokenizer
from ascent.rewards import REWARDS
from ascent.rewards.judge import (
    FAILURES,
    GenerativeJudge,
    Judgement,
    JudgementCache,
    parse_judgement,
    resolve_judge_model,
    vote,
)
from ascent.rewards.runner import RewardRunner, resolve_reward
from ascent.typed import ConfigError

PARSES = [  # (reply, finished, score, failure)
    ("Principles: sums must be exact.\nCritique: 5 + 7 = 12 holds.\nScore: 9", True, 9.0, None),
    ("Score: 7/10", True, 7.0, None),
    ("**Score:** 10", True, 10.0, None),
    ("The final score is 4.", True, 4.0, None),
    ("score = 3.5\n", True, 3.5, None),
    ("SCORE: 1", True, 1.0, None),
    ("Score: 4. On reflection the sum is right. Final score: 8", True, 8.0, None),  # the last one counts
    ("Score: 6\nMore critique that was cut", False, 6.0, None),  # a whole score line before the cut
    ("Score: 1\n", False, 1.0, None),  # a newline ends the number
    ("Score: 0", True, None, "out_of_range"),
    ("Score: 11", True, None, "out_of_range"),
    ("Score: -3", True, None, "out_of_range"),
    ("Score: 8/100", True, None, "wrong_scale"),
    ("Score: ten", True, None, "no_score"),
    ("The answer looks right to me.", True, None, "no_score"),
    ("", True, None, "no_score"),
    ("Scores are hard to give.", True, None, "no_score"),
    ("Principles: the sum. Critique: it", False, None, "truncated"),  # cut before any score
    ("Critique: fine. Score: 1", False, None, "truncated"),  # cut at the number: might have been 10
    ("Critique: fine. Score: 7  ", False, None, "truncated"),
]


@pytest.mark.parametrize("text,finished,score,failure", PARSES)
def test_parse_judgement_table(text, finished, score, failure):
    assert parse_judgement(text, finished) == Judgement(score=score, failure=failure)


def test_vote_is_the_mean_valid_score_rescaled_to_unit_range():
    bad = Judgement(failure="no_score")
    assert vote([Judgement(7.0), bad, Judgement(9.0), Judgement(10.0)]) == pytest.approx((26 / 3 - 1) / 9)  # 0.8519
    assert vote([Judgement(1.0)]) == 0.0 and vote([Judgement(10.0)]) == 1.0
    assert vote([Judgement(5.5), Judgement(5.5)]) == pytest.approx(0.5)
    assert vote([bad, bad]) is None  # no valid judgement: no opinion
    assert vote([Judgement(8.0), bad, bad], min_votes=2) is None
    assert vote([Judgement(8.0), Judgement(2.0), bad], min_votes=2) == pytest.approx(4 / 9)


def test_cache_is_bounded_least_recently_used_first_out():
    cache = JudgementCache(2)
    a, b, c = ("cfg", "p", "a"), ("cfg", "p", "b"), ("cfg", "p", "c")
    cache.put(a, (Judgement(1.0),))
    cache.put(b, (Judgement(2.0),))
    assert cache.get(a) == (Judgement(1.0),)  # a is now the most recent
    cache.put(c, (Judgement(3.0),))  # evicts b
    assert cache.get(b) is None and cache.get(c) == (Judgement(3.0),) and len(cache) == 2
    assert (cache.hits, cache.misses, cache.evictions) == (2, 1, 1)
    off = JudgementCache(0)
    off.put(a, (Judgement(1.0),))
    assert len(off) == 0


@pytest.fixture(scope="module")
def tiny_judge_dir(tmp_path_factory):
    """A random-weight 2-layer Llama with a character tokenizer, saved as a Hugging Face folder."""
    folder = tmp_path_factory.mktemp("tiny_judge")
    tok = char_tokenizer(string.printable)
    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=len(tok),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        max_position_embeddings=1024,
        tie_word_embeddings=True,
        bos_token_id=tok.bos_token_id,
        eos_token_id=tok.eos_token_id,
        pad_token_id=tok.pad_token_id,
    )
    LlamaForCausalLM(config).save_pretrained(folder)
    tok.save_pretrained(folder)
    return folder


class CountingEngine:
    """The judge's own rollout engine, with every call recorded (prompts, samples per prompt)."""

    def __init__(self, engine):
        self.engine, self.calls = engine, []

    def generate(self, model, prompt_ids, n, s, generator):
        self.calls.append((len(prompt_ids), n))
        return self.engine.generate(model, prompt_ids, n, s, generator)


QUESTIONS = ["What is 2+3?", "What is 4+4?", "What is 9-1?"]
ANSWERS = ["The answer is 5.", "The answer is 9.", "The answer is 8."]


def test_random_judge_end_to_end_failures_are_recorded_not_raised(tiny_judge_dir):
    runner = RewardRunner([f"judge(model={str(tiny_judge_dir)!r}, k=3, max_new_tokens=12)"], timeout_s=120)
    judge = runner.fns[0]
    judge.engine = CountingEngine(judge.engine)
    prompts, completions = QUESTIONS + QUESTIONS[:1], ANSWERS + ANSWERS[:1]  # the 4th repeats the 1st
    result = runner.score(prompts, completions, [{} for _ in prompts])
    assert judge.engine.calls == [(3, 3)]  # 3 distinct pairs x k=3 judgements in one engine call
    assert not result.valid.any() and torch.isnan(result.rewards).all()
    s = result.stats
    assert s["reward/no_opinion_frac"] == 1.0 and s["reward/failed_frac"] == 0.0  # None = no opinion, not a crash
    assert s["judge/judgements"] == 9.0 and s["judge/failed_frac"] == 1.0 and s["judge/no_vote_frac"] == 1.0
    assert s["judge/fail_no_score_frac"] + s["judge/fail_truncated_frac"] == 1.0
    assert s["judge/cache_size"] == 3.0 and s["judge/cache_hit_frac"] == 0.0 and s["judge/engine_calls"] == 1.0
    assert [len(v) for v in judge.last_votes] == [3, 3, 3, 3] and judge.last_votes[3] == judge.last_votes[0]
    assert all(j.failure in FAILURES and j.score is None for v in judge.last_votes for j in v)

    again = runner.score(prompts[:3], completions[:3], [{}] * 3)  # all cached: no generation
    assert len(judge.engine.calls) == 1
    assert again.stats["judge/cache_hit_frac"] == 1.0 and again.stats["judge/judgements"] == 0.0


def test_micro_batches_force_score_and_too_long(tiny_judge_dir):
    judge = GenerativeJudge(model=str(tiny_judge_dir), k=2, max_new_tokens=6, micro_batch_size=2, force_score=True)
    judge.engine = CountingEngine(judge.engine)
    out = judge(QUESTIONS, ANSWERS)
    # two micro-batches (2 + 1 pairs), each one call of k x pairs judgements and one greedy repair call
    assert out == [None, None, None]
    assert judge.engine.calls[0::2] == [(2, 2), (1, 2)] and judge.engine.calls[1::2] == [(4, 1), (2, 1)]
    assert judge.metrics()["judge/judgements"] == 6.0 and judge.metrics()["judge/failed_frac"] == 1.0

    short = GenerativeJudge(model=str(tiny_judge_dir), k=2, max_prompt_tokens=10)
    short.engine = CountingEngine(short.engine)
    assert short(QUESTIONS[:2], ANSWERS[:2]) == [None, None] and short.engine.calls == []
    assert short.metrics()["judge/fail_too_long_frac"] == 1.0


def test_judge_prompt_holds_question_and_answer(tiny_judge_dir):
    judge = GenerativeJudge(model=str(tiny_judge_dir), k=1)
    text = judge.tokenizer.decode(judge.judge_prompt("What is 2+3?", "The answer is 5."), skip_special_tokens=True)
    assert "Question:\nWhat is 2+3?" in text and "Answer:\nThe answer is 5." in text
    assert text.endswith("Principles:") and "Score: N" in text


def test_bad_specs_are_config_errors(tmp_path):
    with pytest.raises(ConfigError, match="is not a model"):
        resolve_reward(f"judge(model={str(tmp_path / 'nope')!r})")
    with pytest.raises(ConfigError, match="min_votes"):
        resolve_reward("judge(k=2, min_votes=3)")
    with pytest.raises(ConfigError, match="unknown key judge.votes"):
        resolve_reward("judge(votes=3)")
    with pytest.raises(ConfigError, match="is not a model"):  # at config load, before any weights
        load_config("default", [f"reward=judge(model={str(tmp_path)!r})"])
    assert "judge" in REWARDS and {p[0] for p in REWARDS.params_help("judge")} >= {"model", "k", "cache_size"}


def test_run_directory_resolves_to_its_latest_checkpoint_else_its_warm_start(tmp_path):
    run = tmp_path / "run"
    (run / "warmstart").mkdir(parents=True)
    (run / "config.yaml").write_text("name: run\n")
    (run / "warmstart" / "config.json").write_text("{}")
    assert resolve_judge_model(str(run)) == run / "warmstart"
    step = run / "checkpoints" / "step_000004"
    step.mkdir(parents=True)
    (step / "adapter_config.json").write_text("{}")  # a LoRA checkpoint
    (run / "checkpoints" / "latest").write_text("step_000004\n")
    assert resolve_judge_model(str(run)) == step
    assert resolve_judge_model(str(step)) == step
