"""Offline RL on Gymnasium tasks: Minari datasets (`ascent.offline.dataset`, written by `ascent collect`) and the
algorithms that learn from them without stepping an environment, registered in the `classic` registry beside the
online ones: BC, TD3+BC, IQL, CQL and discrete CQL, GAIL, MeanFlowQL, FAN, the preference-based (IPL,
`pref_iql`, REED) and return-conditioned (BR-RCRL, `rcrl`) learners (docs/offline.md)."""

from ascent.offline import (  # noqa: F401  (they register classic algorithms)
    bc,
    br_rcrl,
    cql,
    fan,
    gail,
    ipl,
    iql,
    meanflow_ql,
    pref_iql,
    reed,
    td3_bc,
)
from ascent.offline.dataset import DatasetError, Episode, Transitions, load_transitions, write_dataset

__all__ = ["DatasetError", "Episode", "Transitions", "load_transitions", "write_dataset"]
