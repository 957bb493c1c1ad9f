"""RLVMR's meta-reasoning tags (Zhang et al., 2025, arXiv:2507.22844) for agents: the rule-based score of each
turn's `<plan>`, `<explore>` and `<reflect>` tags, as per-turn rewards (`agent.turn_rewards=meta_tags`, read by
`grpo_mr`, `explore_group` and `turn_feedback`) and as the episode-level reward `meta_tags`. Split out of
`ascent.rewards.agentic`, whose conventions (fields, final answers) it shares.
"""

from __future__ import annotations

import json
from typing import Any, Optional

from ascent import papers
from ascent.envs.tools import ToolCall, parse_tool_calls
from ascent.rewards.agentic import Values, _col, answer_em
from ascent.rewards.builtin import REWARDS

TAGS = ("plan", "explore", "reflect")


def _call_signatures(text: str) -> set[str]:
    return {
        json.dumps([c.name, c.arguments], sort_keys=True) for c in parse_tool_calls(text) if isinstance(c, ToolCall)
    }


def _failed(info: Optional[dict[str, Any]]) -> bool:
    """The step went wrong: a tool error, or no tool call and no answer (ToolEnv's reminder)."""
    info = info or {}
    return info.get("tool_errors", 0) > 0 or ("tool_calls" in info and info["tool_calls"] == 0 and "answer" not in info)


def turn_tag_scores(turn_texts: list[str], turn_infos: list[dict[str, Any]], success: bool) -> list[list[float]]:
    """RLVMR's rule-based scores (Zhang et al., 2025, arXiv:2507.22844) of each turn's tags, one list per turn
    (empty for an untagged turn): `<plan>` in the first turn scores 1 when the episode succeeds (0 otherwise
    or later); `<explore>` scores 1 when the turn makes a tool call never made before in the episode, -1 when
    all its calls repeat earlier ones (0 without calls); `<reflect>` scores 1 right after a failed step (tool
    error or no action), else 0. The -1 for a repeated exploration, `<plan>` counted in turn 0 only and the
    absence of a format penalty are ascent's rules.

    >>> turn_tag_scores(["<plan>x</plan><explore/><tool_call>{\\"name\\": \\"s\\", \\"arguments\\": {}}</tool_call>",
    ...                  "<explore/><tool_call>{\\"name\\": \\"s\\", \\"arguments\\": {}}</tool_call>",
    ...                  "<reflect/><answer>a</answer>", "<answer>b</answer>"],
    ...                 [{"tool_calls": 1, "tool_errors": 1}, {"tool_calls": 1, "tool_errors": 0}, {}, {}],
    ...                 success=True)
    [[1.0, 1.0], [-1.0], [0.0], []]
    """
    out, made = [], set()
    for t, (text, info) in enumerate(zip(turn_texts, turn_infos)):
        calls, scores = _call_signatures(text), []
        if "<plan" in text:
            scores.append(float(t == 0 and success))
        if "<explore" in text:
            scores.append(0.0 if not calls else 1.0 if calls - made else -1.0)
        if "<reflect" in text:
            scores.append(float(t > 0 and _failed(turn_infos[t - 1])))
        made |= calls
        out.append(scores)
    return out


def tag_scores(turn_texts: list[str], turn_infos: list[dict[str, Any]], success: bool) -> list[float]:
    """`turn_tag_scores` of an episode's tagged turns, flattened in order.

    >>> tag_scores(["<plan>x</plan><explore/><tool_call>{\\"name\\": \\"s\\", \\"arguments\\": {}}</tool_call>",
    ...             "<explore/><tool_call>{\\"name\\": \\"s\\", \\"arguments\\": {}}</tool_call>",
    ...             "<reflect/><answer>a</answer>"],
    ...            [{"tool_calls": 1, "tool_errors": 1}, {"tool_calls": 1, "tool_errors": 0}, {}], success=True)
    [1.0, 1.0, -1.0, 0.0]
    """
    return [x for scores in turn_tag_scores(turn_texts, turn_infos, success) for x in scores]


def turn_tag_types(turn_texts: list[str]) -> list[int]:
    """Each turn's tag type for GRPO-MR's per-tag normalisation (`grpo_mr`): 1 `<plan>`, 2 `<explore>`,
    3 `<reflect>`, 0 untagged; a turn with several counts as the first of plan, explore, reflect (the authors'
    code's order).

    >>> turn_tag_types(["<plan>x</plan><explore></explore>", "<explore/>", "<reflect/>", "<answer>a</answer>"])
    [1, 2, 3, 0]
    """
    return [next((k + 1 for k, tag in enumerate(TAGS) if f"<{tag}" in text), 0) for text in turn_texts]


def meta_turn_rewards(turn_texts: list[str], turn_infos: list[dict[str, Any]], success: bool) -> list[float]:
    """RLVMR's per-step credit as turn rewards (`agent.turn_rewards=meta_tags`): each turn's summed tag
    scores (0 for an untagged turn), for the turn-level estimators (`explore_group(step_coef=c)`,
    `turn_feedback`) to credit the tagged turn itself.

    >>> meta_turn_rewards(["<plan/>", "<explore/>", "<answer>a</answer>"], [{}, {}, {}], success=True)
    [1.0, 0.0, 0.0]
    """
    return [float(sum(scores)) for scores in turn_tag_scores(turn_texts, turn_infos, success)]


@REWARDS.register(
    "meta_tags",
    paper=papers.RLVMR,
    fidelity="reduced",
    departures=(
        (
            "as a reward, the per-step tag scores are averaged into one episode-level value; per-step credit goes "
            "through agent.turn_rewards=meta_tags and a turn-level estimator (RLVMR's GRPO-MR: "
            "algorithm.advantage=grpo_mr)"
        ),
        (
            "the rules -1 for an exploration that only repeats calls, `<plan>` scored in turn 0 only, and no format "
            "penalty are ascent's"
        ),
    ),
)
def meta_tags(
    prompts: list[str],
    completions: list[str],
    answer: Optional[list[Any]] = None,
    agent_info=None,
    agent_turn_texts=None,
    agent_turn_infos=None,
    **_: Any,
) -> Values:
    """RLVMR meta-reasoning reward (Zhang et al., 2025, arXiv:2507.22844), episode level: the mean of
    `tag_scores` over the episode's tagged turns (`<plan>`, `<explore>`, `<reflect>`), in [-1, 1]; 0 without
    tags. Success = answer_em. Mix it with the outcome (`reward=[answer_em,meta_tags] reward_weights=[1,0.1]`).
    This mean gives every token of the episode the same credit; RLVMR's dense per-step credit is
    `agent.turn_rewards=meta_tags` (each turn's own tag score in extras['turn_rewards']) with a turn-level
    estimator: RLVMR's GRPO-MR (`grpo_mr`, per-tag-type normalisation), `explore_group(step_coef=c)` or
    `turn_feedback`. No turn texts (single-turn rows): None."""
    n = len(completions)
    success = answer_em(prompts, completions, answer, agent_info, agent_turn_texts)
    out: Values = []
    for texts, infos, ok in zip(_col(agent_turn_texts, n), _col(agent_turn_infos, n), success):
        if texts is None:
            out.append(None)
            continue
        scores = tag_scores(texts, infos or [{}] * len(texts), bool(ok))
        out.append(sum(scores) / len(scores) if scores else 0.0)
    return out
