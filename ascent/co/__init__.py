"""Neural combinatorial optimisation (docs/combinatorial.md): routing environments, reference solvers, the attention
model, POMO, Poppy, COMPASS and preference optimisation."""

from ascent.co.compass import compass  # noqa: F401  (registers the COMPASS policy and loss)
from ascent.co.losses import CO_LOSSES
from ascent.co.model import CO_POLICIES
from ascent.co.population import population  # noqa: F401  (registers the population policy)
from ascent.co.preference import preference  # noqa: F401  (registers the preference-optimisation loss)
from ascent.co.sequoia import sequoia  # noqa: F401  (registers SEQUOIA beside the myopic coRMAB policy)

__all__ = ["CO_LOSSES", "CO_POLICIES"]
