"""Event-conditioned temporal IoU reward for time-aware captions: `reward=temporal_iou` with a row field `events`.

AudioMap (2026, "AudioMap: Cloze-and-Choice Reinforcement Learning for Time-Aware Dense Audio Captioning",
github.com/ryysayhi/AudioMap) binds timestamps to event semantics with its Event-Conditioned Temporal Reward
(ECTR): events of the caption are first matched to the reference events, then the timestamps of matched events are
scored by temporal IoU. The reward here, as ascent reads it (the abstract gives the two stages; the matching rule
and normalisation are ascent's):

1. Parse the caption into segments: every time span `a-b`, `a–b`, `a to b` (seconds, optional `s`, optional
   brackets) with the text of its clause (clauses end at a newline, `;` or a sentence full stop) as its event.
2. A segment may match a reference event only if their texts agree: token F1(event label, segment text) >=
   `match_f1` (the event condition — a right span with the wrong sound earns nothing).
3. Among the allowed pairs, a one-to-one assignment maximising the summed IoU (Hungarian, scipy), with
       tIoU([s1, e1], [s2, e2]) = max(0, min(e1, e2) − max(s1, s2)) / ((e1 − s1) + (e2 − s2) − inter)
4. r = Σ_matched tIoU / max(#reference events, #predicted segments)  ∈ [0, 1]   (missing events and invented
   ones both cost; `normalize=reference` divides by the reference count only).

The row's `events` is a list (or a JSON string of a list) of {"label": str, "start": float, "end": float}; a row
without it gets no opinion (None); a malformed one is a one-line ValueError (the runner records the sample as
failed). A caption without any time span, or with only inverted spans (a > b), scores 0 and the reason is counted
in the `temporal_iou/` metrics.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass
from typing import Any, Optional

import numpy as np

from ascent import papers
from ascent.rewards.agentic import token_f1
from ascent.rewards.builtin import REWARDS
from ascent.typed import build

_NUM = r"(\d+(?:\.\d+)?)"
_SPAN = re.compile(rf"\[?\s*{_NUM}\s*s?\s*(?:-|–|to)\s*{_NUM}\s*s?\s*\]?")
_CLAUSE = re.compile(r"[\n;]|(?<!\d)\.(?!\d)")
NORMALIZE = ("max", "reference")


@dataclass(frozen=True)
class TemporalIoUParams:
    """The `temporal_iou` reward's knobs."""

    match_f1: float = 0.5
    """A segment matches an event only if token F1(event label, segment text) is at least this (0: any text)."""
    normalize: str = "max"
    """`max`: divide by max(#events, #segments) (invented segments cost); `reference`: by #events only."""

    def __post_init__(self) -> None:
        if not 0 <= self.match_f1 <= 1:
            raise ValueError(f"match_f1 must be in [0, 1], got {self.match_f1}")
        if self.normalize not in NORMALIZE:
            raise ValueError(f"normalize must be one of {', '.join(NORMALIZE)}, got {self.normalize!r}")


def tiou(a: tuple[float, float], b: tuple[float, float]) -> float:
    """Temporal IoU of two spans (1 for two equal points, 0 for disjoint spans).

    >>> tiou((0, 4), (2, 6)), tiou((0, 1), (2, 3)), tiou((1, 1), (1, 1))
    (0.3333333333333333, 0.0, 1.0)
    """
    inter = max(0.0, min(a[1], b[1]) - max(a[0], b[0]))
    union = (a[1] - a[0]) + (b[1] - b[0]) - inter
    if union <= 0:
        return float(a == b)
    return inter / union


def segments(caption: str) -> tuple[list[tuple[str, float, float]], int]:
    """((event text, start, end) for every time span of the caption, number of inverted spans dropped).

    >>> segments("[0.5-2] a dog barks; a car passes 3 to 4.5s. Rain 9-8")
    ([('a dog barks', 0.5, 2.0), ('a car passes', 3.0, 4.5)], 1)
    """
    out, inverted = [], 0
    for clause in _CLAUSE.split(caption):
        spans = list(_SPAN.finditer(clause))
        text = " ".join(_SPAN.sub(" ", clause).split())
        for m in spans:
            start, end = float(m.group(1)), float(m.group(2))
            if start > end:
                inverted += 1
                continue
            out.append((text, start, end))
    return out, inverted


def reference_events(raw: Any) -> list[tuple[str, float, float]]:
    """(label, start, end) of a row's `events`; ValueError saying what is wrong."""
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except json.JSONDecodeError as err:
            raise ValueError(f"temporal_iou: the row's events are not valid JSON ({err.msg})") from None
    if not isinstance(raw, list):
        raise ValueError(f"temporal_iou: events must be a list of {{label, start, end}}, got {type(raw).__name__}")
    out = []
    for k, e in enumerate(raw):
        ok = isinstance(e, dict) and isinstance(e.get("label"), str)
        ok = ok and all(
            isinstance(e.get(key), (int, float)) and not isinstance(e.get(key), bool) for key in ("start", "end")
        )
        if not ok or e["start"] > e["end"]:
            raise ValueError(f"temporal_iou: event {k} needs a string label and numbers start <= end, got {e!r}")
        out.append((e["label"], float(e["start"]), float(e["end"])))
    return out


def event_conditioned_iou(
    events: list[tuple[str, float, float]], segs: list[tuple[str, float, float]], match_f1: float, normalize: str
) -> float:
    """Σ tIoU over the best one-to-one matching of label-compatible (event, segment) pairs, normalised."""
    from scipy.optimize import linear_sum_assignment

    if not events or not segs:
        return float(not events and not segs)
    iou = np.zeros((len(events), len(segs)))  # (E, S)
    for i, (label, s, e) in enumerate(events):
        for j, (text, ps, pe) in enumerate(segs):
            if match_f1 == 0 or token_f1(text, label) >= match_f1:
                iou[i, j] = tiou((s, e), (ps, pe))
    rows, cols = linear_sum_assignment(-iou)
    denom = len(events) if normalize == "reference" else max(len(events), len(segs))
    return float(iou[rows, cols].sum() / denom)


@REWARDS.register(
    "temporal_iou",
    params=TemporalIoUParams,
    paper=papers.AUDIOMAP,
    fidelity="ascent",
    departures=(
        "ECTR only: the Evidence Sufficiency Reward (cloze-and-choice questions answered by a judge model) and the "
        "dual curriculum are not built",
        "the event match is token F1 of label and clause text (the paper binds events by its cloze-and-choice "
        "paradigm); the matching (Hungarian on tIoU) and max(#events, #segments) normalisation are ascent's",
        "captions are text with explicit `a-b` second spans; no audio model anywhere",
    ),
)
class TemporalIoU:
    """AudioMap's event-conditioned temporal IoU (ECTR, as ascent reads it) of a caption's timed events.

    Segments of the caption whose text
    matches a reference event's label (token F1 >= match_f1) are paired one-to-one with the events to maximise the
    summed tIoU; r = Σ tIoU / max(#events, #segments)."""

    def __init__(self, **params: Any) -> None:
        self.params = build(TemporalIoUParams, params, "temporal_iou")
        self.reasons: Counter = Counter()
        self.calls = 0
        self.__name__ = "temporal_iou"

    def metrics(self) -> dict[str, float]:
        n = max(self.calls, 1)
        return {f"temporal_iou/{reason}_frac": count / n for reason, count in sorted(self.reasons.items())}

    def __call__(
        self, prompts: list[str], completions: list[str], events: Optional[list[Any]] = None, **_: Any
    ) -> list[Optional[float]]:
        p, n = self.params, len(completions)
        self.reasons, self.calls = Counter(), n
        out: list[Optional[float]] = []
        for completion, raw in zip(completions, events if events is not None else [None] * n):
            if raw is None:
                self.reasons["no_events"] += 1
                out.append(None)
                continue
            ref = reference_events(raw)
            segs, inverted = segments(completion)
            if inverted:
                self.reasons["inverted_span"] += 1
            if not segs and ref:
                self.reasons["no_timestamps"] += 1
                out.append(0.0)
                continue
            out.append(event_conditioned_iou(ref, segs, p.match_f1, p.normalize))
        return out
