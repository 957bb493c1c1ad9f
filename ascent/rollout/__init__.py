"""Rollout engines (ascent's own, HF generate) and the RolloutBatch record."""

from ascent.rollout.backends import ENGINES, make_engine
from ascent.rollout.batch import assemble
from ascent.rollout.types import Generation, RolloutBatch, SamplingSettings

__all__ = ["ENGINES", "Generation", "RolloutBatch", "SamplingSettings", "assemble", "make_engine"]
