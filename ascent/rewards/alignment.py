"""Term-alignment rewards for translation: `reward=[answer_f1,'term_align(corpus=PARALLEL.jsonl)']`.

TAT-R1 (Li, Zheng, Song & Yang 2025, "TAT-R1: Terminology-Aware Translation with Reinforcement Learning and Word
Alignment", arXiv:2505.21172) extracts keyword translation pairs with a word-alignment model and adds three
rule-based alignment rewards to the usual R1-style translation reward (format + COMET). With S the source, R the
reference and P the predicted translation, A_ref = Align(S, R) and A_pre = Align(S, P) are word alignments, kept
only where the source word is a key word (the paper: nouns found by NER), giving A_ref_key and A_pre_key.

The aligner here is IBM Model 1 (Brown et al. 1993), trained by EM on the parallel corpus the reward is given
(`corpus`): t(f | e) for target word f and source word e (plus NULL), EM updates

    c(f, e) += t(f | e) / Σ_{e' ∈ S ∪ {NULL}} t(f | e')   for every target word f of every pair (S, T)
    t(f | e) = c(f, e) / Σ_f' c(f', e)

and the Viterbi alignment links each target word f_j to argmax_{e ∈ S ∪ {NULL}} t(f_j | e). The three rewards,
as ascent reads them (the paper's abstract names three alignment reward types; the exact formulas below are
ascent's), over the key source words K with at least one reference-aligned word, W_ref(i) = {r_j : (i, j) ∈ A_ref}
and W_pre(i) = {p_k : (i, k) ∈ A_pre}:

    aaw (answer-align-word)  = |{i ∈ K : W_ref(i) ∩ W_pre(i) ≠ ∅}| / |K|
    aao (answer-align-order) = share of the pairs i < i' in K whose first matched words keep the reference's order
                               in the prediction (a pair with an unmatched word counts as out of order; aaw when
                               |K| < 2)
    taw (think-align-word)   = |{i ∈ K : W_ref(i) ∩ words(think) ≠ ∅}| / |K|   (the <think> part names the terms)

The reward is the mean of the chosen `parts`. The answer is the <answer>...</answer> span when there is one, else
the whole completion. Key words: the row's `keywords` field (a list or a space-separated string of source words)
or, without it, the source words whose document frequency in the aligner's corpus is at most `key_df` (rare words,
the stand-in for terms; the paper runs NER and keeps nouns). A row without source or reference gets no opinion
(None); a row with no key word, an empty answer, or no think part for `taw` scores 0 there, and the reason is
counted in the `term_align/` metrics.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from itertools import combinations
from pathlib import Path
from typing import Any, Optional

import numpy as np

from ascent import papers
from ascent.rewards.builtin import REWARDS
from ascent.rewards.grounding import words
from ascent.typed import ConfigError, build

PARTS = ("aaw", "aao", "taw")
NULL = "<null>"


class IBM1:
    """IBM Model 1 lexical translation table t(f | e) trained by EM on (source words, target words) pairs.

    >>> m = IBM1([("das haus".split(), "the house".split()), ("das buch".split(), "the book".split()),
    ...           ("ein buch".split(), "a book".split())], iterations=20)
    >>> m.align("das buch".split(), "the book".split())
    [(0, 0), (1, 1)]
    """

    def __init__(self, pairs: list[tuple[list[str], list[str]]], iterations: int = 10) -> None:
        if not pairs:
            raise ValueError("IBM1 needs at least one sentence pair")
        if iterations < 1:
            raise ValueError(f"iterations must be >= 1, got {iterations}")
        self.src = {w: i for i, w in enumerate([NULL] + sorted({w for s, _ in pairs for w in s}))}
        self.tgt = {w: i for i, w in enumerate(sorted({w for _, t in pairs for w in t}))}
        self.t = np.full((len(self.src), len(self.tgt)), 1.0 / len(self.tgt))  # (E+1, F) t(f | e)
        ids = [([0] + [self.src[w] for w in s], [self.tgt[w] for w in t]) for s, t in pairs if t]
        for _ in range(iterations):
            counts = np.zeros_like(self.t)
            for e, f in ids:
                sub = self.t[np.ix_(e, f)]  # (|S|+1, |T|)
                post = sub / sub.sum(axis=0, keepdims=True)  # P(a_j = i | S, T)
                np.add.at(counts, (np.array(e)[:, None], np.array(f)[None, :]), post)
            totals = counts.sum(axis=1, keepdims=True)
            self.t = np.where(totals > 0, counts / np.maximum(totals, 1e-300), self.t)
        self.df = Counter(w for s, _ in pairs for w in set(s))
        self.n_sentences = len(pairs)

    def prob(self, f: str, e: str) -> float:
        """t(f | e); 0 for a word the corpus never had."""
        if f not in self.tgt or e not in self.src:
            return 0.0
        return float(self.t[self.src[e], self.tgt[f]])

    def align(self, source: list[str], target: list[str]) -> list[tuple[int, int]]:
        """Viterbi alignment (source position i, target position j): each target word goes to its most likely
        source word, NULL included (NULL links are dropped; a word unseen in the corpus stays unaligned)."""
        out = []
        for j, f in enumerate(target):
            scores = [self.prob(f, NULL)] + [self.prob(f, e) for e in source]
            best = int(np.argmax(scores))
            if best > 0 and scores[best] > 0:
                out.append((best - 1, j))
        return sorted(out)


@dataclass(frozen=True)
class TermAlignParams:
    """The `term_align` reward's knobs."""

    corpus: str = ""
    """JSONL parallel corpus the IBM Model 1 aligner is trained on (fields `source_key`, `target_key`)."""
    source_key: str = "source"
    """Corpus field holding the source sentence."""
    target_key: str = "answer"
    """Corpus field holding the target sentence."""
    iterations: int = 10
    """EM iterations of the aligner."""
    parts: str = "aaw,aao"
    """Comma-separated alignment rewards to average: aaw, aao, taw."""
    source_field: str = "source"
    """Row field holding the source sentence (empty: the prompt is the source)."""
    key_df: float = 0.1
    """Without a `keywords` field: key words are source words in at most this share of the corpus's sentences."""

    def __post_init__(self) -> None:
        if not self.corpus:
            raise ValueError("term_align needs corpus=PATH.jsonl (the parallel corpus its aligner learns from)")
        bad = [p for p in self.part_list() if p not in PARTS]
        if bad or not self.part_list():
            raise ValueError(f"parts must be a comma list of {', '.join(PARTS)}, got {self.parts!r}")
        if self.iterations < 1 or not 0 < self.key_df <= 1:
            raise ValueError("iterations must be >= 1 and key_df in (0, 1]")

    def part_list(self) -> list[str]:
        return [p.strip() for p in self.parts.split(",") if p.strip()]


def read_parallel(path: str, source_key: str, target_key: str) -> list[tuple[list[str], list[str]]]:
    """(source words, target words) of every line of a JSONL corpus; ConfigError naming the file and line."""
    file = Path(path)
    if not file.exists():
        raise ConfigError(f"term_align: corpus {path!r} does not exist")
    pairs = []
    for n, line in enumerate(file.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as err:
            raise ConfigError(f"term_align: {path}:{n}: not valid JSON ({err.msg})") from None
        if (
            not isinstance(row, dict)
            or not isinstance(row.get(source_key), str)
            or not isinstance(row.get(target_key), str)
        ):
            raise ConfigError(f"term_align: {path}:{n}: needs string fields {source_key!r} and {target_key!r}")
        pairs.append((words(row[source_key]), words(row[target_key])))
    if not pairs:
        raise ConfigError(f"term_align: corpus {path!r} has no sentence pairs")
    return pairs


def span(text: str, tag: str) -> Optional[str]:
    """The text inside the first <tag>...</tag>, or None.

    >>> span("<think>a b</think><answer> c </answer>", "answer"), span("c", "think")
    (' c ', None)
    """
    start, end = text.find(f"<{tag}>"), text.find(f"</{tag}>")
    if start < 0 or end < start:
        return None
    return text[start + len(tag) + 2 : end]


def alignment_parts(
    aligner: IBM1, source: list[str], reference: list[str], answer: list[str], think: Optional[list[str]], keys: set
) -> dict[str, float]:
    """{aaw, aao, taw} of one sample (see the module docstring); {} when no key word has a reference alignment."""
    ref_of: dict[int, set[str]] = {}
    ref_pos: dict[int, int] = {}  # first reference position aligned to each key word
    for i, j in aligner.align(source, reference):
        if source[i] in keys:
            ref_of.setdefault(i, set()).add(reference[j])
            ref_pos.setdefault(i, j)
    if not ref_of:
        return {}
    pre_pos: dict[int, list[int]] = {}
    for i, k in aligner.align(source, answer):
        if i in ref_of and answer[k] in ref_of[i]:
            pre_pos.setdefault(i, []).append(k)
    key_ids = sorted(ref_of)
    aaw = len(pre_pos) / len(key_ids)
    pairs = list(combinations(key_ids, 2))
    if pairs:
        kept = sum(
            a in pre_pos and b in pre_pos and (ref_pos[a] < ref_pos[b]) == (min(pre_pos[a]) < min(pre_pos[b]))
            for a, b in pairs
        )
        aao = kept / len(pairs)
    else:
        aao = aaw
    taw = 0.0 if think is None else sum(bool(ref_of[i] & set(think)) for i in key_ids) / len(key_ids)
    return {"aaw": aaw, "aao": aao, "taw": taw}


@REWARDS.register(
    "term_align",
    params=TermAlignParams,
    paper=papers.TAT_R1,
    fidelity="ascent",
    departures=(
        "the three alignment rewards' exact formulas are ascent's reading of the paper (answer-align-word, "
        "answer-align-order, think-align-word), written in the module docstring",
        "IBM Model 1 trained by EM on the task's own parallel corpus instead of SimAlign's multilingual embeddings",
        "key words are the row's `keywords` or rare source words (document frequency <= key_df), not NER nouns",
        "the COMET and format rewards are separate registry entries (`answer_f1` stands in for COMET in the toy run)",
    ),
)
class TermAlign:
    """TAT-R1 term-alignment reward (Li et al. 2025, arXiv:2505.21172): mean of aaw / aao / taw over key words.

    The mean of the chosen alignment rewards: aaw = share of key source words whose reference-aligned word is
    aligned to them in the answer, aao = share of key pairs kept in reference order, taw = share of key words whose
    reference translation the <think> part names; alignments from an IBM Model 1 aligner trained on `corpus`."""

    def __init__(self, **params: Any) -> None:
        self.params = p = build(TermAlignParams, params, "term_align")
        self.aligner = IBM1(read_parallel(p.corpus, p.source_key, p.target_key), p.iterations)
        self.parts = p.part_list()
        self.reasons: Counter = Counter()
        self.calls = 0
        self.__name__ = "term_align"

    def keys_of(self, source: list[str], row_keys: Any) -> set:
        """The key words of one source sentence: the row's `keywords` or its rare words."""
        if row_keys is not None:
            listed = row_keys.split() if isinstance(row_keys, str) else [str(k) for k in row_keys]
            return {w for k in listed for w in words(k)}
        limit = self.params.key_df * self.aligner.n_sentences
        return {w for w in source if self.aligner.df.get(w, 0) <= limit}

    def metrics(self) -> dict[str, float]:
        n = max(self.calls, 1)
        return {f"term_align/{reason}_frac": count / n for reason, count in sorted(self.reasons.items())}

    def __call__(self, prompts: list[str], completions: list[str], **fields: Any) -> list[Optional[float]]:
        p, n = self.params, len(completions)
        sources = list(prompts) if not p.source_field else fields.get(p.source_field)
        if sources is None:
            raise ValueError(f"term_align: the rows have no field {p.source_field!r} (source_field)")
        refs, keys = fields.get("answer") or [None] * n, fields.get("keywords") or [None] * n
        self.reasons, self.calls = Counter(), n
        out: list[Optional[float]] = []
        for src, ref, row_keys, completion in zip(sources, refs, keys, completions):
            if src is None or ref is None:
                self.reasons["no_reference"] += 1
                out.append(None)
                continue
            answer = span(completion, "answer")
            answer_words = words(completion if answer is None else answer)
            think = span(completion, "think")
            source = words(str(src))
            values = alignment_parts(
                self.aligner,
                source,
                words(str(ref)),
                answer_words,
                None if think is None else words(think),
                self.keys_of(source, row_keys),
            )
            if not values or not answer_words:
                self.reasons["no_key_word" if not values else "empty_answer"] += 1
                out.append(0.0)
                continue
            if "taw" in self.parts and think is None:
                self.reasons["no_think"] += 1
            out.append(sum(values[k] for k in self.parts) / len(self.parts))
        return out
