"""What the trainer offers the pieces' states (`ascent.algorithms.state.Services`): the policy and its frozen
reference, sampling and scoring training rows with the run's engine and rewards, new models and optimizers
with the run's settings. A piece's state reaches the run only through these."""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Optional

import torch

from ascent.config.schema import RunConfig
from ascent.policy.model import ValueModel, full_logprobs, token_logprobs
from ascent.rollout.batch import assemble
from ascent.trainer.frozen import load_frozen_model
from ascent.trainer.optim import clip_and_step, make_optimizer, make_scheduler


class RunServices:
    """`Services` of one RL run; `learner` is set once the learner exists (it owns the reference)."""

    def __init__(self, cfg: RunConfig, parts: Any, learner: Any, total_optimizer_steps: int) -> None:
        self.cfg, self.parts, self.learner, self.total_optimizer_steps = cfg, parts, learner, total_optimizer_steps
        self.policy_model = parts.policy.model
        self.micro_batch_size = cfg.train.micro_batch_size
        self.seed = cfg.seed
        self.tokenizer = parts.policy.tokenizer

    def reference(self) -> torch.nn.Module:
        return self.learner.standalone_reference()

    def num_rows(self) -> int:
        return len(self.parts.rows)

    @torch.no_grad()
    def sample_and_score(
        self, model: torch.nn.Module, rows: list[int], k: int, generator: torch.Generator
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """(rewards, valid), (len(rows), k) each, eval.batch_size prompts at a time, one generator throughout."""
        parts, chunk = self.parts, self.cfg.eval.batch_size
        model.eval()
        rewards, valid = [], []
        for start in range(0, len(rows), chunk):
            indices = rows[start : start + chunk]
            data = [parts.rows[i] for i in indices]
            ids = [parts.encoder(r["prompt"]) for r in data]
            gen = parts.engine.generate(model, ids, k, parts.settings, generator)
            fields = [{key: v for key, v in r.items() if key != "prompt"} for r in data]
            batch = assemble(
                [r["prompt"] for r in data], ids, fields, gen, k, parts.policy.tokenizer, row_indices=indices
            )
            scores = parts.rewards.score(batch.prompts, batch.completions, batch.reward_fields())
            rewards.append(scores.rewards.reshape(len(indices), k))
            valid.append(scores.valid.reshape(len(indices), k))
        return torch.cat(rewards), torch.cat(valid)

    def value_model(self) -> torch.nn.Module:
        return ValueModel.from_policy(self.policy_model)

    def optimizer(self, module: torch.nn.Module, lr: Optional[float] = None) -> tuple[Any, Any]:
        optim = replace(self.cfg.train.optim, lr=lr if lr is not None else self.cfg.train.optim.lr)
        optimizer = make_optimizer(module, optim)
        return optimizer, make_scheduler(optimizer, optim, self.total_optimizer_steps)

    def clip_and_step(self, module: torch.nn.Module, optimizer: Any, scheduler: Any) -> tuple[float, bool]:
        return clip_and_step(module, optimizer, scheduler, self.cfg.train.optim.grad_clip)

    def load_frozen(self, path: str) -> torch.nn.Module:
        return load_frozen_model(path, self.parts.policy)

    def full_logprobs(
        self, model: torch.nn.Module, input_ids: torch.Tensor, attention_mask: torch.Tensor
    ) -> torch.Tensor:
        return full_logprobs(model, input_ids, attention_mask, self.learner.temperature)

    def token_logprobs(
        self, model: torch.nn.Module, input_ids: torch.Tensor, attention_mask: torch.Tensor
    ) -> torch.Tensor:
        return token_logprobs(model, input_ids, attention_mask, self.learner.temperature)
