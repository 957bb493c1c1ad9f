"""A character-level tokenizer that the project builds itself, as a Hugging Face fast tokenizer.

One token per character of a task's alphabet plus <pad>, <bos>, <eos>, <unk>, optionally plus whole
`pieces` (a task's fixed words and markup) matched longest-first before falling back to characters. It
saves and reloads with `save_pretrained` / `AutoTokenizer.from_pretrained` like any HF tokenizer.
"""

from __future__ import annotations

import re
from typing import Sequence

from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, processors
from transformers import PreTrainedTokenizerFast

SPECIALS = ["<pad>", "<bos>", "<eos>", "<unk>"]


def char_tokenizer(alphabet: str, pieces: Sequence[str] = ()) -> PreTrainedTokenizerFast:
    """A fast tokenizer with one id per character of `alphabet` and one per string of `pieces`; <bos> is
    prepended when encoding. At each position the longest piece that matches is one token, else the
    character: a deterministic segmentation, so a name always splits the same way wherever it stands
    (as long as no piece runs from the text before it into it). Pieces shorten sequences several-fold
    for tasks with a fixed vocabulary of words and markup (e.g. `search_world`'s documents and tool calls).

    >>> tok = char_tokenizer("0123456789+= ")
    >>> len(tok), tok("12+3=")["input_ids"][:3] == [
    ...     tok.bos_token_id, tok.convert_tokens_to_ids("1"), tok.convert_tokens_to_ids("2")
    ... ]
    (17, True)
    >>> tok.decode(tok("12+3=")["input_ids"], skip_special_tokens=True)
    '12+3='
    >>> tok = char_tokenizer("abcdefghijklmnopqrstuvwxyz ", pieces=["is", "is a", "ka"])
    >>> tok.convert_ids_to_tokens(tok("kaka is a ki", add_special_tokens=False)["input_ids"])
    ['ka', 'ka', ' ', 'is a', ' ', 'k', 'i']
    """
    chars = sorted(set(alphabet))
    longest_first = sorted({p for p in pieces if len(p) > 1} - set(chars), key=lambda p: (-len(p), p))
    vocab = {tok: i for i, tok in enumerate(SPECIALS + chars + longest_first)}
    core = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    pattern = "|".join(
        [re.escape(p) for p in longest_first] + [r"[\s\S]"]
    )  # leftmost alternative wins: longest piece, else one character
    core.pre_tokenizer = pre_tokenizers.Split(Regex(pattern), behavior="isolated")
    core.decoder = decoders.Fuse()
    core.post_processor = processors.TemplateProcessing(single="<bos> $A", special_tokens=[("<bos>", vocab["<bos>"])])
    return PreTrainedTokenizerFast(
        tokenizer_object=core, pad_token="<pad>", bos_token="<bos>", eos_token="<eos>", unk_token="<unk>"
    )
