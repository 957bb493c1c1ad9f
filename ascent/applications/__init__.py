"""Applications of RL to a domain (issue 42; docs/applications.md): the causal LLM router over logged data
(`router`), HDPO for inventory control (`inventory`), rulebook-informed driving (`rulebook`), DR-RL rank selection
(`rank_selection`), PIBR's code-writing best responses (`program_br`) and CSRO, PSRO with code oracles
(`code_psro`). Each piece is registered with its paper, fidelity and departures."""

from ascent.applications.code_psro import CSRO_ORACLES
from ascent.applications.inventory import INVENTORY_METHODS
from ascent.applications.program_br import BR_ORACLES
from ascent.applications.rank_selection import RANK_METHODS
from ascent.applications.router import ROUTER_OBJECTIVES
from ascent.applications.rulebook import DRIVING_REWARDS

__all__ = ["BR_ORACLES", "CSRO_ORACLES", "DRIVING_REWARDS", "INVENTORY_METHODS", "RANK_METHODS", "ROUTER_OBJECTIVES"]
