"""Classic online deep RL on Gymnasium environments (PPO, DQN, SAC and contextual variants)."""

from ascent.classic.base import CLASSIC, Algorithm, ClassicContext
from ascent.classic.dqn import DQNParams, dqn
from ascent.classic.ppo import PPOParams, ppo
from ascent.classic.sac import SACParams, sac

__all__ = ["CLASSIC", "Algorithm", "ClassicContext", "DQNParams", "PPOParams", "SACParams", "dqn", "ppo", "sac"]
