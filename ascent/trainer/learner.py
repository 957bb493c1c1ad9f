"""The learner: turns a scored rollout batch into optimizer steps with the registered policy loss.

It owns the policy's weights, the optimizer and scheduler, and what the loss and the advantage estimator
declare they need (their `requires` attribute), provided generically:

- "ref": a frozen copy of the initial policy (also whenever kl_coef > 0) -> LossInput.ref_logprobs
- "rewards": the sequence rewards passed to `update` -> LossInput.rewards
- "groups": mini-batches and micro-batches made of whole groups -> LossInput.group_index
- "v_star": per-sequence V* passed to `update` -> LossInput.v_star
- "full_logits": the policy's full-vocabulary log-softmax -> LossInput.logits
- "teacher": a frozen teacher loaded from algorithm.teacher -> LossInput.teacher_logprobs
- "values" (advantage estimator): a critic (`Critic`), trained here on the GAE returns

Its input is a `RolloutBatch` plus advantages: it never reaches into the rollout engine or the rewards.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass
from typing import Optional

import torch

from ascent.algorithms import ADVANTAGES, LOSSES, LossInput
from ascent.algorithms.aggregate import masked_mean
from ascent.algorithms.losses import tis_weight
from ascent.config.schema import AlgorithmConfig, OptimConfig
from ascent.policy.fused import fuse_rms_norms
from ascent.policy.model import Policy, full_logprobs, shared_prefix_logprobs, supports_shared_prefix, token_logprobs
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
    prompt_group: torch.Tensor  # (n,) the prompt each row answers (rows sharing one are forwarded once)
    rewards: Optional[torch.Tensor] = None  # (n,)
    group_index: Optional[torch.Tensor] = None  # (n,)
    v_star: Optional[torch.Tensor] = None  # (n,)


def requirements(algo: AlgorithmConfig) -> frozenset[str]:
    """What the configured loss and advantage estimator declare they need (`fn.requires`)."""
    return frozenset(getattr(LOSSES.get(algo.loss), "requires", ())) | frozenset(getattr(ADVANTAGES.get(algo.advantage), "requires", ()))


class Learner:
    """Optimizer steps on rollout batches (PPO epochs x mini-batches, micro-batch accumulation)."""

    def __init__(self, policy: Policy, algo: AlgorithmConfig, optim: OptimConfig, total_optimizer_steps: int, micro_batch_size: int, temperature: float, norm_length: int, shared_prefix: bool = True, fused_norm: bool = True) -> None:
        self.policy, self.algo, self.optim_cfg = policy, algo, optim
        self.fused_norms = fuse_rms_norms(policy.model) if fused_norm else 0
        """How many RMSNorm modules of the policy run ascent's fused kernels (`train.fused_norm`)."""
        self.shared_prefix = shared_prefix
        """Forward each distinct prompt of a micro-batch once (`shared_prefix_logprobs`); `train.shared_prefix`."""
        self.loss_fn = LOSSES.get(algo.loss)
        self.requires = requirements(algo)
        self.optimizer = make_optimizer(policy.model, optim)
        self.scheduler = make_scheduler(self.optimizer, optim, total_optimizer_steps)
        self.micro_batch_size = micro_batch_size
        self.temperature = temperature if temperature > 0 else 1.0
        self.norm_length = algo.norm_length or norm_length
        self.reference = self._frozen_copy(policy.model) if algo.kl_coef > 0 or "ref" in self.requires else None
        self.teacher = self._teacher() if "teacher" in self.requires else None
        self.critic = None
        if "values" in self.requires:
            from ascent.trainer.critic import Critic

            self.critic = Critic(policy.model, algo, optim, total_optimizer_steps, micro_batch_size)

    @staticmethod
    def _frozen_copy(model: torch.nn.Module) -> torch.nn.Module:
        ref = copy.deepcopy(model).eval()
        for p in ref.parameters():
            p.requires_grad_(False)
        return ref

    def _teacher(self) -> torch.nn.Module:
        from ascent.trainer.teacher import load_teacher

        if not self.algo.teacher:
            raise ValueError(f"loss {self.algo.loss!r} distils from a teacher: set algorithm.teacher to a checkpoint folder or a run directory")
        return load_teacher(self.algo.teacher, self.policy)

    @torch.no_grad()
    def logprobs(self, model: torch.nn.Module, batch: RolloutBatch) -> torch.Tensor:
        """Teacher-forced log-probs (N, T) in micro-batches, without grad."""
        m = self.micro_batch_size
        parts = [self.token_logprobs(model, batch.input_ids[i: i + m], batch.attention_mask[i: i + m], batch.completion_mask[i: i + m], batch.group_index[i: i + m]) for i in range(0, len(batch), m)]
        return torch.cat(parts)

    def token_logprobs(self, model: torch.nn.Module, input_ids: torch.Tensor, attention_mask: torch.Tensor, completion_mask: torch.Tensor, prompt_group: torch.Tensor) -> torch.Tensor:
        """(n, T) teacher-forced log-probs of the completion tokens: each shared prompt forwarded once when
        `shared_prefix` is on and the model and rows allow it, else the plain forward over every row."""
        if self.shared_prefix and supports_shared_prefix(model):
            lp = shared_prefix_logprobs(model, input_ids, attention_mask, completion_mask, prompt_group, self.temperature)
            if lp is not None:
                return lp
        return token_logprobs(model, input_ids, attention_mask, self.temperature)

    def update(self, batch: RolloutBatch, advantages: torch.Tensor, valid: torch.Tensor, rewards: Optional[torch.Tensor] = None, v_star: Optional[torch.Tensor] = None, values: Optional[torch.Tensor] = None) -> dict[str, float]:
        """All optimizer steps for one rollout batch. advantages: (N, T); valid: (N,) usable rewards;
        rewards (N,), v_star (N,): for losses that require them; values (N, T): the critic's values the
        advantages were computed with (recomputed when the learner has a critic and none are given)."""
        self.policy.model.train()
        steps = self.algo.ppo_epochs * self.algo.mini_batches
        old = self.logprobs(self.policy.model, batch) if steps > 1 else None  # (N, T) pre-update policy
        mask = batch.completion_mask * valid[:, None].float()  # (N, T)
        seq = self.sequence_inputs(batch, valid, rewards, v_star)
        metrics: dict[str, float] = {}
        if old is not None:
            metrics["rollout/logprob_mismatch"] = float(((old - batch.sampled_logprobs).abs() * batch.completion_mask).max())
        if self.critic is not None:
            if rewards is None:
                raise ValueError("the critic regresses on the rewards: pass rewards= to Learner.update")
            values = self.critic.values(batch) if values is None else values  # (N, T) pre-update values
            returns = self.critic.returns(batch, values, rewards, valid)  # (N, T) GAE targets
        bounds = self.mini_batch_bounds(batch)
        skipped = 0
        for _ in range(self.algo.ppo_epochs):
            for start, stop in zip(bounds[:-1], bounds[1:]):
                rows = slice(start, stop)
                m = self.optimizer_step(batch, advantages, mask, old, rows, seq)
                skipped += int(m.pop("loss/skipped"))
                if self.critic is not None:
                    m.update(self.critic.step(batch, torch.arange(len(batch))[rows], values, returns, mask))
                for k, v in m.items():
                    metrics.setdefault(k, v)  # first mini-batch's values (pre-update mismatch included)
        metrics["loss/skipped_steps"] = float(skipped)
        metrics["optim/lr"] = float(self.scheduler.get_last_lr()[0])
        return metrics

    def sequence_inputs(self, batch: RolloutBatch, valid: torch.Tensor, rewards: Optional[torch.Tensor], v_star: Optional[torch.Tensor]) -> dict[str, torch.Tensor]:
        """The per-sequence (N,) inputs the loss requires: rewards (0 where invalid), group_index, v_star."""
        seq: dict[str, torch.Tensor] = {}
        for name, value in (("rewards", rewards), ("v_star", v_star)):
            if name in self.requires:
                if value is None:
                    raise ValueError(f"loss {self.algo.loss!r} requires {name!r}: pass {name}= to Learner.update")
                seq[name] = torch.where(valid, value, torch.zeros_like(value)) if name == "rewards" else value
        if "groups" in self.requires:
            seq["group_index"] = batch.group_index
        return seq

    def mini_batch_bounds(self, batch: RolloutBatch) -> list[int]:
        """Row boundaries of exactly `mini_batches` mini-batches; at group boundaries when the loss
        requires "groups" (the rows of a group are contiguous in a RolloutBatch)."""
        n, parts = len(batch), self.algo.mini_batches
        if "groups" not in self.requires:
            return [round(i * n / parts) for i in range(parts + 1)]
        starts = group_starts(batch.group_index)
        groups = len(starts) - 1
        if groups < parts:
            raise ValueError(f"loss {self.algo.loss!r} needs whole groups per mini-batch, but {groups} groups cannot fill algorithm.mini_batches={parts}; lower mini_batches or raise train.prompts_per_step")
        return [starts[round(i * groups / parts)] for i in range(parts + 1)]

    def micro_batches(self, batch: RolloutBatch, rows: slice) -> list[torch.Tensor]:
        """Row indices of each micro-batch of the mini-batch `rows`: micro_batch_size rows each, or whole
        groups packed up to micro_batch_size rows when the loss requires "groups" (a group larger than
        micro_batch_size forms one micro-batch on its own)."""
        idx = torch.arange(len(batch))[rows]
        m = self.micro_batch_size
        if "groups" not in self.requires:
            return [idx[s: s + m] for s in range(0, len(idx), m)]
        starts = group_starts(batch.group_index[idx])
        spans, first = [], 0
        for a, b in zip(starts[:-1], starts[1:]):  # the group's rows are [a, b)
            if b - first > m and a > first:  # it would overflow the open micro-batch: close that one before it
                spans.append((first, a))
                first = a
        spans.append((first, starts[-1]))
        return [idx[a:b] for a, b in spans]

    def optimizer_step(self, batch: RolloutBatch, adv: torch.Tensor, mask: torch.Tensor, old: torch.Tensor | None, rows: slice, seq: Optional[dict[str, torch.Tensor]] = None) -> dict[str, float]:
        """One optimizer step on rows `rows`, accumulated over micro-batches; skipped on a NaN/inf loss."""
        seq = seq or {}
        num_tokens, num_seqs = float(mask[rows].sum()), float(mask[rows].shape[0])
        metrics: dict[str, float] = {}
        for sub in self.micro_batches(batch, rows):
            width = int(batch.attention_mask[sub].sum(-1).max())
            mb = MicroBatch(batch.input_ids[sub, :width], batch.attention_mask[sub, :width], mask[sub, :width], adv[sub, :width], None if old is None else old[sub, :width], batch.sampled_logprobs[sub, :width], batch.completion_mask[sub, :width], batch.group_index[sub], **{k: v[sub] for k, v in seq.items()})
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
        full = None
        if "full_logits" in self.requires:
            full = full_logprobs(self.policy.model, mb.input_ids, mb.attention_mask, self.temperature)  # (n, T, V)
            logp = full.gather(-1, mb.input_ids.unsqueeze(-1)).squeeze(-1)  # (n, T); 0 at t=0 like token_logprobs
        else:
            logp = self.token_logprobs(self.policy.model, mb.input_ids, mb.attention_mask, mb.completion_mask, mb.prompt_group)  # (n, T)
        with torch.no_grad():
            ref = self.token_logprobs(self.reference, mb.input_ids, mb.attention_mask, mb.completion_mask, mb.prompt_group) if self.reference is not None else None
            teacher = full_logprobs(self.teacher, mb.input_ids, mb.attention_mask, self.temperature) if self.teacher is not None else None
        old = mb.old_logprobs if mb.old_logprobs is not None else logp.detach()
        inp = LossInput(logprobs=logp, old_logprobs=old, advantages=mb.advantages, mask=mb.mask, num_tokens=num_tokens, num_seqs=num_seqs, norm_length=float(self.norm_length), ref_logprobs=ref, sampled_logprobs=mb.sampled_logprobs,
                        rewards=mb.rewards, group_index=mb.group_index, v_star=mb.v_star, logits=full, teacher_logprobs=teacher)
        loss, metrics = self.loss_fn(inp, self.algo)
        if self.algo.tis_cap is not None:  # the truncated importance weights the ratio-based losses applied
            metrics["loss/tis_weight_mean"] = float(masked_mean(tis_weight(inp, self.algo), mb.mask))
        mismatch = None if mb.old_logprobs is not None else float(((old - mb.sampled_logprobs).abs() * mb.completion_mask).max())
        return loss, metrics, mismatch

    def state_dict(self) -> dict:
        state = {"optimizer": self.optimizer.state_dict(), "scheduler": self.scheduler.state_dict()}
        if self.critic is not None:
            state["critic"] = self.critic.state_dict()
        return state

    def load_state_dict(self, state: dict) -> None:
        self.optimizer.load_state_dict(state["optimizer"])
        self.scheduler.load_state_dict(state["scheduler"])
        if self.critic is not None:
            if "critic" not in state:
                raise ValueError("the checkpoint has no critic state (it was written without the 'gae' advantage); resume with the advantage it was trained with")
            self.critic.load_state_dict(state["critic"])


def group_starts(group_index: torch.Tensor) -> list[int]:
    """Start row of each run of equal group ids, plus the end: [0, ..., N].

    >>> group_starts(torch.tensor([0, 0, 1, 1, 1, 2]))
    [0, 2, 5, 6]
    """
    n = len(group_index)
    change = (group_index[1:] != group_index[:-1]).nonzero().squeeze(-1) + 1
    return [0] + change.tolist() + [n] if n else [0]
