"""Held-out evaluation: greedy accuracy and pass@k, judged by the run's first reward function."""

from __future__ import annotations

from dataclasses import dataclass
from math import comb
from typing import Any

import torch

from ascent.data.prompts import PromptEncoder
from ascent.policy.model import Policy
from ascent.rewards.runner import RewardRunner
from ascent.rollout.batch import assemble
from ascent.rollout.engine import RolloutEngine
from ascent.rollout.types import SamplingSettings


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k from n samples with c correct (Chen et al. 2021): 1 - C(n-c, k) / C(n, k).

    >>> pass_at_k(8, 0, 4), pass_at_k(8, 8, 1), round(pass_at_k(8, 2, 4), 4)
    (0.0, 1.0, 0.7857)
    """
    if n - c < k:
        return 1.0
    return 1.0 - comb(n - c, k) / comb(n, k)


@dataclass
class Evaluator:
    """Scores a policy on held-out rows."""

    rows: list[dict[str, Any]]
    encoder: PromptEncoder
    engine: RolloutEngine
    rewards: RewardRunner
    settings: SamplingSettings
    threshold: float = 1.0
    batch_size: int = 512

    def correct(self, policy: Policy, n: int, temperature: float, generator: torch.Generator | None) -> torch.Tensor:
        """(P, n) bool: sample n completions per held-out prompt and judge each."""
        s = SamplingSettings(**{**self.settings.__dict__, "temperature": temperature})
        out = []
        policy.model.eval()
        for i in range(0, len(self.rows), self.batch_size):
            chunk = self.rows[i: i + self.batch_size]
            prompts = [r["prompt"] for r in chunk]
            ids = [self.encoder(p) for p in prompts]
            gen = self.engine.generate(policy.model, ids, n, s, generator)
            batch = assemble(prompts, ids, [{k: v for k, v in r.items() if k != "prompt"} for r in chunk], gen, n, policy.tokenizer)
            first = self.rewards.score(batch.prompts, batch.completions, batch.reward_fields()).components[:, 0]  # (p*n,)
            out.append((first >= self.threshold).reshape(len(chunk), n))
        return torch.cat(out)

    def __call__(self, policy: Policy, pass_k: int = 0, temperature: float = 1.0, seed: int = 0) -> dict[str, float]:
        """{'accuracy': greedy accuracy, 'pass@1', f'pass@{k}': sampled at `temperature`} as fractions."""
        result = {"accuracy": float(self.correct(policy, 1, 0.0, None).float().mean())}
        if pass_k > 0:
            ok = self.correct(policy, pass_k, temperature, torch.Generator().manual_seed(seed))  # (P, k)
            counts = ok.sum(-1).tolist()
            result["pass@1"] = sum(pass_at_k(pass_k, c, 1) for c in counts) / len(counts)
            result[f"pass@{pass_k}"] = sum(pass_at_k(pass_k, c, pass_k) for c in counts) / len(counts)
        return result
