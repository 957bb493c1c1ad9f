"""`source_similarity`: BM25 coverage against the bm25s library's own scores, the embedding cosine by hand, the
source from a row field, and bad specs."""

from __future__ import annotations

import string

import bm25s
import pytest
import torch
from transformers import LlamaConfig, LlamaModel

from ascent.policy.tokenizer import char_tokenizer
from ascent.rewards.grounding import bm25_coverage, embed, words
from ascent.rewards.runner import resolve_reward
from ascent.typed import ConfigError

pytestmark = pytest.mark.usefixtures("one_thread")
SOURCES = ["the quick brown fox jumps over the lazy dog", "stock prices fell sharply in early trading", "a cat sat"]
OUTPUTS = ["a brown fox and a dog", "prices fell prices fell prices fell", "the cat sat on the mat"]


def test_bm25_coverage_is_bm25s_score_over_the_sources_own_score():
    index = bm25s.BM25(k1=1.5, b=0.75)
    index.index([words(x) for x in SOURCES], show_progress=False)
    want = [
        index.get_scores(sorted(set(words(y))))[i] / index.get_scores(sorted(set(words(x))))[i]
        for i, (x, y) in enumerate(zip(SOURCES, OUTPUTS))
    ]
    assert bm25_coverage(SOURCES, OUTPUTS) == pytest.approx(want, rel=1e-5)
    assert bm25_coverage(SOURCES, SOURCES) == pytest.approx([1.0, 1.0, 1.0])
    repeated = bm25_coverage(SOURCES[1:2], ["prices fell"])[0]
    assert repeated == pytest.approx(bm25_coverage(SOURCES[1:2], [OUTPUTS[1]])[0])  # repetition earns nothing


def test_reward_reads_the_source_field_and_scores_empty_outputs_zero():
    reward = resolve_reward("source_similarity(source_field=source)")
    out = reward(["translate:"] * 3, [OUTPUTS[0], "   ", OUTPUTS[2]], source=[SOURCES[0], SOURCES[1], None])
    assert out[0] == pytest.approx(bm25_coverage(SOURCES[:2], [OUTPUTS[0], ""])[0]) and out[1] == 0.0
    assert out[2] is None  # no source: no opinion
    with pytest.raises(ValueError, match="no field 'source'"):
        reward(["x"], ["y"])


def test_embedding_cosine_by_hand(tmp_path):
    tok = char_tokenizer(string.printable)
    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=len(tok),
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=1,
        max_position_embeddings=256,
        pad_token_id=tok.pad_token_id,
        eos_token_id=tok.eos_token_id,
    )
    LlamaModel(config).save_pretrained(tmp_path / "enc")
    tok.save_pretrained(tmp_path / "enc")
    reward = resolve_reward(f"source_similarity(method=embedding, encoder={tmp_path / 'enc'})")
    got = reward(SOURCES[:2], [SOURCES[0], OUTPUTS[1]])
    assert got[0] == pytest.approx(1.0, abs=1e-5)  # the source itself
    one = [embed(reward.encoder, reward.tokenizer, [t], 256)[0] for t in (SOURCES[1], OUTPUTS[1])]
    assert got[1] == pytest.approx(float(one[0] @ one[1] / (one[0].norm() * one[1].norm())), abs=1e-5)  # no padding


@pytest.mark.parametrize(
    "spec, message",
    [
        ("source_similarity(method=reranker)", "method must be one of"),
        ("source_similarity(method=embedding)", "needs encoder=PATH"),
        ("source_similarity(method=embedding, encoder=/nonexistent)", "not a Hugging Face model folder"),
        ("source_similarity(b=2)", "b in"),
    ],
)
def test_bad_specs(spec, message):
    with pytest.raises(ConfigError, match=message):
        resolve_reward(spec)
