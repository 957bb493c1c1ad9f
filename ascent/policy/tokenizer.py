"""A character-level tokenizer that the project builds itself, as a Hugging Face fast tokenizer.

One token per character of a task's alphabet plus <pad>, <bos>, <eos>, <unk>. It saves and reloads with
`save_pretrained` / `AutoTokenizer.from_pretrained` like any HF tokenizer.
"""

from __future__ import annotations

from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, processors
from transformers import PreTrainedTokenizerFast

SPECIALS = ["<pad>", "<bos>", "<eos>", "<unk>"]


def char_tokenizer(alphabet: str) -> PreTrainedTokenizerFast:
    """A fast tokenizer with one id per character of `alphabet`; <bos> is prepended when encoding.

    >>> tok = char_tokenizer("0123456789+= ")
    >>> len(tok), tok("12+3=")["input_ids"][:3] == [tok.bos_token_id, tok.convert_tokens_to_ids("1"), tok.convert_tokens_to_ids("2")]
    (17, True)
    >>> tok.decode(tok("12+3=")["input_ids"], skip_special_tokens=True)
    '12+3='
    """
    chars = sorted(set(alphabet))
    vocab = {tok: i for i, tok in enumerate(SPECIALS + chars)}
    core = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    core.pre_tokenizer = pre_tokenizers.Split(Regex(r"[\s\S]"), behavior="isolated")  # any character, newline included
    core.decoder = decoders.Fuse()
    core.post_processor = processors.TemplateProcessing(single="<bos> $A", special_tokens=[("<bos>", vocab["<bos>"])])
    return PreTrainedTokenizerFast(
        tokenizer_object=core, pad_token="<pad>", bos_token="<bos>", eos_token="<eos>", unk_token="<unk>"
    )
