"""Classic online deep RL on Gymnasium environments (PPO, DQN, SAC and contextual variants)."""

from ascent.classic import (  # noqa: F401  (they register classic algorithms and classic_wrappers)
    carl,
    latency,
    md3qn,
    nonstationary,
    retrieval,
    reward_channels,
    seek,
)
from ascent.classic.base import CLASSIC, Algorithm, ClassicContext
from ascent.classic.corep import COREPParams, corep  # noqa: F401
from ascent.classic.dqn import DQNParams, dqn
from ascent.classic.gorl import GoRLParams, gorl  # noqa: F401
from ascent.classic.mrq import MRQParams, mrq  # noqa: F401
from ascent.classic.oni import ONIParams, oni  # noqa: F401
from ascent.classic.ppo import PPOParams, ppo
from ascent.classic.psdrl import PSDRLParams, psdrl  # noqa: F401
from ascent.classic.rpg import RPGParams, rpg  # noqa: F401
from ascent.classic.sac import SACParams, sac
from ascent.classic.skipper import SkipperParams, skipper  # noqa: F401
from ascent.classic.sqirl import SQIRLParams, sqirl  # noqa: F401
from ascent.classic.value_mapping import ValueMappingParams, ovm_dqn  # noqa: F401
from ascent.classic.wrappers import CLASSIC_WRAPPERS

__all__ = [
    "CLASSIC",
    "CLASSIC_WRAPPERS",
    "Algorithm",
    "ClassicContext",
    "DQNParams",
    "PPOParams",
    "SACParams",
    "dqn",
    "ppo",
    "sac",
]
