"""Rewards for game environments (e.g. `data.task=textworld`), read from the episode's last step info
(`agent_info`): `game_won` is 1 when the game was won, `game_score` the final score over the maximum
score, `game_progress` the fraction of the game's plan done (the return of the dense `reward=progress` step
rewards of `data.task=textworld`). None (the sample leaves the loss) for a row that is not an agent episode.

>>> game_won(["p"] * 3, ["", "", ""], agent_info=[{"won": True}, {"won": False}, None])
[1.0, 0.0, None]
>>> game_score(["p"] * 2, ["", ""], agent_info=[{"score": 1, "max_score": 2}, {"score": 0}])
[0.5, 0.0]
>>> game_progress(["p"] * 3, ["", "", ""], agent_info=[{"progress": 0.5}, {"won": True}, {}])
[0.5, 1.0, 0.0]
"""

from __future__ import annotations

from typing import Any, Optional

from ascent import papers
from ascent.rewards.builtin import REWARDS

Values = list[Optional[float]]


@REWARDS.register("game_won", paper=None, fidelity="ascent")
def game_won(prompts: list[str], completions: list[str], agent_info=None, **_: Any) -> Values:
    """1.0 when the episode's last step info says `won`, else 0.0."""
    infos = list(agent_info) if agent_info is not None else [None] * len(completions)
    return [None if i is None else float(bool(i.get("won", False))) for i in infos]


@REWARDS.register("game_score", paper=None, fidelity="ascent")
def game_score(prompts: list[str], completions: list[str], agent_info=None, **_: Any) -> Values:
    """The last step info's `score / max_score` (max_score 1 when absent), in [0, 1] for scores in range."""
    infos = list(agent_info) if agent_info is not None else [None] * len(completions)
    return [
        None if i is None else float(i.get("score", 0)) / max(float(i.get("max_score", 1) or 1), 1e-9) for i in infos
    ]


@REWARDS.register(
    "game_progress",
    paper=papers.MULTI_TURN_RECIPE,
    fidelity="reduced",
    departures=(
        "the paper's dense reward is the game's intermediate score events (TextWorld `--rewards dense` games); "
        "ascent's generated games score only the win, so progress is textworld's own shortest-plan-left measure "
        "(`policy_commands`), r_t = (n_{t-1} - n_t) / L",
        "the paper scales a lost episode's turn rewards by its most rewards possible, a won one's so they sum to 1; "
        "ascent divides by the walkthrough's length L in both cases (a won game sums to 1 either way)",
        "for GRPO/RLOO the paper's verl sums the turn rewards into one sequence reward; this reward is that sum",
    ),
)
def game_progress(prompts: list[str], completions: list[str], agent_info=None, **_: Any) -> Values:
    """The return of the dense turn-level reward (Wang & Ammanabrolu 2025, arXiv:2510.01132): the last step
    info's `progress`, the fraction of the game's shortest plan done (`data.task=textworld(reward=progress)`),
    1.0 for a won game without it and 0.0 otherwise."""
    infos = list(agent_info) if agent_info is not None else [None] * len(completions)
    return [
        None if i is None else float(i["progress"]) if "progress" in i else float(bool(i.get("won", False)))
        for i in infos
    ]
