"""A scratch run's model folder reloads with its own tokenizer: `AutoTokenizer` would force the qwen2 model type's
byte-level class and lose a char tokenizer's spaces and multi-character pieces."""

from __future__ import annotations

from transformers import AutoTokenizer

from ascent.config.schema import ModelConfig
from ascent.policy.model import Policy, load_hf, load_tokenizer, scratch_model
from ascent.policy.tokenizer import char_tokenizer

TEXT = "Goal: take red key, then go east blue"


def saved_scratch_policy(tmp_path):
    tok = char_tokenizer("abcdefghijklmnopqrstuvwxyzG:, ", pieces=["Goal: ", " red", " key", ", then ", "take", " go"])
    model = scratch_model(ModelConfig(), len(tok), tok.bos_token_id, tok.eos_token_id, tok.pad_token_id)
    Policy(model, tok).save(tmp_path)
    return tok


def test_scratch_folder_reloads_the_same_tokenizer(tmp_path):
    tok = saved_scratch_policy(tmp_path)
    expected = tok(TEXT)["input_ids"]
    assert tok.convert_ids_to_tokens(expected)[1:4] == ["Goal: ", "take", " red"]
    # what the plain AutoTokenizer does with this folder (why load_tokenizer exists): not the same ids
    assert AutoTokenizer.from_pretrained(tmp_path)(TEXT)["input_ids"] != expected
    loaded = load_tokenizer(tmp_path)
    assert loaded(TEXT)["input_ids"] == expected
    assert loaded.decode(expected, skip_special_tokens=True) == TEXT
    assert load_hf(tmp_path).tokenizer(TEXT)["input_ids"] == expected
