"""Offline RL on Gymnasium tasks: Minari datasets (`ascent.offline.dataset`, written by `ascent collect`) and the
algorithms that learn from them without stepping an environment, registered in the `classic` registry beside the
online ones: BC, TD3+BC, IQL, CQL and discrete CQL (docs/offline.md)."""

from ascent.offline import bc, cql, fan, gail, iql, meanflow_ql, td3_bc  # noqa: F401  (they register classic algorithms)
from ascent.offline.dataset import DatasetError, Episode, Transitions, load_transitions, write_dataset

__all__ = ["DatasetError", "Episode", "Transitions", "load_transitions", "write_dataset"]
