"""SPCT's parts (ascent/rewards/spct.py) and the meta-RM-guided vote of `judge(meta_rm=..., meta_k=...)`: the
correctness rule, the rejective-fine-tuning filter, the guided vote's numbers, the BCE meta head learning a
separable set, and a saved meta RM loaded by the judge ranking its judgements."""

from __future__ import annotations

import string

import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM

from ascent.policy.tokenizer import char_tokenizer
from ascent.rewards.judge import GenerativeJudge, Judgement, vote
from ascent.rewards.reward_model import RewardModel, load_reward_model, score
from ascent.rewards.runner import RewardRunner
from ascent.rewards.spct import (
    fit_meta_head,
    guided_vote,
    judgement_correct,
    rft_select,
    save_meta_rm,
    trunk_features,
)
from ascent.typed import ConfigError


def test_correctness_rule_and_rejective_selection():
    assert [judgement_correct(s, 1) for s in (10.0, 6.0, 5.5, 5.0, None)] == [True, True, False, False, None]
    assert [judgement_correct(s, 0) for s in (1.0, 5.0, 5.5, 9.0)] == [True, True, False, False]
    scores = [[8.0, 3.0, None, 7.0], [9.0, 7.0, 6.0, 10.0], [2.0, 9.0, 1.0, None], [4.0, 2.0, 5.0, 3.0]]
    # sample 1 (right answer, all four correct) and sample 3 (wrong answer, all correct) are too easy: dropped
    assert rft_select(scores, [1, 1, 0, 0]) == [(0, 0), (0, 3), (2, 0), (2, 2)]
    assert rft_select([[None, None]], [1]) == []  # nothing scored: nothing kept


def test_guided_vote_keeps_the_judgements_the_meta_rm_rates_highest():
    scores, meta = [9.0, 2.0, None, 4.0, 10.0], [0.1, 2.0, 5.0, 1.5, -1.0]
    plain = vote([Judgement(s) if s is not None else Judgement(failure="no_score") for s in scores])
    assert plain == pytest.approx((25 / 4 - 1) / 9)  # 0.5833
    assert guided_vote(scores, meta, meta_k=1) == pytest.approx(1 / 9)  # the 2.0 (meta 2.0; the None never votes)
    assert guided_vote(scores, meta, meta_k=2) == pytest.approx(2 / 9)  # 2.0 and 4.0
    assert guided_vote(scores, meta, meta_k=3) == pytest.approx(4 / 9)  # + 9.0
    assert guided_vote(scores, meta, meta_k=4) == pytest.approx(plain) == guided_vote(scores, meta, meta_k=9)
    assert guided_vote([7.0, 3.0], [1.0, 1.0], meta_k=1) == pytest.approx(6 / 9)  # tie: the earlier one
    assert guided_vote([None, 3.0], [1.0, 0.0], meta_k=1, min_votes=2) is None


def test_meta_head_learns_a_separable_set_and_applies_to_raw_features():
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(80, 6, generator=gen) * torch.tensor([1.0, 30.0, 1.0, 1.0, 1.0, 1.0]) + 100.0
    y = (x[:, 0] - 100.0 + 0.02 * (x[:, 1] - 100.0) > 0).long()
    head = fit_meta_head(x, y, steps=300, lr=0.05)
    with torch.no_grad():
        acc = float(((head(x).squeeze(-1) > 0).long() == y).float().mean())
    assert acc >= 0.95  # raw (unstandardised) features go straight into the head
    chance = fit_meta_head(x, y, steps=0)
    with torch.no_grad():
        assert float(((chance(x).squeeze(-1) > 0).long() == y).float().mean()) < 0.8
    with pytest.raises(ValueError, match="must match"):
        fit_meta_head(x, y[:3])


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory):
    """A random-weight 2-layer Llama with a character tokenizer (judge and meta RM trunk)."""
    folder = tmp_path_factory.mktemp("tiny_spct")
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


GOOD = "The sum 2+3 is 5, the answer says 5. Score: 9"
BAD = "zzzz qqqq. Score: 2"


def test_saved_meta_rm_guides_the_judges_vote(tiny_dir, tmp_path):
    lm = LlamaForCausalLM.from_pretrained(tiny_dir)
    tok = char_tokenizer(string.printable)
    rm = RewardModel(lm).eval()
    prompts = ["Judge: What is 2+3? The answer is 5.\nPrinciples:"] * 8
    texts = [GOOD + " " * i for i in range(4)] + [BAD + " " * i for i in range(4)]
    feats = trunk_features(rm, tok, prompts, texts)
    head = fit_meta_head(feats, torch.tensor([1] * 4 + [0] * 4), steps=200)
    folder = save_meta_rm(tmp_path / "meta", rm, tok, head, {"max_length": 512})
    loaded, ltok, info = load_reward_model(folder)
    assert info["kind"] == "spct-meta"
    rated = score(loaded, ltok, prompts, texts, 8, 512)
    with torch.no_grad():
        assert rated == pytest.approx(head(feats).squeeze(-1).tolist(), abs=1e-4)  # the saved head, read back
    assert min(rated[:4]) > max(rated[4:])

    spec = f"judge(model={str(tiny_dir)!r}, k=2, max_new_tokens=4, meta_rm={str(folder)!r}, meta_k=1)"
    judge = RewardRunner([spec], timeout_s=120).fns[0]
    assert isinstance(judge, GenerativeJudge) and judge.meta_rm is not None
    pairs = [("What is 2+3?", "The answer is 5.")]
    judged = judge.rate(pairs, [[Judgement(2.0, text=BAD), Judgement(9.0, text=GOOD), Judgement(failure="no_score")]])
    metas = [j.meta for j in judged[0]]
    assert metas[2] is None and metas[1] > metas[0]  # only scored judgements are rated
    assert judge.vote_of(judged[0]) == pytest.approx(8 / 9)  # the good critique's 9 alone
    assert vote(judged[0]) == pytest.approx((5.5 - 1) / 9)  # the plain vote averages the two


def test_meta_specs_are_checked(tiny_dir):
    with pytest.raises(ConfigError, match="meta_k"):
        RewardRunner([f"judge(model={str(tiny_dir)!r}, k=2, meta_k=1)"])
    with pytest.raises(ConfigError, match="meta_k"):
        RewardRunner([f"judge(model={str(tiny_dir)!r}, k=2, meta_rm={str(tiny_dir)!r}, meta_k=3)"])
    with pytest.raises(ConfigError, match="not a reward model"):
        RewardRunner([f"judge(model={str(tiny_dir)!r}, k=2, meta_rm={str(tiny_dir)!r}, meta_k=1)"])
