"""Algorithm registries: advantage estimators, policy losses, KL estimators, the one aggregation."""

from ascent.algorithms.advantages import ADVANTAGES
from ascent.algorithms.aggregate import AGG_MODES, aggregate
from ascent.algorithms.kl import KL_ESTIMATORS, kl_penalty
from ascent.algorithms.losses import LOSSES
from ascent.algorithms.types import AdvantageInput, LossInput

__all__ = ["ADVANTAGES", "AGG_MODES", "KL_ESTIMATORS", "LOSSES", "AdvantageInput", "LossInput", "aggregate", "kl_penalty"]
