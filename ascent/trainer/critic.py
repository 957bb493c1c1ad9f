"""The critic of PPO with GAE: a value model (`ValueModel`, a copy of the policy's trunk with a scalar
head), its own AdamW and schedule, and the clipped value loss. The learner owns one when the advantage
estimator requires "values"; its weights and optimizer state travel in the trainer state (resume)."""

from __future__ import annotations

from dataclasses import replace

import torch

from ascent.algorithms.gae import clipped_value_loss, compute_gae, outcome_token_rewards
from ascent.config.schema import AlgorithmConfig, OptimConfig
from ascent.policy.model import ValueModel
from ascent.rollout.types import RolloutBatch
from ascent.trainer.optim import clip_and_step, make_optimizer, make_scheduler


class Critic:
    """Values for the advantage estimator, and one regression step per policy mini-batch."""

    def __init__(self, policy_model: torch.nn.Module, algo: AlgorithmConfig, optim: OptimConfig, total_optimizer_steps: int, micro_batch_size: int) -> None:
        self.algo, self.micro_batch_size, self.grad_clip = algo, micro_batch_size, optim.grad_clip
        self.model = ValueModel.from_policy(policy_model)
        cfg = replace(optim, lr=algo.value_lr if algo.value_lr is not None else optim.lr)
        self.optimizer = make_optimizer(self.model, cfg)
        self.scheduler = make_scheduler(self.optimizer, cfg, total_optimizer_steps)

    @torch.no_grad()
    def values(self, batch: RolloutBatch) -> torch.Tensor:
        """(N, T) values of every position of `batch`, in micro-batches, without grad."""
        self.model.eval()
        m = self.micro_batch_size
        return torch.cat([self.model(batch.input_ids[i: i + m], batch.attention_mask[i: i + m]) for i in range(0, len(batch), m)])

    def returns(self, batch: RolloutBatch, values: torch.Tensor, rewards: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
        """(N, T) GAE(gamma, lambda) returns A_t + V_t, the regression targets (unwhitened)."""
        token_rewards = outcome_token_rewards(rewards, valid, batch.completion_mask)
        return compute_gae(values, token_rewards, batch.completion_mask, self.algo.gae_gamma, self.algo.gae_lambda)[1]

    def step(self, batch: RolloutBatch, idx: torch.Tensor, old_values: torch.Tensor, returns: torch.Tensor, mask: torch.Tensor) -> dict[str, float]:
        """One optimizer step of the clipped value loss on rows `idx`, accumulated over micro-batches."""
        self.model.train()
        num_tokens = float(mask[idx].sum())
        total, clipped = 0.0, 0.0
        for start in range(0, len(idx), self.micro_batch_size):
            sub = idx[start: start + self.micro_batch_size]
            width = int(batch.attention_mask[sub].sum(-1).max())
            new = self.model(batch.input_ids[sub, :width], batch.attention_mask[sub, :width])
            loss, frac = clipped_value_loss(new, old_values[sub, :width], returns[sub, :width], mask[sub, :width], self.algo.value_clip, num_tokens)
            if not torch.isfinite(loss):
                self.optimizer.zero_grad(set_to_none=True)
                return {"value/loss": float("nan"), "value/skipped": 1.0}
            loss.backward()
            total += float(loss.detach())
            clipped += frac * float(mask[sub].sum()) / max(num_tokens, 1.0)
        norm, stepped = clip_and_step(self.model, self.optimizer, self.scheduler, self.grad_clip)
        return {"value/loss": total, "value/clip_frac": clipped, "value/grad_norm": norm, "value/skipped": float(not stepped)}

    def state_dict(self) -> dict:
        return {"model": self.model.state_dict(), "optimizer": self.optimizer.state_dict(), "scheduler": self.scheduler.state_dict()}

    def load_state_dict(self, state: dict) -> None:
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.scheduler.load_state_dict(state["scheduler"])
