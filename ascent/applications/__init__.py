"""Applications of RL to a domain (issue 42; docs/applications.md): the causal LLM router over logged data
(`router`). Each piece is registered with its paper, fidelity and departures."""

from ascent.applications.router import ROUTER_OBJECTIVES

__all__ = ["ROUTER_OBJECTIVES"]
