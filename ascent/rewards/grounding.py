"""Reference-free rewards for staying grounded in a source: `reward=source_similarity` (BM25 coverage of the source,
no model) or `source_similarity(method=embedding, encoder=PATH)` (cosine of mean-pooled encoder embeddings).

SG-SRL (Su et al. 2026, "Source-Grounded Semantic Reinforcement Learning for Low-Resource Target-Language
Generation", arXiv:2605.29502) rewards a generation by a cross-lingual reranker's (or an encoder embedding's)
semantic relevance to the source input, with no reference output. The source is the prompt, or a row field
(`source_field`). Two scorers:

- `bm25` (lexical, same-language): in a BM25 index (Lucene weights, k1, b) over the batch's distinct sources,
      w(t, x) = idf(t) · tf(t, x) / (tf(t, x) + k1 · (1 − b + b · |x| / avgdl)),  idf(t) = ln(1 + (N − df + ½)/(df + ½))
      r_i = Σ_{t ∈ T(y_i) ∩ T(x_i)} w(t, x_i)  /  Σ_{t ∈ T(x_i)} w(t, x_i)      ∈ [0, 1]
  (T: the set of lower-cased word tokens): the BM25-weighted share of the source's terms the output covers —
  BM25(query = output's distinct terms, document = its source) over the source's own score. Repeating words earns
  nothing; words not in the source earn nothing.
- `embedding` (semantic, any language the encoder knows): r_i = cos(e(x_i), e(y_i)) ∈ [−1, 1], e = the mean over
  real tokens of the last hidden state of `encoder` (a Hugging Face model folder).

The paper observes verbosity-based reward hacking with such rewards and repairs it with a recovery SFT stage on a
small parallel corpus: `recovery.steps=S recovery.rows=R` runs it after RL (`ascent.app.pipeline.recovery_phase`:
S steps of SFT on R of the task's demonstrations, evaluated as `accuracy_recovered` beside `accuracy_after_rl`);
a length term (`overlong`, `format`) and a KL penalty also help. An empty output scores 0.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import dataclass
from typing import Any, Optional

import torch

from ascent import papers
from ascent.rewards.builtin import REWARDS
from ascent.typed import ConfigError, build

_WORD = re.compile(r"\w+", re.UNICODE)
METHODS = ("bm25", "embedding")


@dataclass(frozen=True)
class SourceSimilarityParams:
    """The `source_similarity` reward's knobs."""

    method: str = "bm25"
    """`bm25` (lexical coverage of the source's terms) or `embedding` (cosine of encoder embeddings)."""
    source_field: str = ""
    """Row field holding the source text; empty: the prompt is the source."""
    encoder: str = ""
    """`embedding` only: a Hugging Face model folder whose mean-pooled last hidden state embeds texts."""
    k1: float = 1.5
    """BM25 term-frequency saturation."""
    b: float = 0.75
    """BM25 length normalisation."""
    max_length: int = 512
    """`embedding` only: tokens kept per text."""
    device: Optional[str] = None
    """`embedding` only: the encoder's device; None: the learner's."""

    def __post_init__(self) -> None:
        if self.method not in METHODS:
            raise ValueError(f"method must be one of {', '.join(METHODS)}, got {self.method!r}")
        if self.method == "embedding" and not self.encoder:
            raise ValueError("method=embedding needs encoder=PATH (a Hugging Face model folder)")
        if self.k1 < 0 or not 0 <= self.b <= 1 or self.max_length < 1:
            raise ValueError("k1 must be >= 0, b in [0, 1] and max_length >= 1")


def words(text: str) -> list[str]:
    """Lower-cased word tokens.

    >>> words("The Cat, the cat!")
    ['the', 'cat', 'the', 'cat']
    """
    return _WORD.findall(text.lower())


def bm25_coverage(sources: list[str], outputs: list[str], k1: float = 1.5, b: float = 0.75) -> list[float]:
    """r_i = Σ_{t ∈ T(y_i) ∩ T(x_i)} w(t, x_i) / Σ_{t ∈ T(x_i)} w(t, x_i) with BM25 (Lucene) weights over the
    distinct sources (see the module docstring); 0 for an empty output or a source without words.

    >>> [round(r, 4) for r in bm25_coverage(["the cat sat", "dog and cat"], ["a cat sat", "nothing here"])]
    [0.5581, 0.0]
    """
    docs = {x: Counter(words(x)) for x in dict.fromkeys(sources)}  # distinct sources, in order
    n = len(docs)
    avgdl = sum(sum(c.values()) for c in docs.values()) / max(n, 1)
    df = Counter(t for c in docs.values() for t in c)

    def weight(t: str, doc: Counter) -> float:
        idf = math.log(1.0 + (n - df[t] + 0.5) / (df[t] + 0.5))
        tf, length = doc[t], sum(doc.values())
        return idf * tf / (tf + k1 * (1.0 - b + b * length / max(avgdl, 1e-9)))

    out = []
    for x, y in zip(sources, outputs):
        doc = docs[x]
        total = sum(weight(t, doc) for t in doc)
        covered = sum(weight(t, doc) for t in set(words(y)) if t in doc)
        out.append(covered / total if total > 0 else 0.0)
    return out


@REWARDS.register(
    "source_similarity",
    params=SourceSimilarityParams,
    paper=papers.SG_SRL,
    fidelity="reduced",
    departures=(
        (
            "BM25 coverage of the source (same language) or an encoder-embedding cosine instead of the cross-lingual "
            "reranker"
        ),
        (
            "the recovery SFT stage is a pipeline stage beside the reward (`recovery.steps`, `recovery.rows`): a short "
            "SFT of the RL policy on a seeded draw of the task's own demonstrations, not a separate parallel corpus"
        ),
    ),
)
class SourceSimilarity:
    """Reference-free grounding reward (SG-SRL, Su et al. 2026, arXiv:2605.29502): BM25-weighted coverage of the
    source's terms, r = Σ_{t∈T(y)∩T(x)} w(t, x) / Σ_{t∈T(x)} w(t, x) (`bm25`), or cos(e(x), e(y)) of mean-pooled
    encoder embeddings (`embedding`). The source is the prompt or the row field `source_field`."""

    def __init__(self, **params: Any) -> None:
        self.params = p = build(SourceSimilarityParams, params, "source_similarity")
        self.encoder, self.tokenizer = load_encoder(p.encoder, p.device) if p.method == "embedding" else (None, None)
        self.__name__ = "source_similarity"

    def place(self, device: str) -> None:
        """Move the encoder to the learner's device, unless the spec fixed one."""
        if self.encoder is not None and self.params.device is None:
            self.encoder.to(device)

    def __call__(self, prompts: list[str], completions: list[str], **fields: Any) -> list[Optional[float]]:
        p = self.params
        if p.source_field:
            column = fields.get(p.source_field)
            if column is None:
                raise ValueError(f"source_similarity: the rows have no field {p.source_field!r} (source_field)")
            sources = [None if s is None else str(s) for s in column]
        else:
            sources = list(prompts)
        keep = [i for i, s in enumerate(sources) if s is not None]
        xs, ys = [sources[i] for i in keep], [completions[i] for i in keep]
        values = bm25_coverage(xs, ys, p.k1, p.b) if p.method == "bm25" else self.cosines(xs, ys)
        out: list[Optional[float]] = [None] * len(prompts)
        for i, v in zip(keep, values):
            out[i] = 0.0 if not completions[i].strip() else v
        return out

    @torch.no_grad()
    def cosines(self, sources: list[str], outputs: list[str]) -> list[float]:
        """cos(e(x_i), e(y_i)) with mean-pooled last hidden states."""
        if not sources:
            return []
        emb = embed(self.encoder, self.tokenizer, sources + outputs, self.params.max_length)  # (2n, H)
        return torch.nn.functional.cosine_similarity(emb[: len(sources)], emb[len(sources) :], dim=-1).tolist()


def load_encoder(path: str, device: Optional[str]) -> tuple[Any, Any]:
    """(encoder model in eval mode, tokenizer) of a Hugging Face folder; ConfigError saying what is wrong."""
    from pathlib import Path

    from transformers import AutoModel

    from ascent.policy.model import load_tokenizer

    if not (Path(path) / "config.json").exists():
        raise ConfigError(f"source_similarity: encoder={path!r} is not a Hugging Face model folder (no config.json)")
    try:
        model = AutoModel.from_pretrained(path, dtype=torch.float32)
        tokenizer = load_tokenizer(path)
    except (OSError, ValueError, RuntimeError, KeyError) as err:
        raise ConfigError(f"source_similarity: cannot load encoder {path!r}: {str(err).splitlines()[0]}") from None
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    model.eval().requires_grad_(False)
    return (model.to(device) if device else model), tokenizer


def embed(model: Any, tokenizer: Any, texts: list[str], max_length: int) -> torch.Tensor:
    """(n, H) mean over each text's real tokens of the model's last hidden state."""
    batch = tokenizer(texts, padding=True, truncation=True, max_length=max_length, return_tensors="pt")
    device = next(model.parameters()).device
    mask = batch["attention_mask"].to(device)  # (n, T)
    hidden = model(input_ids=batch["input_ids"].to(device), attention_mask=mask).last_hidden_state  # (n, T, H)
    m = mask.unsqueeze(-1).to(hidden.dtype)
    return (hidden * m).sum(1) / m.sum(1).clamp(min=1.0)  # (n, H)
