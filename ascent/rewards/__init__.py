"""Reward registry, built-in verifiers, user reward loading and the robust runner."""

from ascent.rewards.builtin import REWARDS
from ascent.rewards.runner import RewardResult, RewardRunner, RewardSpecError, resolve_reward

__all__ = ["REWARDS", "RewardResult", "RewardRunner", "RewardSpecError", "resolve_reward"]
