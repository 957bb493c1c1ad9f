"""Neural combinatorial optimisation (docs/combinatorial.md): routing environments, reference solvers, the attention model
and POMO."""

from ascent.co.losses import CO_LOSSES
from ascent.co.model import CO_POLICIES
from ascent.co.population import population  # noqa: F401  (registers the population policy)

__all__ = ["CO_LOSSES", "CO_POLICIES"]
