"""Applications of RL to a domain (issue 42; docs/applications.md): the causal LLM router over logged data
(`router`) and HDPO for inventory control (`inventory`). Each piece is registered with its paper, fidelity and
departures."""

from ascent.applications.inventory import INVENTORY_METHODS
from ascent.applications.router import ROUTER_OBJECTIVES

__all__ = ["INVENTORY_METHODS", "ROUTER_OBJECTIVES"]
