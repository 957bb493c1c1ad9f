"""Algorithm registries: advantage estimators, policy losses, group filters, KL estimators, the one aggregation."""

from ascent.algorithms import bounded_teacher as _bounded_teacher  # noqa: E402,F401  (registers tree_sd)
from ascent.algorithms import duration as _duration  # noqa: E402,F401  (registers duration_aware)
from ascent.algorithms import entropy as _entropy  # noqa: E402,F401  (registers clip_cov, kl_cov, entropy_bonus)
from ascent.algorithms import gae as _gae  # noqa: E402,F401  (registers the 'gae' advantage estimator)
from ascent.algorithms import hindsight as _hindsight  # noqa: E402,F401  (registers serl)
from ascent.algorithms import latent as _latent  # noqa: E402,F401  (registers relax)
from ascent.algorithms import process_rewards as _process_rewards  # noqa: E402,F401  (registers prm, q_evolve, spa)
from ascent.algorithms import soar as _soar  # noqa: E402,F401  (registers soar)
from ascent.algorithms import staged as _staged  # noqa: E402,F401  (registers staged)
from ascent.algorithms import turn_advantages as _turn_advantages  # noqa: E402,F401  (registers tree, progress, turn_feedback, explore_group)
from ascent.algorithms.advantages import ADVANTAGES
from ascent.algorithms.aggregate import AGG_MODES, aggregate
from ascent.algorithms.filters import FILTERS
from ascent.algorithms.kl import KL_ESTIMATORS, kl_penalty
from ascent.algorithms.losses import LOSSES
from ascent.algorithms.types import AdvantageInput, LossInput

__all__ = [
    "ADVANTAGES",
    "AGG_MODES",
    "FILTERS",
    "KL_ESTIMATORS",
    "LOSSES",
    "AdvantageInput",
    "LossInput",
    "aggregate",
    "kl_penalty",
]
