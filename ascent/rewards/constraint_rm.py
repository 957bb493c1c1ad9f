"""A label-free, constraint-wise reward model for multi-constraint instruction following (Ren et al., 2025,
arXiv:2510.14420, "Instructions are all you need"): pseudo-labels made from the instructions alone, a binary
classifier per (constraint, response), and the reward the aggregate of the per-constraint probabilities.

The paper's three parts, as ascent reads them:

1. Decomposition: an instruction is a list of atomic constraints (the `constraints` row field of
   `reward:constraints`, dicts such as `{"type": "contains", "value": "river"}`).
2. Pseudo-labels (`pseudo_labels`): the instruction is grown one constraint at a time, I_0 = [] ⊂ I_1 = [c_1] ⊂ ...
   ⊂ I_k; the policy answers every level once. The answer y_j to I_j is labelled as satisfying its newest
   constraint c_j (1), the answer y_{j-1} to I_{j-1}, which was never asked for c_j, as not satisfying it (0).
   No checker, judge or human sees the answers: the labels come from which instruction was asked. They are noisy
   (y_{j-1} may satisfy c_j by chance, y_j may miss it); the classifier learns from them anyway.
3. The constraint-wise classifier (`ConstraintClassifier`): P(c satisfied | c, y) for each constraint; the reward
   (`reward:constraint_rm`) is the mean over the row's constraints (`aggregate="mean"`, the paper's dense signal
   that eases the sparse all-or-nothing reward) or their product (`"all"`, the probability that all hold if the
   verdicts were independent).

The classifier is small: a logistic regression per constraint type over surface statistics of the pair
(`pair_features`: whether the constraint's string occurs in / starts / ends the response, the response's word and
character counts against the constraint's number as threshold indicators, comma and letter-case flags, a bias),
i.e. one weight vector per type over the same features. The paper fine-tunes an LLM as the classifier; what is
kept is the training signal (pseudo-labels only) and the per-constraint form. `HolisticClassifier` is the
control without decomposition: one probability for the whole instruction, trained on the same pseudo-label
pairs with the label attached to the whole instruction I_j.

A trained classifier is a folder: `constraint_rm.json` (format, version, feature layout, training summary) and
`weights.safetensors`; `save` / `load` write and read it, and `reward:constraint_rm(path=FOLDER)` scores with it.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

import torch

from ascent import papers
from ascent.rewards.builtin import REWARDS
from ascent.rewards.constraints import CONSTRAINTS, _as_list
from ascent.typed import ConfigError

FORMAT = "ascent-constraint-rm"
VERSION = 1
META_FILE = "constraint_rm.json"
WEIGHTS_FILE = "weights.safetensors"
THRESHOLDS = tuple(range(-6, 7))  # indicators count - value >= t, for the word and the character count
N_FEATURES = 3 + 2 * len(THRESHOLDS) + 4 + 1  # string match (3), counts (2 x 13), flags (4), bias

Constraint = dict[str, Any]


def _number(spec: Constraint) -> Optional[float]:
    value = spec.get("value")
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def pair_features(spec: Constraint, text: str) -> list[float]:
    """The surface statistics of (constraint, response) the classifier reads; N_FEATURES floats.

    >>> f = pair_features({"type": "contains", "value": "river"}, "the river runs")
    >>> f[:3], len(f) == N_FEATURES
    ([1.0, 0.0, 0.0], True)
    """
    t = text.strip()
    low = t.lower()
    value = spec.get("value")
    s = str(value).lower() if isinstance(value, str) and value else None
    match = [float(s in low), float(low.startswith(s)), float(low.endswith(s))] if s else [0.0, 0.0, 0.0]
    num = _number(spec)
    counts: list[float] = []
    for n in (len(t.split()), len(t)):
        counts += [float(num is not None and n - num >= k) for k in THRESHOLDS]
    flags = [float("," in t), float(t != t.lower()), float(t != t.upper()), float(not t)]
    return match + counts + flags + [1.0]


def _types() -> list[str]:
    return list(CONSTRAINTS.names())


class ConstraintClassifier(torch.nn.Module):
    """P(constraint satisfied | constraint, response): a logistic regression per constraint type over
    `pair_features` (weights (T, F), one row per registered constraint type)."""

    def __init__(self, types: Optional[Sequence[str]] = None) -> None:
        super().__init__()
        self.types = list(types) if types is not None else _types()
        self.weight = torch.nn.Parameter(torch.zeros(len(self.types), N_FEATURES))

    def type_index(self, spec: Constraint) -> int:
        kind = spec.get("type") if isinstance(spec, dict) else None
        if kind not in self.types:
            raise ValueError(f"unknown constraint type {kind!r}; valid types: {', '.join(self.types)}")
        return self.types.index(kind)

    def encode(self, specs: Sequence[Constraint], texts: Sequence[str]) -> torch.Tensor:
        """(N, T, F) inputs of N (constraint, response) pairs: the pair's features in its type's row, zeros elsewhere
        (computed once, then `logits_of` is a single product)."""
        x = torch.zeros(len(specs), len(self.types), N_FEATURES)
        if specs:
            feats = torch.tensor([pair_features(c, y) for c, y in zip(specs, texts)], dtype=torch.float32)
            x[torch.arange(len(specs)), torch.tensor([self.type_index(c) for c in specs])] = feats
        return x

    def logits_of(self, x: torch.Tensor) -> torch.Tensor:
        """(N,) logits of encoded inputs (N, T, F)."""
        return (x * self.weight).sum((-1, -2))

    def logits(self, specs: Sequence[Constraint], texts: Sequence[str]) -> torch.Tensor:
        """(N,) logits of N (constraint, response) pairs."""
        return self.logits_of(self.encode(specs, texts))

    @torch.no_grad()
    def prob(self, specs: Sequence[Constraint], texts: Sequence[str]) -> list[float]:
        return torch.sigmoid(self.logits(specs, texts)).tolist() if specs else []


class HolisticClassifier(torch.nn.Module):
    """The control without decomposition: P(response follows the whole instruction) = σ(w · Σ_c φ(c, y)), the
    pair features pooled over the instruction's constraints, one weight vector per type (the same capacity as
    ConstraintClassifier), one label per (instruction, response)."""

    def __init__(self, types: Optional[Sequence[str]] = None) -> None:
        super().__init__()
        self.inner = ConstraintClassifier(types)

    def encode(self, instructions: Sequence[Sequence[Constraint]], texts: Sequence[str]) -> torch.Tensor:
        """(N, T, F): each row's pair features summed over its instruction's constraints, in their types' rows."""
        owner = torch.tensor([n for n, cs in enumerate(instructions) for _ in cs], dtype=torch.long)
        pairs = self.inner.encode(
            [c for cs in instructions for c in cs], [y for cs, y in zip(instructions, texts) for _ in cs]
        )
        return torch.zeros(len(texts), *pairs.shape[1:]).index_add_(0, owner, pairs)

    def logits_of(self, x: torch.Tensor) -> torch.Tensor:
        return self.inner.logits_of(x)

    def logits(self, instructions: Sequence[Sequence[Constraint]], texts: Sequence[str]) -> torch.Tensor:
        return self.logits_of(self.encode(instructions, texts))

    @torch.no_grad()
    def prob(self, instructions: Sequence[Sequence[Constraint]], texts: Sequence[str]) -> list[float]:
        return torch.sigmoid(self.logits(instructions, texts)).tolist()


def pseudo_labels(
    instructions: Sequence[Sequence[Constraint]], respond: Callable[[list[Constraint]], str]
) -> tuple[list[tuple[Constraint, str, int]], list[tuple[list[Constraint], str, int]]]:
    """The paper's label-free training data from instructions alone (ascent's reading of its construction).

    For each instruction [c_1, ..., c_k], `respond` answers every prefix I_j = [c_1..c_j], j = 0..k, once; then for
    each j >= 1: (c_j, y_j, 1) and (c_j, y_{j-1}, 0) constraint-wise, and (I_j, y_j, 1), (I_j, y_{j-1}, 0) for the
    holistic control. Returns (constraint-wise examples, holistic examples).

    >>> cw, hol = pseudo_labels([[{"type": "no_commas"}]], lambda cs: "a b" if cs else "a, b")
    >>> cw
    [({'type': 'no_commas'}, 'a b', 1), ({'type': 'no_commas'}, 'a, b', 0)]
    """
    constraint_wise: list[tuple[Constraint, str, int]] = []
    holistic: list[tuple[list[Constraint], str, int]] = []
    for cs in instructions:
        cs = list(cs)
        answers = [respond(cs[:j]) for j in range(len(cs) + 1)]
        for j in range(1, len(cs) + 1):
            constraint_wise += [(cs[j - 1], answers[j], 1), (cs[j - 1], answers[j - 1], 0)]
            holistic += [(cs[:j], answers[j], 1), (cs[:j], answers[j - 1], 0)]
    return constraint_wise, holistic


def fit(
    model: torch.nn.Module,
    inputs: Sequence[Any],
    texts: Sequence[str],
    labels: Sequence[int],
    epochs: int = 300,
    lr: float = 0.1,
    l2: float = 1e-3,
) -> float:
    """Full-batch Adam on the binary cross-entropy (+ l2 on the weights); returns the final training loss."""
    y = torch.tensor(list(labels), dtype=torch.float32)
    x = model.encode(inputs, texts)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    loss = torch.zeros(())
    for _ in range(epochs):
        logit = model.logits_of(x)
        loss = torch.nn.functional.binary_cross_entropy_with_logits(logit, y)
        reg = sum((p**2).sum() for p in model.parameters())
        opt.zero_grad()
        (loss + l2 * reg).backward()
        opt.step()
    return float(loss.detach())


def save(model: ConstraintClassifier, folder: str | Path, summary: Optional[dict[str, Any]] = None) -> Path:
    """Write the classifier's folder (constraint_rm.json + weights.safetensors)."""
    from safetensors.torch import save_file

    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    save_file({"weight": model.weight.detach().contiguous()}, str(out / WEIGHTS_FILE))
    meta = {"format": FORMAT, "version": VERSION, "types": model.types, "n_features": N_FEATURES}
    meta["thresholds"] = list(THRESHOLDS)
    (out / META_FILE).write_text(json.dumps({**meta, "summary": summary or {}}, indent=1))
    return out


def load(folder: str | Path) -> ConstraintClassifier:
    """A classifier saved by `save`; ConfigError saying what is wrong with a missing or foreign folder."""
    from safetensors.torch import load_file

    path = Path(folder)
    meta_path = path / META_FILE
    if not meta_path.exists():
        raise ConfigError(f"{str(path)!r} is not a constraint reward model (no {META_FILE})")
    try:
        meta = json.loads(meta_path.read_text())
    except ValueError as err:
        raise ConfigError(f"constraint reward model {str(path)!r}: {META_FILE} is not valid JSON ({err})") from None
    if meta.get("format") != FORMAT or meta.get("version") != VERSION or meta.get("n_features") != N_FEATURES:
        raise ConfigError(f"{str(path)!r}: {META_FILE} is not an {FORMAT} v{VERSION} folder with this feature layout")
    model = ConstraintClassifier(meta["types"])
    weight = load_file(str(path / WEIGHTS_FILE))["weight"]
    if tuple(weight.shape) != tuple(model.weight.shape):
        raise ConfigError(f"{str(path)!r}: weights of shape {tuple(weight.shape)} do not match its manifest")
    model.weight.data.copy_(weight)
    return model.eval()


def aggregate_probs(model: ConstraintClassifier, specs: list[Constraint], text: str, aggregate: str) -> float:
    """The reward of one response: the mean ("mean") or product ("all") of its per-constraint probabilities."""
    probs = model.prob(specs, [text] * len(specs))
    return sum(probs) / len(probs) if aggregate == "mean" else math.prod(probs)


@REWARDS.register(
    "constraint_rm",
    paper=papers.INSTRUCTION_FOLLOWING_SELF_SUPERVISED_RL,
    fidelity="reduced",
    departures=(
        "the classifier is a logistic regression per constraint type over surface statistics of (constraint, response)"
        ", not the paper's fine-tuned LLM; constraints are the rule types of reward:constraints (no soft constraints)",
        "pseudo-labels: the answer to the instruction with c_j is positive for c_j, the answer without it negative "
        "(ascent's reading of the paper's construction); instructions are grown one constraint at a time",
        "aggregation: the mean of the per-constraint probabilities (the catalogue marks the paper's form inferred); "
        "'all' multiplies them",
    ),
)
class ConstraintRewardModel:
    """The mean (or product) of a trained constraint-wise classifier's probabilities over the row's
    `constraints` (Ren et al., 2025, arXiv:2510.14420); path: a folder written by `constraint_rm.save`.
    A row without constraints: None."""

    def __init__(self, path: str, aggregate: str = "mean") -> None:
        if aggregate not in ("mean", "all"):
            raise ConfigError(f"constraint_rm: aggregate must be 'mean' or 'all', not {aggregate!r}")
        self.path, self.aggregate = str(path), aggregate
        self.model = load(path)
        self.__name__ = f"constraint_rm:{self.path}"

    def __call__(
        self, prompts: list[str], completions: list[str], constraints: Optional[list[Any]] = None, **_: Any
    ) -> list[Optional[float]]:
        rows = list(constraints) if constraints is not None else [None] * len(completions)
        out: list[Optional[float]] = []
        for text, row in zip(completions, rows):
            specs = _as_list(row)
            out.append(aggregate_probs(self.model, specs, text, self.aggregate) if specs else None)
        return out
