"""RAPO's steerable step-level reward (`rapo_step`; Fathom-DeepResearch, Singh et al. 2025, arXiv:2509.24107): each
tool-calling turn is classified by its cognitive behaviour and marginal utility and the weights of the classes steer
search breadth (exploration), cross-checking (verification) and horizon (a cap on rewarded calls, a redundancy cost).

Classes, from the episode's own turns and observations (no LLM judge):

- `redundant`: the turn brings nothing new: every call repeats an earlier call exactly (same name and arguments), or
  no line of its observation is new to the episode (a search that returns only documents already seen);
- `verification`: something new, and the call follows up a lead: one of its argument values appeared in an earlier
  observation (opening a document a search listed, searching a name a result named);
- `exploration`: something new from a new lead.

r = gate x (w_explore x min(n_explore, cap) + w_verify x min(n_verify, cap)) + w_redundant x n_redundant, with gate
= 1 when the final answer is correct (`correct` in the last step's info, or `answer_em`) and `gated`, else 1. Add it to
the outcome: `reward=[answer_em,rapo_step] reward_weights=[1.0,1.0]`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Optional

from ascent import papers
from ascent.envs.tools import ToolCall, parse_tool_calls
from ascent.rewards.builtin import REWARDS
from ascent.typed import build

KINDS = ("exploration", "verification", "redundant")


@dataclass(frozen=True)
class RapoStepParams:
    """RAPO's steerable step-level reward (Singh et al. 2025, arXiv:2509.24107)."""

    explore: float = 0.1
    """Reward per exploration call (search breadth)."""
    verify: float = 0.1
    """Reward per verification call (cross-checking depth)."""
    redundant: float = -0.2
    """Reward per redundant call (<= 0: the horizon's cost)."""
    cap: int = 3
    """At most this many exploration and this many verification calls earn their reward (the horizon); >= 0."""
    gated: bool = True
    """Exploration and verification earn only when the final answer is correct; redundancy always costs."""

    def __post_init__(self) -> None:
        if self.cap < 0:
            raise ValueError(f"cap must be >= 0, got {self.cap}")
        if self.redundant > 0:
            raise ValueError(f"redundant must be <= 0 (a cost), got {self.redundant}")


def _lines(text: Optional[str]) -> set[str]:
    return {ln.strip() for ln in (text or "").splitlines() if ln.strip()}


def _values(call: ToolCall) -> list[str]:
    return [str(v).strip() for v in call.arguments.values() if str(v).strip()]


def classify_turns(texts: list[str], observations: list[Optional[str]]) -> list[Optional[str]]:
    """Each turn's class (`exploration`, `verification`, `redundant`), None for a turn without a valid tool call.

    >>> classify_turns(
    ...     ['<tool_call>{"name": "search", "arguments": {"query": "Kalo"}}</tool_call>',
    ...      '<tool_call>{"name": "search", "arguments": {"query": "Kalo"}}</tool_call>',
    ...      '<tool_call>{"name": "open", "arguments": {"doc_id": "doc-3"}}</tool_call>',
    ...      "<answer>Velmor</answer>"],
    ...     ["[doc-3] Kalo Miran", "[doc-3] Kalo Miran", "Kalo Miran works at Velmor.", None])
    ['exploration', 'redundant', 'verification', None]
    """
    seen_calls: set[str] = set()
    seen_lines: set[str] = set()
    seen_text = ""
    out: list[Optional[str]] = []
    for text, obs in zip(texts, observations):
        calls = [c for c in parse_tool_calls(text) if isinstance(c, ToolCall)]
        if not calls:
            out.append(None)
            seen_lines |= _lines(obs)
            seen_text += "\n" + (obs or "")
            continue
        keys = [json.dumps([c.name, c.arguments], sort_keys=True) for c in calls]
        new_lines = _lines(obs) - seen_lines
        if all(k in seen_calls for k in keys) or not new_lines:
            out.append("redundant")
        elif any(v in seen_text for c in calls for v in _values(c)):
            out.append("verification")
        else:
            out.append("exploration")
        seen_calls.update(keys)
        seen_lines |= _lines(obs)
        seen_text += "\n" + (obs or "")
    return out


@REWARDS.register(
    "rapo_step",
    params=RapoStepParams,
    paper=papers.RAPO,
    fidelity="reduced",
    departures=(
        (
            "the classes come from rules over the episode's calls and observations (repeats, new observation lines, "
            "arguments found in earlier observations), not from the paper's LLM-judged behaviour labels"
        ),
        (
            "the per-class weights, the cap and the correctness gate are ascent's parametrisation; the sum is an "
            "episode-level reward added to the outcome, not placed on each tool call's turn"
        ),
    ),
)
class RapoStep:
    """RAPO's steerable step-level reward (module docstring): class weights x per-class call counts, gated."""

    def __init__(self, **params: Any) -> None:
        self.params = build(RapoStepParams, params, "rapo_step")
        self.__name__ = "rapo_step"
        self._metrics: dict[str, float] = {}

    def metrics(self) -> dict[str, float]:
        return dict(self._metrics)

    def __call__(
        self,
        prompts: list[str],
        completions: list[str],
        agent_turn_texts: Optional[list[list[str]]] = None,
        agent_observation_texts: Optional[list[list[Optional[str]]]] = None,
        agent_info: Optional[list[dict[str, Any]]] = None,
        answer: Optional[list[Any]] = None,
        **_: Any,
    ) -> list[Optional[float]]:
        if agent_turn_texts is None or agent_observation_texts is None:
            raise ValueError("rapo_step scores agent episodes: it needs agent_turn_texts and agent_observation_texts")
        p, out, totals = self.params, [], dict.fromkeys(KINDS, 0)
        infos = agent_info or [{}] * len(completions)
        for texts, obs, info in zip(agent_turn_texts, agent_observation_texts, infos):
            kinds = classify_turns(list(texts), list(obs))
            n = {k: kinds.count(k) for k in KINDS}
            for k in KINDS:
                totals[k] += n[k]
            gate = 1.0 if not p.gated else float(bool((info or {}).get("correct", False)))
            bonus = p.explore * min(n["exploration"], p.cap) + p.verify * min(n["verification"], p.cap)
            out.append(gate * bonus + p.redundant * n["redundant"])
        count = max(len(out), 1)
        self._metrics = {f"rapo_step/{k}_per_episode": totals[k] / count for k in KINDS}
        return out
