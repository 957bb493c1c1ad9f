"""Reward registry, built-in verifiers, user reward loading and the robust runner."""

from ascent.rewards.builtin import REWARDS
from ascent.rewards.runner import RewardResult, RewardRunner, RewardSpecError, resolve_reward
from ascent.rewards import constraints, lp_solver, shaping  # noqa: F401,E402 - importing registers their rewards
from ascent.rewards import agentic  # noqa: F401,E402 - answer_em, answer_f1, trace, source_consistency, citation_rubric, evidence_recall, igpo, meta_tags, round_discount
from ascent.rewards import games  # noqa: F401,E402 - game_won, game_score

__all__ = ["REWARDS", "RewardResult", "RewardRunner", "RewardSpecError", "resolve_reward"]
