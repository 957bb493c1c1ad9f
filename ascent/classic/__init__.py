"""Classic online deep RL on Gymnasium environments (PPO, DQN, SAC and contextual variants)."""

from ascent.classic.base import CLASSIC, Algorithm, ClassicContext

__all__ = ["CLASSIC", "Algorithm", "ClassicContext"]
