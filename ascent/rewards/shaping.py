"""Shaped rewards from recent papers (docs/references.md): confidence (ConfClip), Brier (after CalibSFT), CCC,
DARL, correctness-gated diversity (SDRL), FIRM base-and-bonus, a regex format reward and DAPO's soft overlong
penalty.

Every reward has the registry signature `fn(prompts, completions, **fields) -> list[float | None]` and takes its
knobs as keyword arguments, so a config can say `overlong(max_len=64, cache_len=16)`. Rewards that need a
correctness signal take it from another reward named by `matcher` (a registered name or any reward spec;
default `last_number`). docs/algorithms.md has the formulas and when to use each one.

Keywords given in the spec win: the runner does not pass a dataset column that has the same name as a
keyword bound by the spec (e.g. a column called `alpha` when the spec says `base_and_bonus(alpha=0.3)`).
"""

from __future__ import annotations

import math
import re
from typing import Any, Callable, Optional, Sequence, Union

import numpy as np

from ascent import papers
from ascent.rewards.builtin import _NUMBER, _STATED, REWARDS

Values = list[Optional[float]]
Matcher = Union[str, Callable[..., list]]

_NUM = r"(\d+(?:\.\d+)?|\.\d+)"
_CONFIDENCE = re.compile(
    rf"<confidence>\s*{_NUM}\s*(%?)\s*</confidence>|\bconfidence\b(?:\s+(?:level|score))?\s*[:=]\s*{_NUM}\s*(%?)",
    re.IGNORECASE,
)


# ---------------------------------------------------------------------------------------------- helpers


def parse_confidence(text: str) -> Optional[float]:
    """The last verbalised confidence in `text` as a probability, or None.

    Recognised: `confidence: 0.8`, `Confidence = 80%`, `confidence level: 85` and `<confidence>0.8</confidence>`.
    A value with `%`, or one in (1, 100], is a percentage; a value above 100 is ignored (None).

    >>> parse_confidence("42\\nconfidence: 0.8")
    0.8
    >>> parse_confidence("answer 7, Confidence = 90%")
    0.9
    >>> parse_confidence("<confidence>0.25</confidence>")
    0.25
    >>> parse_confidence("no statement") is None
    True
    """
    matches = list(_CONFIDENCE.finditer(text))
    if not matches:
        return None
    m = matches[-1]
    value, pct = (m.group(1), m.group(2)) if m.group(1) is not None else (m.group(3), m.group(4))
    v = float(value)
    if pct or 1.0 < v <= 100.0:
        v /= 100.0
    return v if 0.0 <= v <= 1.0 else None


def strip_confidence(text: str) -> str:
    """`text` without its confidence statements, so that a matcher such as last_number does not read the
    confidence as the answer.

    >>> strip_confidence("the answer is 12. confidence: 0.9").strip()
    'the answer is 12.'
    """
    return _CONFIDENCE.sub("", text)


def confidences(completions: Sequence[str], completion_logprob: Optional[Sequence[Any]], source: str) -> Values:
    """Per-sample confidence in [0, 1] (None: none available).

    source: "verbal" (stated confidence only), "logprob" (exp(completion_logprob): the geometric-mean
    per-token probability of the sampled completion) or "auto" (stated if present, else exp(logprob)).
    """
    if source not in ("auto", "verbal", "logprob"):
        raise ValueError(f"source must be 'auto', 'verbal' or 'logprob', not {source!r}")
    lps = list(completion_logprob) if completion_logprob is not None else [None] * len(completions)
    out: Values = []
    for c, lp in zip(completions, lps):
        conf = parse_confidence(c) if source != "logprob" else None
        if conf is None and source != "verbal" and lp is not None and math.isfinite(float(lp)):
            conf = math.exp(min(float(lp), 0.0))
        out.append(conf)
    return out


def _resolve(spec: Matcher) -> Callable[..., list]:
    if callable(spec):
        return spec
    from ascent.rewards.runner import resolve_reward  # late: the runner imports the registry this module fills

    return resolve_reward(spec)


def call_reward(spec: Matcher, prompts: Sequence[str], completions: Sequence[str], fields: dict[str, Any]) -> Values:
    """Call another reward (a registered name, a spec with keyword arguments, or a callable) on the same
    samples; its values as floats (None kept). A wrong number of values is an error."""
    values = _resolve(spec)(list(prompts), list(completions), **fields)
    if not isinstance(values, (list, tuple)) or len(values) != len(completions):
        raise ValueError(
            f"reward {spec!r} returned "
            f"{len(values) if isinstance(values, (list, tuple)) else type(values).__name__} values "
            f"for {len(completions)} completions"
        )
    return [None if v is None else float(v) for v in values]


def correctness(matcher: Matcher, prompts: Sequence[str], completions: Sequence[str], fields: dict[str, Any]) -> Values:
    """Correctness in [0, 1] from `matcher`, judged on the completions with their confidence statements removed."""
    values = call_reward(matcher, prompts, [strip_confidence(c) for c in completions], fields)
    return [None if v is None or not math.isfinite(v) else min(max(v, 0.0), 1.0) for v in values]


def last_number_value(text: str) -> Optional[float]:
    """The last number in `text` (thousands commas ignored), or None.

    >>> last_number_value("it is 1,234.5 then -7")
    -7.0
    >>> last_number_value("none") is None
    True
    """
    nums = _NUMBER.findall(text.replace(",", ""))
    return float(nums[-1]) if nums else None


def _to_float(x: Any) -> Optional[float]:
    if x is None:
        return None
    try:
        v = float(str(x).replace(",", "").strip())
    except ValueError:
        return None
    return v if math.isfinite(v) else None


def levenshtein(a: Sequence[Any], b: Sequence[Any]) -> int:
    """Edit distance between two sequences (strings or token lists), with Myers' bit-parallel algorithm
    (Hyyrö's formulation) on Python integers: O(len(a) * len(b) / wordsize).

    >>> levenshtein("kitten", "sitting")
    3
    >>> levenshtein("the cat sat".split(), "the dog sat down".split())
    2
    """
    if len(a) < len(b):
        a, b = b, a
    m = len(b)
    if m == 0:
        return len(a)
    peq: dict[Any, int] = {}
    for i, ch in enumerate(b):
        peq[ch] = peq.get(ch, 0) | (1 << i)
    mask, top = (1 << m) - 1, 1 << (m - 1)
    pv, mv, score = mask, 0, m
    for ch in a:
        eq = peq.get(ch, 0)
        xv = eq | mv
        xh = (((eq & pv) + pv) ^ pv) | eq
        ph = mv | ~(xh | pv)
        mh = pv & xh
        if ph & top:
            score += 1
        elif mh & top:
            score -= 1
        ph = (ph << 1) | 1
        mh <<= 1
        pv = (mh | ~(xv | ph)) & mask
        mv = ph & xv & mask
    return score


def _units(text: str, unit: str) -> Sequence[str]:
    if unit == "word":
        return text.split()
    if unit == "char":
        return text
    raise ValueError(f"unit must be 'word' or 'char', not {unit!r}")


def distance(a: str, b: str, unit: str = "word") -> float:
    """Normalised edit distance in [0, 1]: levenshtein / the longer length (0 for two empty texts), over
    whitespace-separated words (unit="word") or characters (unit="char").

    >>> distance("a b c d", "a b x d")
    0.25
    >>> distance("abc", "abd", unit="char")
    0.3333333333333333
    """
    ua, ub = _units(a, unit), _units(b, unit)
    longest = max(len(ua), len(ub))
    return levenshtein(ua, ub) / longest if longest else 0.0


def group_members(group: Optional[Sequence[Any]], n: int) -> list[list[int]]:
    """For each sample, the indices of the OTHER samples of its group (`group` missing: one group)."""
    keys = list(group) if group is not None else [0] * n
    by: dict[Any, list[int]] = {}
    for i, g in enumerate(keys):
        by.setdefault(g, []).append(i)
    return [[j for j in by[keys[i]] if j != i] for i in range(n)]


# ---------------------------------------------------------------------------------------------- rewards


@REWARDS.register(
    "confidence",
    paper=papers.CONFCLIP,
    fidelity="reduced",
    departures=(
        "the linear bonus/penalty r = y + w (2y - 1) c is inferred from the abstract",
        "ConfClip's clipping is not implemented",
    ),
)
def confidence(
    prompts: list[str],
    completions: list[str],
    matcher: Matcher = "last_number",
    weight: float = 0.5,
    source: str = "auto",
    **fields: Any,
) -> Values:
    """Correctness plus a confidence bonus if correct, minus a confidence penalty if wrong (after ConfClip,
    Zhang et al., 2025, arXiv:2509.17730: the linear form is inferred from its abstract and unclipped;
    ConfClip's clipping is not implemented).

    r = y + weight * c if correct (y = 1), r = -weight * c if wrong (y = 0); in general r = y + weight * (2y - 1) * c,
    with y the matcher's correctness in [0, 1] (judged with the confidence statement removed) and c the stated
    confidence (`confidence: 0.x`, see parse_confidence) or exp(completion_logprob) (source="auto"; "verbal"
    or "logprob" restrict it). No confidence available: r = y. No answer to check: None.
    With weight < 1/2 every correct sample outranks every wrong one. Not a proper scoring rule (the
    expected reward is linear in c): use `brier` to train calibrated confidence.
    """
    ys = correctness(matcher, prompts, completions, fields)
    cs = confidences(completions, fields.get("completion_logprob"), source)
    return [None if y is None else (y if c is None else y + weight * (2.0 * y - 1.0) * c) for y, c in zip(ys, cs)]


@REWARDS.register(
    "brier",
    paper=papers.CALIBSFT,
    fidelity="faithful",
    departures=(
        (
            "the Brier RL reward only (the SFT stage is warm-start data `calibsft`); with `source=auto` and no stated "
            "confidence it uses exp(mean token log-prob), `source=verbal` is CalibSFT's setting"
        ),
    ),
)
def brier(
    prompts: list[str],
    completions: list[str],
    matcher: Matcher = "last_number",
    source: str = "auto",
    missing_penalty: float = 1.0,
    **fields: Any,
) -> Values:
    """Correctness minus the Brier score of the stated confidence (confidence-aware RL after CalibSFT; arXiv
    preprint, id not found: docs/references.md).

    r = y - (c - y)^2, y = correctness in [0, 1] from `matcher`, c = confidence as in `confidence`
    (source="auto": stated, else exp(completion_logprob)). A proper scoring rule: for a question answered
    correctly with probability p the expected reward p - p(1-c)^2 - (1-p)c^2 is maximised exactly at c = p.
    No confidence available: r = y - missing_penalty (default 1, the worst Brier score), so stating one never hurts.
    """
    ys = correctness(matcher, prompts, completions, fields)
    cs = confidences(completions, fields.get("completion_logprob"), source)
    return [None if y is None else (y - missing_penalty if c is None else y - (c - y) ** 2) for y, c in zip(ys, cs)]


def concordance(x: Sequence[float], y: Sequence[float]) -> float:
    """Lin's Concordance Correlation Coefficient 2 cov(x, y) / (var x + var y + (mean x - mean y)^2), with
    population (1/n) moments; 1 when x == y exactly (also when the denominator is 0), 0 for empty input.

    >>> concordance([1, 2, 3], [1, 2, 3])
    1.0
    >>> round(concordance([1, 2, 3], [2, 3, 4]), 4)
    0.5714
    """
    if len(x) == 0:
        return 0.0
    xa, ya = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    mx, my = xa.mean(), ya.mean()
    den = ((xa - mx) ** 2).mean() + ((ya - my) ** 2).mean() + (mx - my) ** 2
    if den == 0.0:
        return 1.0
    return float(2.0 * ((xa - mx) * (ya - my)).mean() / den)


@REWARDS.register(
    "ccc",
    paper=papers.CCC_REWARD,
    fidelity="reduced",
    departures=(
        "the per-rollout attribution of the batch CCC is not in the abstract: the default `loo` (and `batch`, "
        "`slot`) are ascent's readings; `anchor` follows a secondary summary, unchecked against the paper's text",
        "the paper's format reward is not part of it (add the `format` reward)",
    ),
)
def ccc(
    prompts: list[str],
    completions: list[str],
    answer: Optional[list[Any]] = None,
    attribution: str = "loo",
    unparsable: Optional[float] = 0.0,
    group: Optional[list[Any]] = None,
    **_: Any,
) -> Values:
    """Batch-level Concordance Correlation Coefficient reward for numeric regression (Du, Song & Li, 2026,
    "Injecting Distributional Awareness into MLLMs via Reinforcement Learning for Deep Imbalanced Regression",
    arXiv:2605.01402).

    The prediction is the last number of each completion, the target the row's numeric `answer`; CCC measures
    agreement in correlation, scale and mean over the batch. How the batch CCC becomes a per-rollout reward
    is not in the abstract; `attribution` picks one:
    "anchor": r_ij = CCC([pred_ij] + [mean_j' pred_kj' for every other prompt k], [t_i] + [t_k]): each
    rollout is scored against the other prompts' mean predictions as fixed anchors (needs `group`); this
    follows a secondary summary of the paper's method, not checked against its text (section 3 was not
    reachable), so it is not the default. Ascent's own readings: "loo" (default): r_i = CCC(batch) -
    CCC(batch without i), positive when the sample improves the batch's agreement; "batch": every sample gets
    CCC(batch); "slot": the j-th samples of all groups form one pseudo-batch (one answer per prompt, needs
    `group`) and each member gets that pseudo-batch's CCC, so samples of one prompt are compared through
    different batches (and share one number). Samples without a number are left out of
    the CCC and get `unparsable` (default 0: no contribution; set -1 to punish them, or None for no opinion);
    samples without a numeric answer get None.
    """
    n = len(completions)
    answers = list(answer) if answer is not None else [None] * n
    targets = [_to_float(a) for a in answers]
    preds = [last_number_value(c) for c in completions]
    out: Values = [None if t is None else (unparsable if p is None else 0.0) for p, t in zip(preds, targets)]
    idx = [i for i in range(n) if preds[i] is not None and targets[i] is not None]
    x = np.array([preds[i] for i in idx], dtype=np.float64)
    y = np.array([targets[i] for i in idx], dtype=np.float64)
    if attribution == "batch":
        whole = concordance(x, y)
        for i in idx:
            out[i] = whole
    elif attribution == "loo":
        whole = concordance(x, y)
        for k, i in enumerate(idx):
            keep = np.arange(len(idx)) != k
            out[i] = whole - concordance(x[keep], y[keep])
    elif attribution == "anchor":
        if group is None:
            raise ValueError("ccc(attribution='anchor') needs the per-sample `group` field")
        members: dict[Any, list[int]] = {}
        for i in idx:
            members.setdefault(group[i], []).append(i)
        anchor = {g: (float(np.mean([preds[i] for i in m])), targets[m[0]]) for g, m in members.items()}
        for i in idx:
            others = [anchor[g] for g in members if g != group[i]]
            out[i] = concordance([preds[i]] + [a for a, _ in others], [targets[i]] + [t for _, t in others])
    elif attribution == "slot":
        if group is None:
            raise ValueError("ccc(attribution='slot') needs the per-sample `group` field")
        seen: dict[Any, int] = {}
        slot = []
        for g in group:
            slot.append(seen.get(g, 0))
            seen[g] = slot[-1] + 1
        for s in set(slot[i] for i in idx):
            members = [i for i in idx if slot[i] == s]
            value = concordance([preds[i] for i in members], [targets[i] for i in members])
            for i in members:
                out[i] = value
    else:
        raise ValueError(f"attribution must be 'anchor', 'loo', 'batch' or 'slot', not {attribution!r}")
    return out


@REWARDS.register(
    "darl",
    paper=papers.DARL,
    fidelity="reduced",
    departures=(
        (
            "the base reward is 1 - normalised word edit distance to the reference, a text-level stand-in for RLPR's "
            "probability of the reference answer"
        ),
        (
            "the deviation is an edit distance (to the group's other samples by default), not the paper's probability "
            "gap to the reference"
        ),
    ),
)
def darl(
    prompts: list[str],
    completions: list[str],
    answer: Optional[list[Any]] = None,
    group: Optional[list[Any]] = None,
    base: Matcher = "similarity",
    lo: float = 0.2,
    hi: float = 0.6,
    bonus: float = 0.2,
    against: str = "group",
    unit: str = "word",
    min_base: float = 0.0,
    **fields: Any,
) -> Values:
    """Reference-alignment score plus a bonus for deviating within a band [lo, hi] (DARL, Huang et al., 2026,
    arXiv:2601.14700).

    Diversity-aware reward for verifier-free RL.

    r = s + bonus * [lo <= d <= hi and s >= min_base]. s (`base`): "similarity" (default) = 1 - distance(completion,
    answer), a text-level stand-in for RLPR's reference probability (which needs the policy's probability of the
    reference, not available to a reward function); or any reward spec (e.g. "last_number"). d (`against`):
    "group" (default) = mean normalised edit distance (see `distance`, `unit` word/char) to the other samples of
    the same prompt (`group`; a prompt sampled once gets no bonus), i.e. diversity among the group's answers;
    "reference" = distance to the row's `answer`, the abstract's "deviation range from the reference".
    Too close (d < lo: a copy) or too far (d > hi: off-topic) earns no bonus.
    """
    n = len(completions)
    answers = list(answer) if answer is not None else [None] * n
    if base == "similarity":
        scores: Values = [None if a is None else 1.0 - distance(c, str(a), unit) for c, a in zip(completions, answers)]
    else:
        scores = call_reward(base, prompts, completions, {"answer": answer, "group": group, **fields})
    if against == "group":
        others = group_members(group, n)
        devs: Values = [
            sum(distance(completions[i], completions[j], unit) for j in others[i]) / len(others[i])
            if others[i]
            else None
            for i in range(n)
        ]
    elif against == "reference":
        devs = [None if a is None else distance(c, str(a), unit) for c, a in zip(completions, answers)]
    else:
        raise ValueError(f"against must be 'group' or 'reference', not {against!r}")
    return [
        None if s is None else s + (bonus if d is not None and lo <= d <= hi and s >= min_base else 0.0)
        for s, d in zip(scores, devs)
    ]


@REWARDS.register(
    "gated_diversity",
    paper=papers.SDRL,
    fidelity="reduced",
    departures=(
        (
            "the cross- and within-strategy terms and the self-declared `strategy:` label are ascent's reading of the "
            "abstract"
        ),
    ),
)
def gated_diversity(
    prompts: list[str],
    completions: list[str],
    group: Optional[list[Any]] = None,
    matcher: Matcher = "last_number",
    bonus: float = 0.5,
    across_weight: float = 0.5,
    strategy_pattern: str = r"\bstrategy\s*[:=]\s*([\w-]+)",
    unit: str = "word",
    **fields: Any,
) -> Values:
    """Correctness-gated diversity: correct samples earn a bonus for differing from the group's other correct
    ones (SDRL, Strategy-Diverse Reinforcement Learning; arXiv preprint, id not found: docs/references.md).

    Wrong (matcher < 0.5): r = 0. Correct: r = 1 + bonus * (w * A + (1 - w) * W), w = across_weight, where, among
    the other correct samples of the group: A = share using a different strategy (across strategies) and
    W = mean normalised edit distance to those using the same strategy (within a strategy; 1 when none does).
    A lone correct sample gets A = W = 1. The strategy is the first capture of `strategy_pattern`
    (case-insensitive, e.g. `strategy: heuristic`; no match: one shared "unlabelled" strategy).
    No answer to check: None.
    """
    n = len(completions)
    ys = correctness(matcher, prompts, completions, {"group": group, **fields})
    pat = re.compile(strategy_pattern, re.IGNORECASE)
    strategies = [(m.group(1).lower() if (m := pat.search(c)) else None) for c in completions]
    others = group_members(group, n)
    out: Values = []
    for i in range(n):
        if ys[i] is None:
            out.append(None)
            continue
        if ys[i] < 0.5:
            out.append(0.0)
            continue
        peers = [j for j in others[i] if ys[j] is not None and ys[j] >= 0.5]
        if not peers:
            across = within = 1.0
        else:
            same = [j for j in peers if strategies[j] == strategies[i]]
            across = 1.0 - len(same) / len(peers)
            within = sum(distance(completions[i], completions[j], unit) for j in same) / len(same) if same else 1.0
        out.append(1.0 + bonus * (across_weight * across + (1.0 - across_weight) * within))
    return out


@REWARDS.register(
    "base_and_bonus",
    paper=papers.FIRM,
    fidelity="faithful",
    departures=(
        "base and bonus are any two rewards; FIRM's critics exist only at toy scale (reward:edit_critic for CME, "
        "reward:plan_critic and reward:quality_critic for QMA; word-level text edits); no image task",
    ),
)
def base_and_bonus(
    prompts: list[str],
    completions: list[str],
    base: Matcher = "last_number",
    bonus: Matcher = "format",
    alpha: float = 0.5,
    **fields: Any,
) -> Values:
    """FIRM's "Base-and-Bonus" combination (Zhao et al., 2026, arXiv:2603.12247): a base reward modulated by
    a bonus signal.

    r = base * (alpha + (1 - alpha) * clip(bonus, 0, 1)); `base` and `bonus` name other rewards (registered
    names or specs, e.g. base="last_number", bonus="format(pattern='\\\\d+')"), called on the same samples. A zero
    base gives zero whatever the bonus (the bonus cannot buy reward for a failed task, FIRM's point);
    alpha is the share of the base kept without any bonus. Base None -> None; bonus None counts as 0.
    """
    if not 0.0 <= alpha <= 1.0:
        raise ValueError(f"alpha must lie in [0, 1], got {alpha}")
    bs = call_reward(base, prompts, completions, fields)
    qs = call_reward(bonus, prompts, completions, fields)
    return [
        None if b is None else b * (alpha + (1.0 - alpha) * (0.0 if q is None else min(max(q, 0.0), 1.0)))
        for b, q in zip(bs, qs)
    ]


DEFAULT_FORMAT = r"\s*-?\d+(?:\.\d+)?\s*"


@REWARDS.register("format", paper=None, fidelity="ascent")
def format_reward(prompts: list[str], completions: list[str], pattern: str = DEFAULT_FORMAT, **_: Any) -> Values:
    """1 if the whole completion matches the regex `pattern` (re.fullmatch, DOTALL), else 0.

    The default accepts a bare number with optional surrounding whitespace (the answer format of the
    built-in addition and word-problem tasks).

    >>> format_reward([], ["42", " -3.5\\n", "x = 4"])
    [1.0, 1.0, 0.0]
    """
    rx = re.compile(pattern, re.DOTALL)
    return [1.0 if rx.fullmatch(c) else 0.0 for c in completions]


@REWARDS.register("overlong", paper=papers.DAPO, fidelity="faithful")
def overlong(
    prompts: list[str],
    completions: list[str],
    completion_tokens: Optional[list[Any]] = None,
    max_len: int = 64,
    cache_len: int = 16,
    **_: Any,
) -> Values:
    """DAPO's soft overlong punishment: 0, then a linear ramp to -1 over the last cache_len tokens, -1 beyond max_len.

    On `completion_tokens` (L):

    0 if L <= max_len - cache_len; (max_len - cache_len - L) / cache_len if max_len - cache_len < L <= max_len
    (a linear ramp from 0 to -1); -1 beyond max_len. Continuous at both boundaries. Set max_len to
    rollout.max_new_tokens; add it to a correctness reward with weight 1. No length: None.

    >>> overlong([], ["", "", "", ""], completion_tokens=[6, 8, 10, 11], max_len=10, cache_len=4)
    [0.0, -0.5, -1.0, -1.0]
    """
    if cache_len <= 0 or cache_len > max_len:
        raise ValueError(f"overlong needs 0 < cache_len <= max_len, got max_len={max_len}, cache_len={cache_len}")
    lengths = list(completion_tokens) if completion_tokens is not None else [None] * len(completions)
    free = max_len - cache_len
    out: Values = []
    for n in lengths:
        if n is None:
            out.append(None)
        elif n <= free:
            out.append(0.0)
        elif n <= max_len:
            out.append((free - n) / cache_len)
        else:
            out.append(-1.0)
    return out


@REWARDS.register(
    "answer_once",
    paper=None,
    fidelity="ascent",
    departures=(
        "ascent's own: smollm2-arith's GRPO seed 0 learned to repeat 'The answer is N.' until the length cap "
        "(docs/results.md); DAPO's overlong penalty (Yu et al. 2025, arXiv:2503.14476) charges the length, "
        "this charges the repetition itself, wherever the completion ends",
    ),
)
def answer_once(prompts: list[str], completions: list[str], penalty: float = 1.0, **_: Any) -> Values:
    """A penalty on a final answer stated more than once: 0 when the completion states "The answer is N" (the
    sentence `answer_is` grades) at most once, -penalty when it states it twice or more (whatever the numbers).

    With `answer_is` (weight 1) and penalty 1, a correct answer repeated scores 0, no better than a wrong one,
    and a wrong answer repeated -1; it does not depend on the completion's length, so it also charges a
    repetition that ends before the cap (`overlong` charges the length).

    >>> answer_once([], ["5 + 3 = 8. The answer is 8.", "The answer is 8. The answer is 8.", "It is 8.", ""])
    [0.0, -1.0, 0.0, 0.0]
    >>> answer_once([], ["The answer is 8. the final answer is 9."], penalty=0.5)
    [-0.5]
    """
    if penalty < 0:
        raise ValueError(f"answer_once needs penalty >= 0, got {penalty}")
    return [-float(penalty) if len(_STATED.findall(c)) > 1 else 0.0 for c in completions]
