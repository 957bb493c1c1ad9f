"""A small evidence reward model that learns online: `evidence_rm(scorer=evidence_lr, outcome=answer_em)`.

The scorer EAPO's co-evolution needs (Guan et al. 2026, arXiv:2601.10306): it scores a piece of evidence e for a
question x with the probability that an answer built on it is right, and `evidence_rm` updates it on the outcomes
of the policy's own rollouts (`update`). A logistic model over hashed features,

    φ(x, e) = bias, the character n-grams (n = 1..`ngram`) of e, and those n-grams of e that also occur in the
              question q (the last whitespace-separated word of x), each hashed into `buckets` weights
    s(x, e) = σ(w · φ(x, e))                                   (the score, in (0, 1))
    update:   w ← w − lr · [(s − y) φ + l2 · w]  per labelled (x, e, y), y ∈ {0, 1}, in the order given

so what it learns is which evidence, relative to the question, leads to right answers. It starts at w = 0 (every
score 0.5: no opinion yet, so the group-relative evidence reward is 0 until it learns). Its weights and count are
its `state_dict`. A reduction of the paper's LLM reward model, small enough to train inside a CPU run.

`grounded_answer` (a held-out grader for the `needle` task): the answer is right and the evidence is the needle.
"""

from __future__ import annotations

import hashlib
import math
import re
from dataclasses import dataclass
from typing import Any, Optional

from ascent import papers
from ascent.rewards.builtin import REWARDS
from ascent.rewards.evidence import evidence_of
from ascent.typed import build

EVIDENCE = r"<evidence>(.*?)</evidence>"


@dataclass(frozen=True)
class EvidenceLRParams:
    """The `evidence_lr` scorer's knobs."""

    ngram: int = 2
    """Longest character n-gram of the evidence used as a feature, >= 1."""
    buckets: int = 4096
    """Hashed weights, >= 16."""
    lr: float = 0.5
    """SGD step size per labelled example, > 0."""
    l2: float = 1e-4
    """L2 penalty on the weights touched by an example, >= 0."""

    def __post_init__(self) -> None:
        if self.ngram < 1 or self.buckets < 16 or self.lr <= 0 or self.l2 < 0:
            raise ValueError("evidence_lr needs ngram >= 1, buckets >= 16, lr > 0 and l2 >= 0")


def features(prompt: str, evidence: str, ngram: int) -> list[str]:
    """φ's feature names: `b` (bias), `e:NGRAM` per n-gram of the evidence, `q:NGRAM` per such n-gram also found in
    the question (the prompt's last word).

    >>> features("a1 f9 ?f", "f9", 2)
    ['b', 'e:f', 'e:9', 'e:f9', 'q:f']
    """
    words = prompt.split()
    question = words[-1] if words else ""
    grams = [evidence[i : i + n] for n in range(1, ngram + 1) for i in range(len(evidence) - n + 1)]
    return ["b"] + [f"e:{g}" for g in grams] + [f"q:{g}" for g in grams if g.strip() and g in question]


def bucket(name: str, buckets: int) -> int:
    """A feature's weight index (stable across processes: a hash of its name)."""
    return int.from_bytes(hashlib.blake2b(name.encode(), digest_size=8).digest(), "little") % buckets


@REWARDS.register(
    "evidence_lr",
    params=EvidenceLRParams,
    paper=papers.EAPO_EVIDENCE,
    fidelity="reduced",
    departures=(
        "a logistic model over hashed character n-grams of the evidence and their overlap with the question, "
        "trained online from rollout outcomes, instead of the paper's LLM reward model",
    ),
)
class EvidenceLR:
    """EAPO's evidence reward model, reduced (Guan et al. 2026, arXiv:2601.10306): s(x, e) = σ(w · φ(x, e)) over
    hashed n-gram and question-overlap features; `update` takes SGD steps on the log loss of outcome labels."""

    def __init__(self, **params: Any) -> None:
        self.params = build(EvidenceLRParams, params, "evidence_lr")
        self.w = [0.0] * self.params.buckets
        self.updates = 0
        self.__name__ = "evidence_lr"

    def _index(self, prompt: str, evidence: str) -> list[int]:
        p = self.params
        return [bucket(f, p.buckets) for f in features(prompt, evidence, p.ngram)]

    def score_one(self, prompt: str, evidence: str) -> float:
        z = sum(self.w[i] for i in self._index(prompt, evidence))
        return 1.0 / (1.0 + math.exp(-max(-30.0, min(30.0, z))))

    def __call__(self, prompts: list[str], completions: list[str], **_: Any) -> list[float]:
        return [self.score_one(x, e) for x, e in zip(prompts, completions)]

    def update(self, prompts: list[str], evidence: list[str], labels: list[float]) -> None:
        """One SGD step on the log loss per (prompt, evidence, label), in order."""
        p = self.params
        for x, e, y in zip(prompts, evidence, labels):
            idx = self._index(x, e)
            g = self.score_one(x, e) - float(y)
            for i in idx:
                self.w[i] -= p.lr * (g + p.l2 * self.w[i])
            self.updates += 1

    def state_dict(self) -> dict[str, Any]:
        return {"w": list(self.w), "updates": self.updates}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if state:
            self.w, self.updates = list(state["w"]), int(state["updates"])


@REWARDS.register("grounded_answer", paper=None, fidelity="ascent")
def grounded_answer(
    prompts: list[str],
    completions: list[str],
    answer: Optional[list[Any]] = None,
    needle: Optional[list[Any]] = None,
    **_: Any,
) -> list[Optional[float]]:
    """1 if the completion's evidence spans are exactly the row's `needle` and its `<answer>` is the row's `answer`
    (a right answer for the right reason), else 0; None without `answer` or `needle`.

    >>> ys = ["<evidence>f9</evidence><answer>9</answer>", "<evidence>c9</evidence><answer>9</answer>"]
    >>> grounded_answer(["x"] * 2, ys, answer=["9", "9"], needle=["f9", "f9"])
    [1.0, 0.0]
    """
    if answer is None or needle is None:
        return [None] * len(completions)
    out: list[Optional[float]] = []
    for c, a, n in zip(completions, answer, needle):
        got = re.search(r"<answer>(.*?)</answer>", c, flags=re.DOTALL)
        ok = got is not None and got.group(1).strip() == str(a).strip() and evidence_of(c, EVIDENCE) == str(n)
        out.append(float(ok))
    return out
