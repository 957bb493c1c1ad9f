"""Rollout engines (ascent's own, HF generate) and the RolloutBatch record.

Explorers defined outside explorers.py (`iib` in info_branch, `mcts` in tree_search, `near_miss`, `eapo_inject` in
experience, `evidence_tree`) register on
import; they are imported here, so any import of ascent.rollout.explorers (which runs this file first) sees the
whole registry.
"""

from ascent.rollout import evidence_tree as _evidence_tree  # noqa: F401  (registers evidence_tree)
from ascent.rollout import experience as _experience  # noqa: F401  (registers eapo_inject)
from ascent.rollout import info_branch as _info_branch  # noqa: F401  (registers iib)
from ascent.rollout import near_miss as _near_miss  # noqa: F401  (registers near_miss)
from ascent.rollout import tree_search as _tree_search  # noqa: F401  (registers mcts)
from ascent.rollout.backends import ENGINES, make_engine
from ascent.rollout.batch import assemble
from ascent.rollout.types import Generation, RolloutBatch, SamplingSettings

__all__ = ["ENGINES", "Generation", "RolloutBatch", "SamplingSettings", "assemble", "make_engine"]
