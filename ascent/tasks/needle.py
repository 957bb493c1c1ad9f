"""The `needle` task: find a key's value in a haystack of key-value pairs, quoting the evidence before answering.

    data.task=needle(pairs=8, quote_right=0.5)      # YAML: task: {needle: {pairs: 8}}

A query lists `pairs` distinct keys (letters a-p) with one-digit values and asks for one of them:
`c4 k7 a1 f9 ... ?f` -> `<evidence>f9</evidence><answer>9</answer>`. It is the single-turn stand-in for the
long-context setting of EAPO (Guan et al. 2026, arXiv:2601.10306): the answer is right for the wrong reason when the
quoted evidence is not the needle (a lucky guess), which an outcome reward cannot tell from a grounded answer.
The warm-start teacher quotes the needle with probability `quote_right` and answers its value; otherwise it quotes
another pair of the haystack and answers a random digit (right one time in ten: a lucky guess). Rows: `{"prompt",
"answer", "needle"}` (`needle`: the gold evidence text, `f9`, for a verifier of evidence such as
`source_similarity(source_field=needle)`). Reward default: `answer_em` on the `<answer>` span.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from ascent.config.schema import DataConfig
from ascent.policy.tokenizer import char_tokenizer
from ascent.tasks.base import TASKS, DataError, Row, TaskData, Teacher, split_rows

KEYS = "abcdefghijklmnop"
PIECES = ["<evidence>", "</evidence>", "<answer>", "</answer>"]


@dataclass(frozen=True)
class NeedleParams:
    """The needle task."""

    pairs: int = 8
    """Key-value pairs per haystack, in 2..16."""
    quote_right: float = 0.5
    """The teacher's chance of quoting the needle (else another pair, then a random digit as its answer), in [0, 1]."""
    num_rows: int = 20000
    """Queries generated (held-out ones first), > data.num_eval."""

    def __post_init__(self) -> None:
        if not 2 <= self.pairs <= len(KEYS):
            raise ValueError(f"pairs must be in 2..{len(KEYS)}, got {self.pairs}")
        if not 0.0 <= self.quote_right <= 1.0:
            raise ValueError(f"quote_right must be in [0, 1], got {self.quote_right}")


def completion(evidence: str, answer: str) -> str:
    """The completion format: `<evidence>f9</evidence><answer>9</answer>`."""
    return f"<evidence>{evidence}</evidence><answer>{answer}</answer>"


def needle_teacher(quote_right: float) -> Teacher:
    """Quotes the needle w.p. `quote_right` and answers its value; else quotes another pair and guesses a digit."""

    def teach(row: Row, rng: random.Random) -> str:
        if rng.random() < quote_right:
            return completion(row["needle"], row["answer"])
        others = [p for p in row["prompt"].split(" ")[:-1] if p != row["needle"]]
        return completion(rng.choice(others), str(rng.randrange(10)))

    return teach


@TASKS.register("needle", params=NeedleParams, paper=None, fidelity="ascent")
def needle(cfg: DataConfig, seed: int, params: NeedleParams = NeedleParams()) -> TaskData:
    """Key-value haystacks: quote the asked pair as evidence, then answer its value (reward `answer_em`)."""
    if cfg.num_eval >= params.num_rows:
        raise DataError(f"data.num_eval={cfg.num_eval} leaves no training queries (needle.num_rows={params.num_rows})")
    rng = random.Random(seed)
    rows = []
    for _ in range(params.num_rows):
        keys = rng.sample(KEYS, params.pairs)
        values = [str(rng.randrange(10)) for _ in keys]
        k = rng.randrange(params.pairs)
        haystack = " ".join(f"{key}{v}" for key, v in zip(keys, values))
        rows.append({"prompt": f"{haystack} ?{keys[k]}", "answer": values[k], "needle": f"{keys[k]}{values[k]}"})
    train, held = split_rows(rows, cfg)
    if cfg.num_train:
        train = train[: cfg.num_train]
    tokenizer = char_tokenizer(KEYS + "0123456789 ?", pieces=PIECES)
    return TaskData(
        train=train, eval=held, reward="answer_em", teacher=needle_teacher(params.quote_right), tokenizer=tokenizer
    )
