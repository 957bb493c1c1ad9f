"""`self_judge`: the policy judges its own completions with the `judge` prompt, parser and vote; a policy trained to
answer `Score: 7` earns (7 - 1) / 9, the referee follows the policy's updates, rows with a label are left to the
verifier, and without a policy the failure is recorded, not raised."""

from __future__ import annotations

import string

import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM

from ascent.policy.tokenizer import char_tokenizer
from ascent.rewards.runner import RewardRunner, resolve_reward
from ascent.typed import ConfigError

pytestmark = pytest.mark.usefixtures("one_thread")
QUESTIONS = ["What is 2+3?", "What is 4+4?"]
ANSWERS = ["5", "9"]


def tiny_policy():
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
    return LlamaForCausalLM(config), tok


def teach_to_say(model, tok, judge, text: str, steps: int = 60) -> None:
    """Teacher-force `text` + EOS after each judge prompt (the policy 'learns' to referee)."""
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    target = list(tok(text, add_special_tokens=False)["input_ids"]) + [tok.eos_token_id]
    rows = [judge.judge_prompt(q, a) for q, a in zip(QUESTIONS, ANSWERS)]
    model.train()
    for _ in range(steps):
        opt.zero_grad()
        for prompt in rows:
            ids = torch.tensor([prompt + target])
            labels = ids.clone()
            labels[0, : len(prompt)] = -100
            model(input_ids=ids, labels=labels).loss.backward()
        opt.step()


def test_the_policy_referees_and_follows_its_updates():
    model, tok = tiny_policy()
    runner = RewardRunner(["self_judge(k=2, temperature=0, max_new_tokens=12)"], timeout_s=120)
    runner.attach_policy(model, tok)
    judge = runner.fns[0]
    first = runner.score(QUESTIONS, ANSWERS, [{}, {}])
    assert not first.valid.any() and first.stats["judge/failed_frac"] == 1.0  # random policy: recorded failures
    teach_to_say(model, tok, judge, " Score: 7")
    second = runner.score(QUESTIONS, ANSWERS, [{}, {}])  # no cache: the updated policy judges again
    assert second.rewards.tolist() == pytest.approx([6 / 9, 6 / 9])
    assert second.stats["judge/failed_frac"] == 0.0 and second.stats["judge/judgements"] == 4.0
    assert model.training  # the trainer's mode is restored after judging


def test_rows_with_a_label_are_left_to_the_verifier():
    model, tok = tiny_policy()
    runner = RewardRunner(["exact_answer", "self_judge(unless_field=answer, k=1, max_new_tokens=4)"])
    runner.attach_policy(model, tok)
    result = runner.score(QUESTIONS, ANSWERS, [{"answer": "5"}, {}])
    assert result.components[0].tolist()[0] == 1.0 and torch.isnan(result.components[0, 1])  # verifier only
    assert torch.isnan(result.components[1, 0])  # no label: only the self-judge may speak (None here: random)
    assert result.stats["judge/deferred_frac"] == 0.5


def test_without_a_policy_the_failure_is_recorded():
    runner = RewardRunner(["self_judge"])
    result = runner.score(QUESTIONS, ANSWERS, [{}, {}])
    assert result.stats["reward/failed_frac"] == 1.0 and "no policy to judge with" in runner.failure_log[0]


def test_another_model_is_a_config_error():
    with pytest.raises(ConfigError, match="the judge is the policy"):
        resolve_reward("self_judge(model=smollm2)")
    with pytest.raises(ConfigError, match="min_votes"):
        resolve_reward("self_judge(k=2, min_votes=3)")
    with pytest.raises(ConfigError, match="no meta-RM-guided vote"):
        resolve_reward("self_judge(meta_rm=rms/meta, meta_k=1)")


# format=verdict: URPO's referee as one sampled verdict token, trained on judging rows in the same batch


def test_the_verdict_vote_estimates_the_policys_share_of_1():
    """r = the share of `1` among k verdict tokens sampled from π(· | question + answer + '?'): with k = 40000 it
    matches p(1) / (p(1) + p(0)) read off the policy's own logits."""
    model, tok = tiny_policy()
    runner = RewardRunner(["self_judge(format=verdict, k=40000, temperature=1.0)"])
    runner.attach_policy(model, tok)
    with torch.no_grad():
        ids = torch.tensor([tok("12+3=15?")["input_ids"]])
        probs = torch.softmax(model(input_ids=ids).logits[0, -1].float(), -1)
    one, zero = probs[tok.convert_tokens_to_ids("1")], probs[tok.convert_tokens_to_ids("0")]
    expected = float(one / (one + zero))
    result = runner.score(["12+3="], [" 15 "], [{}])  # the answer is stripped into the template
    assert result.rewards.tolist()[0] == pytest.approx(expected, abs=0.05)
    failed = 1 - float(one + zero)  # every other token is a failed judgement
    assert result.stats["judge/failed_frac"] == pytest.approx(failed, abs=0.02)


def test_a_taught_referee_scores_its_verdicts_and_defers_judging_rows():
    """Taught `1` after 12+3=15? and `0` after 12+3=14?, the greedy referee gives 1 and 0; a judging row (it
    carries `answer`, the verdict) is left to the verifier, which scores the referee's own verdict."""
    model, tok = tiny_policy()
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    for _ in range(40):
        opt.zero_grad()
        for text in ("12+3=15?1", "12+3=14?0"):
            ids = torch.tensor([tok(text)["input_ids"]])
            labels = torch.full_like(ids, -100)
            labels[0, -1] = ids[0, -1]
            model(input_ids=ids, labels=labels).loss.backward()
        opt.step()
    runner = RewardRunner(["exact_answer", "self_judge(format=verdict, k=3, temperature=0, unless_field=answer)"])
    runner.attach_policy(model, tok)
    rows = [{}, {}, {"answer": "1"}]
    result = runner.score(["12+3=", "12+3=", "12+3=15?"], ["15", "14", "0"], rows)
    assert result.rewards.tolist() == [1.0, 0.0, 0.0]  # player rows: the referee; judging row: the verifier
    assert torch.isnan(result.components[:2, 0]).all() and torch.isnan(result.components[2, 1])
    with pytest.raises(ConfigError, match="format must be judge or verdict"):
        resolve_reward("self_judge(format=pairwise)")
