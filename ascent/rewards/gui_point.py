"""Dense click-point rewards for GUI grounding: `reward=gui_point` (SE-GUI) or `gui_point(method=gaussian)` (GUI-G²).

The completion names a screen point, `(x, y)` or `[x, y]` in pixels (the last one inside <answer>...</answer> when
there is one, else the last one of the completion); the row carries the target element's box `bbox` = [x1, y1, x2,
y2] and the screenshot's `width` and `height`.

- `se_gui` — the dense point reward of SE-GUI (Yuan et al. 2025, "Enhancing Visual Grounding for GUI Agents via
  Self-Evolutionary Reinforcement Learning", arXiv:2505.12370), written from the paper's description and its
  authors' released reward (read, not copied): with coordinates normalised by the image size, c the box centre,
  d = ‖p − c‖ and d_max the distance from c to the farthest image corner,
      r = 1[p ∈ box] + max(0, 1 − (d / d_max)²)   if d <= 1, else 1[p ∈ box]        ∈ [0, 2]
  a hit earns 1 plus a bonus that decays quadratically with the distance from the centre, a miss still earns the
  decay term, so near misses beat far ones (the binary hit reward gives both 0).
- `gaussian` — the Gaussian point reward of GUI-G² (Tang et al. 2025, "GUI-G²: Gaussian Reward Modeling for GUI
  Grounding", arXiv:2507.15846) with its adaptive variance (σ scales with the element's size):
      r = exp(−½ ((x − c_x)² / σ_x² + (y − c_y)² / σ_y²)),   σ_x = α · (x2 − x1),  σ_y = α · (y2 − y1)   ∈ (0, 1]
- `binary` — the sparse baseline both papers start from: r = 1[p ∈ box].

A completion without a point scores 0 and the reason is counted (`gui_point/no_point_frac`); a row without a box gets
no opinion (None); a malformed box or image size is a one-line ValueError (the runner records the sample as failed).
"""

from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import dataclass
from typing import Any, Optional, Sequence

from ascent import papers
from ascent.rewards.builtin import REWARDS
from ascent.typed import build

METHODS = ("se_gui", "gaussian", "binary")
_POINT = re.compile(r"[\(\[]\s*(-?\d+(?:\.\d+)?)\s*,\s*(-?\d+(?:\.\d+)?)\s*[\)\]]")


@dataclass(frozen=True)
class GuiPointParams:
    """The `gui_point` reward's knobs."""

    method: str = "se_gui"
    """`se_gui` (hit + quadratic distance decay), `gaussian` (GUI-G² point reward) or `binary` (hit or miss)."""
    alpha: float = 0.5
    """`gaussian` only: σ = alpha · the element's width / height (GUI-G²'s adaptive variance)."""

    def __post_init__(self) -> None:
        if self.method not in METHODS:
            raise ValueError(f"method must be one of {', '.join(METHODS)}, got {self.method!r}")
        if not self.alpha > 0:
            raise ValueError(f"alpha must be > 0, got {self.alpha}")


def click_point(completion: str) -> Optional[tuple[float, float]]:
    """The last `(x, y)` / `[x, y]` of the completion's <answer> span (or of the whole completion), or None.

    >>> click_point("<think>(1, 2)</think><answer>click(30, 40.5)</answer>"), click_point("no point")
    ((30.0, 40.5), None)
    """
    start, end = completion.find("<answer>"), completion.find("</answer>")
    text = completion[start + 8 : end] if 0 <= start < end else completion
    found = _POINT.findall(text)
    return (float(found[-1][0]), float(found[-1][1])) if found else None


def check_box(bbox: Any, width: Any, height: Any) -> tuple[list[float], float, float]:
    """A row's box and image size as floats; ValueError saying what is wrong."""
    ok = isinstance(bbox, Sequence) and not isinstance(bbox, str) and len(bbox) == 4
    ok = ok and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in bbox)
    if not ok or bbox[0] > bbox[2] or bbox[1] > bbox[3]:
        raise ValueError(f"gui_point: bbox must be [x1, y1, x2, y2] numbers with x1 <= x2, y1 <= y2, got {bbox!r}")
    for name, v in (("width", width), ("height", height)):
        if not isinstance(v, (int, float)) or isinstance(v, bool) or not v > 0:
            raise ValueError(f"gui_point: the row's {name} must be a positive number of pixels, got {v!r}")
    return [float(v) for v in bbox], float(width), float(height)


def se_gui_reward(point: tuple[float, float], bbox: list[float], width: float, height: float) -> float:
    """SE-GUI's dense point reward (see the module docstring).

    >>> se_gui_reward((50, 50), [40, 40, 60, 60], 100, 100), round(se_gui_reward((0, 0), [40, 40, 60, 60], 100, 100), 4)
    (2.0, 0.0)
    """
    x, y = point
    hit = float(bbox[0] <= x <= bbox[2] and bbox[1] <= y <= bbox[3])
    cx, cy = (bbox[0] + bbox[2]) / 2 / width, (bbox[1] + bbox[3]) / 2 / height
    d_max = max(math.hypot(cx - a, cy - b) for a in (0.0, 1.0) for b in (0.0, 1.0))
    d = math.hypot(x / width - cx, y / height - cy)
    decay = max(0.0, 1.0 - (d / d_max) ** 2) if d <= 1 and d_max > 0 else 0.0
    return hit + decay


def gaussian_reward(point: tuple[float, float], bbox: list[float], alpha: float) -> float:
    """GUI-G²'s Gaussian point reward with σ = alpha · element size (a degenerate box: a tiny σ of 1e-6 pixels)."""
    cx, cy = (bbox[0] + bbox[2]) / 2, (bbox[1] + bbox[3]) / 2
    sx, sy = max(alpha * (bbox[2] - bbox[0]), 1e-6), max(alpha * (bbox[3] - bbox[1]), 1e-6)
    return math.exp(-0.5 * (((point[0] - cx) / sx) ** 2 + ((point[1] - cy) / sy) ** 2))


@REWARDS.register(
    "gui_point",
    params=GuiPointParams,
    paper=(papers.SE_GUI, papers.GUI_G2),
    fidelity="reduced",
    departures=(
        "the dense reward only: SE-GUI's seed-data curation and attention-map self-evolution are not built; "
        "GUI-G²'s coverage reward (a predicted Gaussian's overlap with the box) needs a predicted box: not built",
        "se_gui clips the decay term at 0 for points beyond the farthest image corner (the released code would "
        "go negative there); the format reward is a separate registry entry",
        "gaussian: alpha is a knob (default 0.5), not checked against the paper's calibration",
    ),
)
class GuiPoint:
    """Dense GUI-grounding click reward: SE-GUI hit + distance decay, GUI-G² Gaussian point, or binary hit.

    `se_gui` r = 1[p ∈ box] + max(0, 1 − (d/d_max)²) (SE-GUI, Yuan et al. 2025,
    arXiv:2505.12370), `gaussian` r = exp(−½ Σ ((p − c)/σ)²), σ = α · element size (GUI-G², Tang et al. 2025,
    arXiv:2507.15846), or `binary` r = 1[p ∈ box]."""

    def __init__(self, **params: Any) -> None:
        self.params = build(GuiPointParams, params, "gui_point")
        self.reasons: Counter = Counter()
        self.calls = 0
        self.__name__ = "gui_point"

    def metrics(self) -> dict[str, float]:
        n = max(self.calls, 1)
        return {f"gui_point/{reason}_frac": count / n for reason, count in sorted(self.reasons.items())}

    def score(self, point: tuple[float, float], bbox: list[float], width: float, height: float) -> float:
        p = self.params
        if p.method == "se_gui":
            return se_gui_reward(point, bbox, width, height)
        if p.method == "gaussian":
            return gaussian_reward(point, bbox, p.alpha)
        return float(bbox[0] <= point[0] <= bbox[2] and bbox[1] <= point[1] <= bbox[3])

    def __call__(self, prompts: list[str], completions: list[str], **fields: Any) -> list[Optional[float]]:
        n = len(completions)
        boxes = fields.get("bbox") or [None] * n
        widths, heights = fields.get("width") or [None] * n, fields.get("height") or [None] * n
        self.reasons, self.calls = Counter(), n
        out: list[Optional[float]] = []
        for completion, bbox, w, h in zip(completions, boxes, widths, heights):
            if bbox is None:
                self.reasons["no_bbox"] += 1
                out.append(None)
                continue
            box, width, height = check_box(bbox, w, h)
            point = click_point(completion)
            if point is None:
                self.reasons["no_point"] += 1
                out.append(0.0)
                continue
            out.append(self.score(point, box, width, height))
        return out
