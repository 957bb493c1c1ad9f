"""Supervised fine-tuning on a teacher's demonstrations: the warm start and the continued-imitation control.

The loss is the token-mean negative log-likelihood of the demonstration's imitated tokens (its
completion_mask: a single-turn completion with its EOS, or an agent's sampled turns without the
observations between them), through the same `aggregate` as the policy losses.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any, Callable, Optional

import torch

from ascent.algorithms.aggregate import aggregate
from ascent.config.schema import OptimConfig
from ascent.data.prompts import PromptEncoder
from ascent.data.sampler import RowSampler
from ascent.policy.model import Policy, token_logprobs
from ascent.rollout.batch import assemble
from ascent.rollout.types import Generation, RolloutBatch
from ascent.tasks.base import Teacher
from ascent.trainer.action_aware import action_weights
from ascent.trainer.checkpoint import rng_state, set_rng_state
from ascent.trainer.optim import clip_and_step, make_optimizer, make_scheduler


def forced_batch(
    prompts: list[str], prompt_ids: list[list[int]], completions: list[list[int]], tokenizer
) -> RolloutBatch:
    """Prompts + given completion token ids as a RolloutBatch, as if sampled (completion_mask marks them all)."""
    width = max(len(c) for c in completions)
    tokens = torch.full((len(prompts), width), tokenizer.pad_token_id or 0, dtype=torch.long)
    for i, c in enumerate(completions):
        tokens[i, : len(c)] = torch.tensor(c)
    gen = Generation(
        tokens=tokens,
        logprobs=torch.zeros(tokens.shape),
        lengths=torch.tensor([len(c) for c in completions]),
        finished=torch.ones(len(prompts), dtype=torch.bool),
    )
    return assemble(prompts, prompt_ids, [{} for _ in prompts], gen, 1, tokenizer)


def demonstration_batch(
    rows: list[dict[str, Any]], teacher: Teacher, encoder: PromptEncoder, rng: random.Random, tokenizer
) -> RolloutBatch:
    """Prompts + the teacher's completions as a RolloutBatch (completion_mask marks the imitated tokens)."""
    prompt_ids = [encoder(r["prompt"]) for r in rows]
    completions = [encoder.completion(teacher(r, rng)) for r in rows]
    return forced_batch([r["prompt"] for r in rows], prompt_ids, completions, tokenizer)


Demonstrations = Callable[[list[dict[str, Any]], random.Random], RolloutBatch]
"""(rows, rng) -> a batch of demonstrations whose completion_mask marks the imitated tokens."""


def single_turn_demonstrations(teacher: Teacher, encoder: PromptEncoder, tokenizer) -> Demonstrations:
    """The teacher's completion of each row's prompt (`demonstration_batch`)."""
    return lambda rows, rng: demonstration_batch(rows, teacher, encoder, rng, tokenizer)


def nll_loss(
    policy: Policy, batch: RolloutBatch, micro_batch_size: int, weights: Optional[torch.Tensor] = None
) -> tuple[float, bool]:
    """Backward of the token-mean NLL over the batch, in micro-batches of rows of similar lengths, each
    trimmed to its longest row (agent trajectories vary a lot in length). `weights` (N, T): per-token weights of
    the NLL (GUI-Libra's action-aware SFT, `ascent.trainer.action_aware`); the mean still divides by the imitated
    tokens. Returns (loss, finite)."""
    num_tokens = float(batch.completion_mask.sum())
    lengths = batch.attention_mask.sum(-1)  # (N,)
    order = torch.argsort(lengths, descending=True, stable=True)
    total = 0.0
    for i in range(0, len(batch), micro_batch_size):
        sl = order[i : i + micro_batch_size]
        width = int(lengths[sl].max())
        dev = policy.device
        logp = token_logprobs(
            policy.model, batch.input_ids[sl, :width].to(dev), batch.attention_mask[sl, :width].to(dev)
        )  # (n, width)
        nll = -logp if weights is None else -logp * weights[sl, :width].to(dev)
        loss = aggregate(nll, batch.completion_mask[sl, :width].to(dev), "token-mean", num_tokens=num_tokens)
        if not torch.isfinite(loss):
            return float("nan"), False
        loss.backward()
        total += float(loss.detach())
    return total, True


@dataclass
class SFTRun:
    """A supervised phase: `steps` optimizer steps of `batch_size` demonstrations."""

    policy: Policy
    rows: list[dict[str, Any]]
    demos: Demonstrations
    """Makes each step's batch (single-turn teacher completions, or agent trajectories with observations masked)."""
    optim: OptimConfig
    steps: int
    batch_size: int
    micro_batch_size: int
    seed: int
    action_weight: float = 1.0
    """GUI-Libra's action-aware SFT: imitated tokens inside action spans weigh this much (1: plain SFT)."""

    def run(
        self,
        on_step: Callable[[int, dict[str, float]], None],
        evaluate: Optional[Callable[[], dict[str, float]]] = None,
        eval_every: int = 0,
        state: Optional[dict[str, Any]] = None,
    ) -> None:
        """Train; call on_step(step, metrics) after each step (with eval/ metrics every `eval_every`). `state`:
        a `state_dict()` taken after some step, to continue from it exactly (row order, the teacher's random
        draws, optimizer and schedule, global RNGs)."""
        sampler, rng = RowSampler(len(self.rows), self.seed), random.Random(self.seed)
        optimizer = make_optimizer(self.policy.model, self.optim)
        scheduler = make_scheduler(optimizer, self.optim, self.steps)
        self.step_count = 0
        if state is not None:
            sampler.load_state_dict(state["sampler"])
            rng.setstate(state["rng"])
            optimizer.load_state_dict(state["optimizer"])
            scheduler.load_state_dict(state["scheduler"])
            set_rng_state(state["global_rng"])
            self.step_count = state["step"]
        self._live = (sampler, rng, optimizer, scheduler)
        for step in range(self.step_count + 1, self.steps + 1):
            self.policy.model.train()
            batch = self.demos([self.rows[i] for i in sampler.next(self.batch_size)], rng)
            weights = (
                None if self.action_weight == 1.0 else action_weights(batch, self.policy.tokenizer, self.action_weight)
            )
            loss, finite = nll_loss(self.policy, batch, self.micro_batch_size, weights)
            if not finite:
                optimizer.zero_grad(set_to_none=True)
            lr = scheduler.get_last_lr()[0]
            norm, stepped = (
                clip_and_step(self.policy.model, optimizer, scheduler, self.optim.grad_clip)
                if finite
                else (float("nan"), False)
            )
            self.step_count = step
            metrics = {"loss/nll": loss, "loss/grad_norm": norm, "optim/lr": lr, "loss/skipped": float(not stepped)}
            if evaluate is not None and eval_every and (step % eval_every == 0 or step == self.steps):
                metrics.update({f"eval/{k}": v for k, v in evaluate().items()})
            on_step(step, metrics)

    def state_dict(self) -> dict[str, Any]:
        """What `run(state=...)` continues from: the step taken last and everything the next one draws from
        (call it from `on_step`)."""
        sampler, rng, optimizer, scheduler = self._live
        return {
            "step": self.step_count,
            "sampler": sampler.state_dict(),
            "rng": rng.getstate(),
            "optimizer": optimizer.state_dict(),
            "scheduler": scheduler.state_dict(),
            "global_rng": rng_state(),
        }
