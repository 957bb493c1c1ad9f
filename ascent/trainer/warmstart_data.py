"""What the warm start imitates (`warmstart.data`), a registry of warm-start data builders: `teacher` (the task's
own demonstrations, the default) and `calibsft` (CalibSFT's calibrated-confidence data).

ONE signature: `WARMSTART_DATA[name](ctx: WarmStartDataContext[, params]) -> (items, demos)`: the rows the SFT
sampler draws from and the `Demonstrations` that turn drawn rows into a batch (its completion_mask marks the
imitated tokens).
"""

from __future__ import annotations

import logging
import random
from dataclasses import dataclass
from typing import Any, Callable, Literal, Optional

import torch

from ascent import papers
from ascent.registry import Registry
from ascent.rewards.builtin import REWARDS
from ascent.rollout.types import RolloutBatch
from ascent.trainer.sft import Demonstrations, forced_batch, single_turn_demonstrations

WARMSTART_DATA: Registry = Registry("warm-start data")
log = logging.getLogger(__name__)


@dataclass
class WarmStartDataContext:
    """What a warm-start data builder is made from."""

    rows: list[dict[str, Any]]
    """The training rows (a `prompt` field each)."""
    teacher: Optional[Callable[[dict[str, Any], random.Random], str]]
    """The task's teacher: (row, rng) -> a completion text (None: the task has none)."""
    encoder: Any
    """Prompt text -> token ids (`ascent.data.prompts.PromptEncoder`), `.completion(text)` -> ids + EOS."""
    tokenizer: Any
    """The policy's tokenizer."""
    seed: int
    """The run seed."""


@WARMSTART_DATA.register("teacher", paper=None, fidelity="ascent")
def teacher_data(ctx: WarmStartDataContext) -> tuple[list[dict[str, Any]], Demonstrations]:
    """The task's teacher's completion of each drawn row (the default warm start)."""
    if ctx.teacher is None:
        raise ValueError("the task has no teacher to imitate; set warmstart.steps=0")
    return ctx.rows, single_turn_demonstrations(ctx.teacher, ctx.encoder, ctx.tokenizer)


@dataclass(frozen=True)
class CalibSFTParams:
    """CalibSFT: confidence targets from success rate and correctness, balanced over confidence bins."""

    samples: int = 8
    """Responses drawn from the teacher per question (the success rate's sample); >= 2."""
    questions: int = 0
    """Questions used (a seeded random subset of the training rows; 0: all)."""
    alpha: float = 0.5
    """Target t = alpha * correct + (1 - alpha) * success rate; in [0, 1] (1: correctness only, 0: rate only)."""
    bins: int = 5
    """Equal-width confidence bins over [0, 1] that the data is balanced across; >= 1."""
    per_bin: int = 0
    """Responses kept per non-empty bin (0: as many as the smallest non-empty bin holds)."""
    levels: int = 10
    """The verbalised confidence is an integer in 0..levels-1 (round(t * (levels - 1))); in [2, 101]."""
    separator: str = " "
    """Between the response and its confidence (e.g. "\\nconfidence: " for the `brier` reward's parser)."""
    style: Literal["level", "decimal"] = "level"
    """How the confidence is written: level, the integer round(t (levels - 1)) (fits a digits-only vocabulary);
    decimal, that level over levels - 1 with two decimals ("0.75"), as `brier` and `confidence` read it."""
    verifier: str = "exact_answer"
    """A registered reward that decides correctness (>= 1 is correct) from the rows' fields."""

    def __post_init__(self) -> None:
        if self.samples < 2:
            raise ValueError(f"samples must be >= 2 (a success rate needs several responses), got {self.samples}")
        if not 0.0 <= self.alpha <= 1.0:
            raise ValueError(f"alpha must be in [0, 1], got {self.alpha}")
        if self.bins < 1 or self.questions < 0 or self.per_bin < 0:
            raise ValueError(
                f"need bins >= 1, questions >= 0, per_bin >= 0; got {self.bins}, {self.questions}, {self.per_bin}"
            )
        if self.style not in ("level", "decimal"):
            raise ValueError(f"style must be 'level' or 'decimal', got {self.style!r}")
        if not 2 <= self.levels <= 101:
            raise ValueError(f"levels must be in [2, 101], got {self.levels}")


def confidence_targets(correct: torch.Tensor, alpha: float) -> torch.Tensor:
    """(Q, k) targets t_qj = alpha c_qj + (1 - alpha) p_q, p_q = mean_j c_qj, from correctness c (Q, k) in {0, 1}.

    E_j[t_qj] = p_q: the expected target of a question is its success rate, so a confidence fitted by squared
    error (Brier) to the targets is still the success rate (proper-scoring optimality preserved).

    >>> confidence_targets(torch.tensor([[1.0, 0.0, 0.0, 1.0]]), 0.5).tolist()
    [[0.75, 0.25, 0.25, 0.75]]
    """
    return alpha * correct + (1.0 - alpha) * correct.mean(-1, keepdim=True)


def confidence_bin(t: torch.Tensor, bins: int) -> torch.Tensor:
    """Bin of each target in `bins` equal-width bins over [0, 1] (1.0 falls in the last).

    >>> confidence_bin(torch.tensor([0.0, 0.19, 0.2, 0.99, 1.0]), 5).tolist()
    [0, 0, 1, 4, 4]
    """
    return (t * bins).floor().long().clamp(0, bins - 1)


def balance_bins(bin_of: list[int], per_bin: int, rng: random.Random) -> list[int]:
    """Indices keeping `per_bin` items of every non-empty bin (0: the smallest non-empty bin's size), a seeded
    random choice within each bin; a bin smaller than `per_bin` keeps all it has. Sorted.

    >>> balance_bins([0, 0, 0, 1, 2, 2], 0, random.Random(0))
    [1, 3, 4]
    """
    members: dict[int, list[int]] = {}
    for i, b in enumerate(bin_of):
        members.setdefault(b, []).append(i)
    take = per_bin or min(len(m) for m in members.values())
    keep = []
    for b in sorted(members):
        m = members[b]
        keep += rng.sample(m, min(take, len(m)))
    return sorted(keep)


def verbalise(t: float, levels: int, style: str = "level") -> str:
    """The confidence text of target t: the level round(t * (levels - 1)), or it over levels - 1 ("decimal").

    >>> verbalise(0.75, 10), verbalise(1.0, 10), verbalise(0.04, 101), verbalise(0.75, 5, "decimal")
    ('7', '9', '4', '0.75')
    """
    level = int(round(t * (levels - 1)))
    return str(level) if style == "level" else f"{level / (levels - 1):.2f}"


def calibsft_items(ctx: WarmStartDataContext, params: CalibSFTParams) -> tuple[list[dict[str, Any]], dict[str, float]]:
    """The balanced pool: for each question, `samples` teacher responses, each with its correctness and target;
    then `balance_bins`. Items: prompt, response, confidence (text), target, correct. Also its statistics."""
    if ctx.teacher is None:
        raise ValueError("warmstart.data=calibsft samples the task's teacher, and this task has none")
    rng, p = random.Random(f"calibsft:{ctx.seed}"), params
    rows = ctx.rows if not p.questions else rng.sample(ctx.rows, min(p.questions, len(ctx.rows)))
    responses = [[ctx.teacher(r, rng) for _ in range(p.samples)] for r in rows]
    verifier = REWARDS.get(p.verifier)
    flat_rows = [r for r in rows for _ in range(p.samples)]
    columns = {k: [r.get(k) for r in flat_rows] for k in {k for r in rows for k in r if k != "prompt"}}
    scores = verifier([r["prompt"] for r in flat_rows], [c for cs in responses for c in cs], **columns)
    correct = torch.tensor([float(s is not None and s >= 1.0) for s in scores]).reshape(len(rows), p.samples)
    targets = confidence_targets(correct, p.alpha)  # (Q, k)
    keep = balance_bins(confidence_bin(targets.flatten(), p.bins).tolist(), p.per_bin, rng)
    items = []
    for i in keep:
        q, j = divmod(i, p.samples)
        t = float(targets[q, j])
        items.append(
            {
                "prompt": rows[q]["prompt"],
                "response": responses[q][j],
                "confidence": verbalise(t, p.levels, p.style),
                "target": t,
                "correct": bool(correct[q, j]),
            }
        )
    stats = {
        "calibsft/questions": float(len(rows)),
        "calibsft/kept": float(len(items)),
        "calibsft/correct_frac": sum(it["correct"] for it in items) / max(len(items), 1),
        "calibsft/target_mean": sum(it["target"] for it in items) / max(len(items), 1),
    }
    return items, stats


def calibsft_batch(items: list[dict[str, Any]], encoder: Any, tokenizer: Any, separator: str) -> RolloutBatch:
    """Prompt + response + separator + confidence + EOS per item. Correctness-conditional supervision: the
    confidence tokens (with separator and EOS) are always imitated; the response's tokens only when it is
    correct (an incorrect response stays in the context, out of the loss)."""
    prompt_ids = [encoder(it["prompt"]) for it in items]
    response = [list(tokenizer(it["response"], add_special_tokens=False)["input_ids"]) for it in items]
    tail = [encoder.completion(separator + it["confidence"]) for it in items]
    completions = [r + t for r, t in zip(response, tail)]
    batch = forced_batch([it["prompt"] for it in items], prompt_ids, completions, tokenizer)
    for i, it in enumerate(items):
        if not it["correct"]:
            start = len(prompt_ids[i])
            batch.completion_mask[i, start : start + len(response[i])] = 0.0
    return batch


@WARMSTART_DATA.register(
    "calibsft",
    params=CalibSFTParams,
    paper=papers.CALIBSFT,
    fidelity="reduced",
    departures=(
        "responses come from the task's teacher, not the model's own samples (there is no model before the warm start)",
    ),
)
def calibsft(
    ctx: WarmStartDataContext, params: CalibSFTParams = CalibSFTParams()
) -> tuple[list[dict[str, Any]], Demonstrations]:
    """CalibSFT: confidence targets from success rate and correctness, balanced over bins (pre-RL SFT data).

    CalibSFT (arXiv preprint, id not found: docs/references.md; code github.com/ml-stat-Sustech/
    verbalized-confidence-training): a pre-RL SFT stage that teaches a verbalised confidence with broad support.

    For each question q, k responses y_qj from the teacher with correctness c_qj (the `verifier`); the success
    rate p_q = mean_j c_qj; the confidence target t_qj = alpha c_qj + (1 - alpha) p_q (E_j t_qj = p_q, so the
    Brier-optimal confidence is unchanged). Responses are balanced across `bins` equal-width bins of t (each
    non-empty bin keeps the same number, seeded), so confidence values the teacher rarely earns are as common
    as the rest. The completion imitated is "response<separator>round(t (levels - 1))<EOS>", with
    correctness-conditional supervision: the confidence is supervised on every response, the response's own
    tokens only where it is correct. Reading: the paper samples the model itself; before the warm start there
    is no model, so the task's (stochastic, imperfect) teacher is the response source. Pair with a reward that
    reads the confidence (`brier_confidence`) for confidence-aware RL.
    """
    items, stats = calibsft_items(ctx, params)
    log.info("calibsft: %s", ", ".join(f"{k.split('/')[1]} {v:.3g}" for k, v in stats.items()))
    if not items:
        raise ValueError("calibsft kept no response: the task has no training rows")
    return items, lambda drawn, rng: calibsft_batch(drawn, ctx.encoder, ctx.tokenizer, params.separator)
