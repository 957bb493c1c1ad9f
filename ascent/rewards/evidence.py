"""Group-relative evidence reward: `reward=[exact_answer,'evidence_rm(scorer=rm:RM_FOLDER)'] reward_weights=[1,0.5]`.

EAPO, Evidence-Augmented Policy Optimization (Guan et al. 2026, "Evidence-Augmented Policy Optimization with Reward
Co-Evolution for Long-Context Reasoning", arXiv:2601.10306; not the other methods abbreviated EAPO) has the policy
extract evidence before answering, scores the extracted evidence with a reward model and normalises those scores
within the group of rollouts of a prompt — a dense process reward that penalises lucky guesses without grounded
evidence. For the completions y_1..y_G of one prompt x:

    e_i = the text of y_i's evidence spans (`pattern`, by default <evidence>...</evidence>, joined by newlines)
    s_i = scorer(x, e_i)          (any reward spec: `rm:PATH`, `source_similarity(source_field=needle)`, ...)
          = missing_score         when y_i has no evidence span or the scorer has no opinion
    r_i = scale · (s_i − mean_g s) / (std_g s + eps)     (0 for the whole group when std_g s = 0)

The scorer sees the evidence as the completion and the row's fields, so a verifier of evidence (the gold needle as
a field) and a learned reward model both fit. Its state (e.g. `rm_online`'s) travels in this reward's
`state_dict`. Add it to the outcome reward with a weight; the advantage estimator then normalises the sum.

EAPO's Adaptive Reward-Policy Co-Evolution, `outcome=answer_em`: after a batch is scored, each evidence node (group,
evidence text) is labelled with the `outcome` reward's verdicts on its completions; with `consistent_only` only the
nodes whose completions all agree are kept (outcome-consistent rollouts), and the scorer, which must have an
`update(prompts, evidence, labels)` method (`evidence_lr`), is trained on them, so the next batch is scored by an RM
that has seen which evidence the current policy's right answers rest on. A node holds several completions when the
rollouts are sampled as evidence trees (`rollout.explorer=evidence_tree`, ascent/rollout/evidence_tree.py, EAPO's
Tree-Structured Evidence Sampling).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any, Optional

from ascent import papers
from ascent.rewards.builtin import REWARDS
from ascent.typed import build


@dataclass(frozen=True)
class EvidenceParams:
    """The `evidence_rm` reward's knobs."""

    scorer: str = ""
    """The reward spec that scores a completion's evidence (e.g. `rm:PATH`, `source_similarity(source_field=...)`)."""
    pattern: str = r"<evidence>(.*?)</evidence>"
    """Regular expression whose first group is an evidence span (all matches are joined, dot matches newlines)."""
    missing_score: float = 0.0
    """s_i of a completion without evidence, or whose evidence the scorer has no opinion on."""
    scale: float = 1.0
    """Multiplies the group-normalised score."""
    eps: float = 1e-6
    """Added to the group's standard deviation."""
    outcome: str = ""
    """Adaptive Reward-Policy Co-Evolution: the reward spec that judges each completion's final outcome (e.g.
    `answer_em`); after scoring, a scorer with an `update(prompts, evidence, labels)` method (e.g. `evidence_lr`) is
    trained on the outcome labels of the batch's evidence nodes. "": no co-evolution."""
    consistent_only: bool = True
    """Co-evolution trains only on outcome-consistent nodes (every completion that shares the evidence, in its
    group, has the same outcome: with `rollout.explorer=evidence_tree` a node holds several answers); false: every
    node, labelled with its mean outcome."""

    def __post_init__(self) -> None:
        if not self.scorer:
            raise ValueError("scorer must name the reward that scores evidence, e.g. evidence_rm(scorer=rm:out/rm)")
        if self.scorer.startswith("evidence_rm"):
            raise ValueError("scorer cannot be evidence_rm itself")
        try:
            compiled = re.compile(self.pattern)
        except re.error as err:
            raise ValueError(f"pattern {self.pattern!r} is not a regular expression: {err}") from None
        if compiled.groups < 1:
            raise ValueError(f"pattern {self.pattern!r} needs a group, (...), around the evidence")
        if self.eps <= 0:
            raise ValueError("eps must be > 0")
        if self.outcome.startswith("evidence_rm"):
            raise ValueError("outcome must judge the final answer (e.g. outcome=answer_em), not be evidence_rm")


def evidence_of(text: str, pattern: str) -> Optional[str]:
    """The evidence spans of a completion joined by newlines; None without any (or only empty ones).

    >>> evidence_of("<evidence>a=3</evidence> so <evidence> b=4 </evidence> 7", r"<evidence>(.*?)</evidence>")
    'a=3\\nb=4'
    """
    spans = [m.strip() for m in re.findall(pattern, text, flags=re.DOTALL) if m and m.strip()]
    return "\n".join(spans) if spans else None


def group_relative(scores: list[float], groups: list[Any], scale: float = 1.0, eps: float = 1e-6) -> list[float]:
    """scale · (s_i − mean_g) / (std_g + eps) within each group (population std); 0 where a group's std is 0.

    >>> [round(r, 4) for r in group_relative([1.0, 3.0, 0.0, 0.0], ["a", "a", "b", "b"])]  # std 1, mean 2
    [-1.0, 1.0, 0.0, 0.0]
    """
    members: dict[Any, list[int]] = {}
    for i, g in enumerate(groups):
        members.setdefault(g, []).append(i)
    out = [0.0] * len(scores)
    for idx in members.values():
        vals = [scores[i] for i in idx]
        mean = sum(vals) / len(vals)
        std = math.sqrt(sum((v - mean) ** 2 for v in vals) / len(vals))
        if std > 0:
            for i in idx:
                out[i] = scale * (scores[i] - mean) / (std + eps)
    return out


@REWARDS.register(
    "evidence_rm",
    params=EvidenceParams,
    paper=papers.EAPO_EVIDENCE,
    fidelity="reduced",
    departures=(
        "any reward spec scores the evidence (an RM, a gold-needle check, `rm_online`, the online `evidence_lr`)",
        (
            "co-evolution (`outcome=`): the scorer takes one update per batch on the outcome-consistent evidence "
            "nodes' labels, ascent's reading of 'iteratively refines the RM using outcome-consistent rollouts'"
        ),
    ),
)
class EvidenceReward:
    """Group-Relative Evidence Reward (EAPO, Guan et al. 2026, arXiv:2601.10306): r_i = scale · (s_i − mean_g s) /
    (std_g s + eps), s_i = the `scorer` reward of the completion's evidence spans (`missing_score` without any)."""

    def __init__(self, **params: Any) -> None:
        from ascent.rewards.runner import resolve_reward

        self.params = p = build(EvidenceParams, params, "evidence_rm")
        self.scorer = resolve_reward(p.scorer)
        self.judge = resolve_reward(p.outcome) if p.outcome else None
        if self.judge is not None and not hasattr(self.scorer, "update"):
            raise ValueError(f"evidence_rm: outcome= co-evolves the scorer, and {p.scorer!r} cannot learn (no update)")
        self._metrics: dict[str, float] = {}
        self.__name__ = "evidence_rm"

    def place(self, device: str) -> None:
        if hasattr(self.scorer, "place"):
            self.scorer.place(device)

    def metrics(self) -> dict[str, float]:
        inner = self.scorer.metrics() if hasattr(self.scorer, "metrics") else {}
        return {**inner, **self._metrics}

    def state_dict(self) -> dict[str, Any]:
        """The scorer's state (a stateful scorer such as `rm_online`); empty otherwise."""
        return {"scorer": self.scorer.state_dict()} if hasattr(self.scorer, "state_dict") else {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if "scorer" in state and hasattr(self.scorer, "load_state_dict"):
            self.scorer.load_state_dict(state["scorer"])

    def summary_fields(self) -> dict[str, Any]:
        return self.scorer.summary_fields() if hasattr(self.scorer, "summary_fields") else {}

    def __call__(self, prompts: list[str], completions: list[str], **fields: Any) -> list[float]:
        p = self.params
        evidence = [evidence_of(c, p.pattern) for c in completions]
        found = [i for i, e in enumerate(evidence) if e is not None]
        scores = [p.missing_score] * len(completions)
        if found:
            sub = {
                k: [v[i] for i in found] for k, v in fields.items() if isinstance(v, list) and len(v) == len(prompts)
            }
            values = self.scorer([prompts[i] for i in found], [evidence[i] for i in found], **sub)
            if not isinstance(values, (list, tuple)) or len(values) != len(found):
                raise ValueError(f"evidence_rm: scorer {p.scorer!r} returned {values!r} for {len(found)} samples")
            for i, v in zip(found, values):
                scores[i] = p.missing_score if v is None or not math.isfinite(float(v)) else float(v)
        group = fields.get("group")
        keys = list(group) if group is not None and all(g is not None for g in group) else list(prompts)
        self._metrics = {
            "evidence_rm/found_frac": len(found) / max(len(completions), 1),
            "evidence_rm/score_mean": sum(scores) / max(len(scores), 1),
        }
        rewards = group_relative(scores, keys, p.scale, p.eps)
        if self.judge is not None and found:
            self.coevolve(prompts, completions, fields, evidence, scores, keys)
        return rewards

    def coevolve(
        self,
        prompts: list[str],
        completions: list[str],
        fields: dict[str, Any],
        evidence: list[Optional[str]],
        scores: list[float],
        keys: list[Any],
    ) -> None:
        """Adaptive Reward-Policy Co-Evolution: label each evidence node (group, evidence text) with its completions'
        outcomes, keep the outcome-consistent ones (`consistent_only`), log how often the scorer's scores (>= 0.5)
        already agreed with them, and train the scorer on them (after this batch's rewards were computed)."""
        outcomes = outcome_labels(self.judge, prompts, completions, fields)
        nodes = evidence_nodes(evidence, outcomes, keys, self.params.consistent_only)
        agree = [float((scores[i] >= 0.5) == (y >= 0.5)) for i, y in nodes]
        self._metrics["evidence_rm/nodes"] = float(len(nodes))
        self._metrics["evidence_rm/consistent_frac"] = len(nodes) / max(
            len({(keys[i], e) for i, e in enumerate(evidence) if e is not None}), 1
        )
        self._metrics["evidence_rm/outcome_agreement"] = sum(agree) / len(agree) if agree else 0.0
        if nodes:
            self.scorer.update([prompts[i] for i, _ in nodes], [evidence[i] for i, _ in nodes], [y for _, y in nodes])


def outcome_labels(
    judge: Any, prompts: list[str], completions: list[str], fields: dict[str, Any]
) -> list[Optional[float]]:
    """The judge's verdict on each full completion, 1.0 / 0.0 (threshold 0.5), None where it has no opinion."""
    values = judge(prompts, completions, **fields)
    return [None if v is None or not math.isfinite(float(v)) else float(float(v) >= 0.5) for v in values]


def evidence_nodes(
    evidence: list[Optional[str]], outcomes: list[Optional[float]], keys: list[Any], consistent_only: bool
) -> list[tuple[int, float]]:
    """The evidence nodes of a batch, one per (group key, evidence text), as (first member's index, label): the
    mean outcome of its judged members; with `consistent_only`, only nodes whose members all agree.

    >>> ev = ["f9", "f9", "c4", "f9", None]; out = [1.0, 0.0, 0.0, 1.0, 1.0]
    >>> evidence_nodes(ev, out, ["g", "g", "g", "h", "h"], True)
    [(2, 0.0), (3, 1.0)]
    >>> evidence_nodes(ev, out, ["g", "g", "g", "h", "h"], False)
    [(0, 0.5), (2, 0.0), (3, 1.0)]
    """
    members: dict[tuple[Any, str], list[int]] = {}
    for i, (e, o) in enumerate(zip(evidence, outcomes)):
        if e is not None and o is not None:
            members.setdefault((keys[i], e), []).append(i)
    out = []
    for idx in members.values():
        labels = [outcomes[i] for i in idx]
        if consistent_only and len(set(labels)) > 1:
            continue
        out.append((idx[0], sum(labels) / len(labels)))  # type: ignore[arg-type]
    return out
