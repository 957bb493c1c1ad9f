"""Held-out evaluation of an agent: greedy episodes, judged by the run's first reward, plus the episode
statistics the agent recipes report and the token checker on every trajectory.

Metrics (fractions and means over held-out rows):
- `accuracy`: first reward >= the threshold (greedy episodes); `pass@1`, `pass@k` when asked (sampled);
- `tool_calls`: tool calls per episode (`num_tool_calls` of the final info, 0 when absent);
- `turns`: model turns per episode; `answer_rate`: episodes that ended with a final answer;
- `unsupported_answer_rate`: among episodes with an answer, those whose answer no retrieved document
  supports (the environment's `supported`, e.g. search_world; absent when the environment does not say);
- `token_check_pass_rate`: trajectories whose ids equal their conversation rendered by the chat template
  (`ascent.agents.token_check`); the first divergences are logged.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace
from typing import Any, Optional

import torch

from ascent.agents.collector import pack_episodes
from ascent.agents.loop import AgentConfig, rollout
from ascent.agents.task import AgentTask
from ascent.agents.token_check import check_trajectories
from ascent.agents.trajectory import Trajectory
from ascent.rewards.runner import RewardRunner
from ascent.rollout.engine import RolloutEngine
from ascent.trainer.evaluate import pass_at_k

log = logging.getLogger(__name__)


def episode_stats(trajs: list[Trajectory]) -> dict[str, float]:
    """tool_calls, turns, answer_rate and (when the environment reports `supported`) unsupported_answer_rate."""
    n = max(len(trajs), 1)
    out = {
        "tool_calls": sum(t.info.get("num_tool_calls", 0) for t in trajs) / n,
        "turns": sum(len(t.turns) for t in trajs) / n,
        "answer_rate": sum("answer" in t.info for t in trajs) / n,
    }
    answered = [t for t in trajs if "answer" in t.info and "supported" in t.info]
    if answered:
        out["unsupported_answer_rate"] = sum(not t.info["supported"] for t in answered) / len(answered)
    return out


@dataclass
class AgentEvaluator:
    """Scores an agent policy on held-out rows; same call as `ascent.trainer.evaluate.Evaluator`."""

    rows: list[dict[str, Any]]
    task: AgentTask
    engine: RolloutEngine
    rewards: RewardRunner
    loop: AgentConfig
    threshold: float = 1.0
    batch_size: int = 512

    def episodes(self, policy: Any, n: int, temperature: float, generator: Optional[torch.Generator]) -> tuple[list[Trajectory], torch.Tensor]:
        """n episodes per held-out row and (P, n) bool: the first reward judged them correct."""
        cfg = replace(self.loop, temperature=temperature)
        trajs, correct = [], []
        policy.model.eval()
        for i in range(0, len(self.rows), self.batch_size):
            chunk = self.rows[i: i + self.batch_size]
            got = rollout(self.engine, policy, [self.task.env_task(r) for r in chunk], self.task.make_env, cfg, n, generator)
            batch = pack_episodes(got, chunk, n, policy.tokenizer)
            first = self.rewards.score(batch.prompts, batch.completions, batch.reward_fields()).components[:, 0]  # (p*n,)
            trajs += got
            correct.append((first >= self.threshold).reshape(len(chunk), n))
        return trajs, torch.cat(correct)

    def __call__(self, policy: Any, pass_k: int = 0, temperature: float = 1.0, seed: int = 0) -> dict[str, float]:
        trajs, ok = self.episodes(policy, 1, 0.0, None)
        result = {"accuracy": float(ok.float().mean()), **episode_stats(trajs)}
        report = check_trajectories(trajs, policy.tokenizer)
        result["token_check_pass_rate"] = report["match_frac"]
        for line in report["divergences"]:
            log.warning("token check: %s", line)
        if pass_k > 0:
            _, ok = self.episodes(policy, pass_k, temperature, torch.Generator().manual_seed(seed))  # (P, k)
            counts = ok.sum(-1).tolist()
            result["pass@1"] = sum(pass_at_k(pass_k, c, 1) for c in counts) / len(counts)
            result[f"pass@{pass_k}"] = sum(pass_at_k(pass_k, c, pass_k) for c in counts) / len(counts)
        return result
