"""The registry of in-context / meta-RL agents that adapt at test time without a distilled transformer
(`ascent list incontext_agents --params`): subtask-graph inference (MSGI, MTSGI) and its graph-free control,
in-context policy iteration in an LLM's prompt (ICPI), and multi-attempt agents with reflection (LaMer).

One signature: `factory(params) -> agent`; the agent's interface is its setting's (each module's docstring says
which): `subtask_graph` agents `adapt(env, episodes, rng)` then `act(obs)`; `icpi` agents `act(obs)` and
`observe(transition)`; `lamer` agents train on TextWorld-like games.
"""

from __future__ import annotations

from ascent.registry import Registry

AGENTS: Registry = Registry("in-context agent")
"""name -> factory(params) -> agent (docs/in_context.md)."""
