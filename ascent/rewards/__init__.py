"""Reward registry, built-in verifiers, user reward loading and the robust runner."""

from ascent.rewards.builtin import REWARDS
from ascent.rewards.runner import RewardResult, RewardRunner, RewardSpecError, resolve_reward
from ascent.rewards import constraints, lp_solver, shaping  # noqa: F401,E402 - importing registers their rewards

__all__ = ["REWARDS", "RewardResult", "RewardRunner", "RewardSpecError", "resolve_reward"]
