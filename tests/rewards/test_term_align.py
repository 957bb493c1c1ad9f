"""`term_align` (TAT-R1): the IBM Model 1 aligner's EM by hand, the three alignment rewards on crafted
translations, key words from the row or from document frequency, and bad specs / rows."""

from __future__ import annotations

import json

import pytest

from ascent.rewards.alignment import IBM1, alignment_parts
from ascent.rewards.runner import resolve_reward
from ascent.typed import ConfigError

SRC = "s1 s2 s3 s4 s5".split()
TGT = "t1 t2 t3 t4 t5".split()


def corpus_pairs() -> list[tuple[list[str], list[str]]]:
    """Every ordered window of 2-3 words of a one-to-one toy language (monotone word order)."""
    out = []
    for n in (2, 3):
        for i in range(len(SRC) - n + 1):
            out.append((SRC[i : i + n], TGT[i : i + n]))
    out.append((["s1", "s3", "s5"], ["t1", "t3", "t5"]))
    return out


@pytest.fixture
def corpus(tmp_path):
    path = tmp_path / "parallel.jsonl"
    path.write_text(
        "".join(json.dumps({"source": " ".join(s), "answer": " ".join(t)}) + "\n" for s, t in corpus_pairs())
    )
    return str(path)


def test_one_em_iteration_by_hand():
    m = IBM1([("a b".split(), "x y".split()), (["a"], ["x"])], iterations=1)
    # pair 1: every posterior 1/3; pair 2: 1/2 to NULL and to a. Counts of a: x 5/6, y 1/3 -> t(x|a) = 5/7.
    assert m.prob("x", "a") == pytest.approx(5 / 7) and m.prob("y", "a") == pytest.approx(2 / 7)
    assert m.prob("x", "b") == pytest.approx(0.5) and m.prob("y", "<null>") == pytest.approx(2 / 7)
    assert m.prob("z", "a") == 0.0  # a word the corpus never had


def test_em_learns_the_toy_lexicon_and_aligns_reordered_words():
    m = IBM1(corpus_pairs(), iterations=30)
    assert all(max(TGT, key=lambda f: m.prob(f, e)) == t for e, t in zip(SRC, TGT))
    assert m.align(["s1", "s2", "s3"], ["t3", "t2", "t1"]) == [(0, 2), (1, 1), (2, 0)]
    assert m.align(["s1"], ["unknown"]) == []


def test_the_three_alignment_rewards_by_hand():
    m = IBM1(corpus_pairs(), iterations=30)
    src, ref, keys = ["s1", "s2", "s3"], ["t1", "t2", "t3"], {"s1", "s3"}
    assert alignment_parts(m, src, ref, ["t1", "t2", "t3"], None, keys) == {"aaw": 1.0, "aao": 1.0, "taw": 0.0}
    assert alignment_parts(m, src, ref, ["t3", "t2", "t1"], ["t3"], keys) == {"aaw": 1.0, "aao": 0.0, "taw": 0.5}
    assert alignment_parts(m, src, ref, ["t1", "t2"], ["t1", "t3"], keys) == {"aaw": 0.5, "aao": 0.0, "taw": 1.0}
    one_key = alignment_parts(m, src, ref, ["t2", "t3"], None, {"s1"})  # one key word: aao falls back to aaw
    assert one_key["aaw"] == 0.0 and one_key["aao"] == 0.0
    assert alignment_parts(m, src, ref, ["t1"], None, {"s9"}) == {}  # no key word in the sentence


def test_reward_reads_answer_spans_keywords_and_records_reasons(corpus):
    reward = resolve_reward(f"term_align(corpus={corpus}, parts='aaw,taw')")
    out = reward(
        ["translate"] * 4,
        ["<think>s1 is t1</think><answer>t1 t2 t3</answer>", "t1 t2 t3", "<answer></answer>", "t1"],
        source=["s1 s2 s3", "s1 s2 s3", "s1 s2 s3", None],
        answer=["t1 t2 t3"] * 3 + [None],
        keywords=[["s1", "s3"], "s1 s3", ["s1"], None],
    )
    assert out == [pytest.approx(0.75), pytest.approx(0.5), 0.0, None]  # (1 + 1/2)/2; (1 + 0)/2; empty answer
    assert reward.metrics() == {
        "term_align/empty_answer_frac": 0.25,
        "term_align/no_reference_frac": 0.25,
        "term_align/no_think_frac": 0.25,  # the empty answer scores 0 before its missing think part is counted
    }


def test_key_words_default_to_rare_source_words(corpus):
    reward = resolve_reward(f"term_align(corpus={corpus}, key_df=0.4)")
    # document frequency in the 8-sentence corpus: s1 3, s2 4, s3 6, s4 4, s5 3 -> s1 and s5 are rare (<= 3.2)
    assert reward.keys_of(["s1", "s2", "s3"], None) == {"s1"}
    assert reward(["x"], ["t1 t9"], source=["s1 s3"], answer=["t1 t3"]) == [1.0]
    assert reward(["x"], ["t3"], source=["s3"], answer=["t3"]) == [0.0]  # s3 is common: no key word, zero
    assert reward.metrics() == {"term_align/no_key_word_frac": 1.0}


def test_bad_specs_and_rows_fail_with_one_line(tmp_path, corpus):
    with pytest.raises(ConfigError, match="needs corpus"):
        resolve_reward("term_align")
    with pytest.raises(ConfigError, match="does not exist"):
        resolve_reward(f"term_align(corpus={tmp_path / 'none.jsonl'})")
    with pytest.raises(ConfigError, match="parts must be"):
        resolve_reward(f"term_align(corpus={corpus}, parts=bleu)")
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"source": "a"}\n')
    with pytest.raises(ConfigError, match="bad.jsonl:1: needs string fields"):
        resolve_reward(f"term_align(corpus={bad})")
    with pytest.raises(ValueError, match="no field 'source'"):
        resolve_reward(f"term_align(corpus={corpus})")(["x"], ["t1"], answer=["t1"])
