"""`sql_exec`: the execution-match reward of Text-to-SQL agents (`data.task=sql_world`), read from the episode's
last step info (`agent_info["exec_match"]`, set by `ascent.envs.sql_world.SqlEnv.score`: the final query's result
equals the gold query's as a multiset of rows, or as a list when the question asks for an order). An episode that
ends without an answer scores 0; a row that is not an agent episode gets None (it leaves the loss).

After SkyRL-SQL (Liu et al., 2025, blog post) and AGRO-SQL (Yang et al., 2025, arXiv:2512.23366).

>>> sql_exec(["q"] * 3, ["", "", ""], agent_info=[{"exec_match": True}, {"turns": 5}, None])
[1.0, 0.0, None]
"""

from __future__ import annotations

from typing import Any, Optional

from ascent.envs.sql_world import AGRO_SQL, SKYRL_SQL
from ascent.rewards.builtin import REWARDS


@REWARDS.register(
    "sql_exec",
    paper=(SKYRL_SQL, AGRO_SQL),
    fidelity="reduced",
    departures=(
        "no format term: SkyRL-SQL gives -1 to a reply without a well-formed <solution> block; here an episode "
        "without <answer> scores 0 like a wrong query (the agent loop already ends malformed turns)",
        "results compared as multisets of rows (duplicates count) and as lists when the question asks for an "
        "order; SkyRL-SQL's grader compares Python sets of rows (duplicates and order ignored)",
        "floats agree to 6 decimals and 1 == 1.0 (`ascent.envs.sql_world.canonical`); column names are ignored "
        "but column order is not (Spider's test-suite evaluation also permutes columns)",
    ),
)
def sql_exec(prompts: list[str], completions: list[str], agent_info=None, **_: Any) -> list[Optional[float]]:
    """1.0 when the episode's final SQL matched the gold result on execution, else 0.0 (no episode: None)."""
    infos = list(agent_info) if agent_info is not None else [None] * len(completions)
    return [None if i is None else float(bool(i.get("exec_match", False))) for i in infos]
