"""The learner: turns a scored rollout batch into optimizer steps with the registered policy loss.

It owns the policy's weights, the optimizer and scheduler, and an optional frozen reference model. Its
input is a `RolloutBatch` plus advantages: it never reaches into the rollout engine or the rewards.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass

import torch

from ascent.algorithms import LOSSES, LossInput
from ascent.config.schema import AlgorithmConfig, OptimConfig
from ascent.policy.model import Policy, token_logprobs
from ascent.rollout.types import RolloutBatch
from ascent.trainer.optim import clip_and_step, make_optimizer, make_scheduler


@dataclass
class MicroBatch:
    """Rows of a mini-batch processed in one forward/backward."""

    input_ids: torch.Tensor  # (n, T)
    attention_mask: torch.Tensor  # (n, T)
    mask: torch.Tensor  # (n, T) loss mask
    advantages: torch.Tensor  # (n, T)
    old_logprobs: torch.Tensor | None  # (n, T)
    sampled_logprobs: torch.Tensor  # (n, T)
    completion_mask: torch.Tensor  # (n, T) sampled tokens, valid or not


class Learner:
    """Optimizer steps on rollout batches (PPO epochs x mini-batches, micro-batch accumulation)."""

    def __init__(self, policy: Policy, algo: AlgorithmConfig, optim: OptimConfig, total_optimizer_steps: int, micro_batch_size: int, temperature: float, norm_length: int) -> None:
        self.policy, self.algo, self.optim_cfg = policy, algo, optim
        self.loss_fn = LOSSES.get(algo.loss)
        self.optimizer = make_optimizer(policy.model, optim)
        self.scheduler = make_scheduler(self.optimizer, optim, total_optimizer_steps)
        self.micro_batch_size = micro_batch_size
        self.temperature = temperature if temperature > 0 else 1.0
        self.norm_length = algo.norm_length or norm_length
        self.reference = self._frozen_copy(policy.model) if algo.kl_coef > 0 else None

    @staticmethod
    def _frozen_copy(model: torch.nn.Module) -> torch.nn.Module:
        ref = copy.deepcopy(model).eval()
        for p in ref.parameters():
            p.requires_grad_(False)
        return ref

    @torch.no_grad()
    def logprobs(self, model: torch.nn.Module, batch: RolloutBatch) -> torch.Tensor:
        """Teacher-forced log-probs (N, T) in micro-batches, without grad."""
        parts = [token_logprobs(model, batch.input_ids[i: i + self.micro_batch_size], batch.attention_mask[i: i + self.micro_batch_size], self.temperature) for i in range(0, len(batch), self.micro_batch_size)]
        return torch.cat(parts)

    def update(self, batch: RolloutBatch, advantages: torch.Tensor, valid: torch.Tensor) -> dict[str, float]:
        """All optimizer steps for one rollout batch. advantages: (N, T); valid: (N,) usable rewards."""
        self.policy.model.train()
        steps = self.algo.ppo_epochs * self.algo.mini_batches
        old = self.logprobs(self.policy.model, batch) if steps > 1 else None  # (N, T) pre-update policy
        mask = batch.completion_mask * valid[:, None].float()  # (N, T)
        metrics: dict[str, float] = {}
        if old is not None:
            metrics["rollout/logprob_mismatch"] = float(((old - batch.sampled_logprobs).abs() * batch.completion_mask).max())
        bounds = [round(i * len(batch) / self.algo.mini_batches) for i in range(self.algo.mini_batches + 1)]  # exactly mini_batches parts
        skipped = 0
        for _ in range(self.algo.ppo_epochs):
            for start, stop in zip(bounds[:-1], bounds[1:]):
                rows = slice(start, stop)
                m = self.optimizer_step(batch, advantages, mask, old, rows)
                skipped += int(m.pop("loss/skipped"))
                for k, v in m.items():
                    metrics.setdefault(k, v)  # first mini-batch's values (pre-update mismatch included)
        metrics["loss/skipped_steps"] = float(skipped)
        metrics["optim/lr"] = float(self.scheduler.get_last_lr()[0])
        return metrics

    def optimizer_step(self, batch: RolloutBatch, adv: torch.Tensor, mask: torch.Tensor, old: torch.Tensor | None, rows: slice) -> dict[str, float]:
        """One optimizer step on rows `rows`, accumulated over micro-batches; skipped on a NaN/inf loss."""
        num_tokens, num_seqs = float(mask[rows].sum()), float(mask[rows].shape[0])
        metrics: dict[str, float] = {}
        idx = torch.arange(batch.input_ids.shape[0])[rows]
        for start in range(0, len(idx), self.micro_batch_size):
            sub = idx[start: start + self.micro_batch_size]
            width = int(batch.attention_mask[sub].sum(-1).max())
            mb = MicroBatch(batch.input_ids[sub, :width], batch.attention_mask[sub, :width], mask[sub, :width], adv[sub, :width], None if old is None else old[sub, :width], batch.sampled_logprobs[sub, :width], batch.completion_mask[sub, :width])
            loss, m, mismatch = self.micro_loss(mb, num_tokens, num_seqs)
            if mismatch is not None:
                metrics["rollout/logprob_mismatch"] = max(metrics.get("rollout/logprob_mismatch", 0.0), mismatch)
            if not math.isfinite(float(loss.detach())):
                self.optimizer.zero_grad(set_to_none=True)
                return {"loss/skipped": 1.0, "loss/nonfinite": 1.0}
            loss.backward()
            for k, v in m.items():
                metrics[k] = metrics.get(k, 0.0) + v * len(sub) / num_seqs
        norm, stepped = clip_and_step(self.policy.model, self.optimizer, self.scheduler, self.optim_cfg.grad_clip)
        metrics.update({"loss/grad_norm": norm, "loss/skipped": float(not stepped)})
        return metrics

    def micro_loss(self, mb: MicroBatch, num_tokens: float, num_seqs: float) -> tuple[torch.Tensor, dict[str, float], float | None]:
        """The registered loss on one micro-batch, normalised by the whole mini-batch's counts; also the
        max |learner - sampler| log-prob gap when this pass is the pre-update one (on-policy single step)."""
        logp = token_logprobs(self.policy.model, mb.input_ids, mb.attention_mask, self.temperature)  # (n, T)
        ref = None
        if self.reference is not None:
            with torch.no_grad():
                ref = token_logprobs(self.reference, mb.input_ids, mb.attention_mask, self.temperature)
        old = mb.old_logprobs if mb.old_logprobs is not None else logp.detach()
        inp = LossInput(logprobs=logp, old_logprobs=old, advantages=mb.advantages, mask=mb.mask, num_tokens=num_tokens, num_seqs=num_seqs, norm_length=float(self.norm_length), ref_logprobs=ref, sampled_logprobs=mb.sampled_logprobs)
        loss, metrics = self.loss_fn(inp, self.algo)
        mismatch = None if mb.old_logprobs is not None else float(((old - mb.sampled_logprobs).abs() * mb.completion_mask).max())
        return loss, metrics, mismatch

    def state_dict(self) -> dict:
        return {"optimizer": self.optimizer.state_dict(), "scheduler": self.scheduler.state_dict()}

    def load_state_dict(self, state: dict) -> None:
        self.optimizer.load_state_dict(state["optimizer"])
        self.scheduler.load_state_dict(state["scheduler"])
