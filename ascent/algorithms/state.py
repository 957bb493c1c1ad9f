"""The hook interface of pieces that carry state or need a stage of their own.

Most pieces are pure functions of their inputs. A few need more: A*-PO estimates V* once before RL, the GAE
estimator trains a critic next to the policy, distillation holds a frozen teacher. Such a piece registers a
`PieceState` subclass (`LOSSES.register("a_star_po", params=..., state=AStarState)`); the trainer makes one
per run, `state_cls(params, services)`, and calls the hooks below at fixed points of every step. The trainer
never names a technique: it only calls these hooks, in order, on every state its configured pieces declare.

    prepare()                                  once, before the first step (skipped when resumed with state)
    advantage_extras(batch)                    -> AdvantageInput.extras entries, e.g. {"values": (N, T)}
    sequence_inputs(batch)                     -> per-sequence LossInput fields, e.g. {"v_star": (N,)}
    begin_update(batch, rewards, valid, mask)  before the rollout batch's optimizer steps
    token_inputs(input_ids, attention_mask)    -> per-micro-batch LossInput fields, no grad
    after_optimizer_step(batch, rows, mask)    -> metrics, after each policy optimizer step
    state_dict() / load_state_dict(state)      travel in the trainer state (exact resume)

The hooks reach the run only through `Services` (what the trainer offers), so a piece's state depends on
torch and on nothing above `ascent.algorithms`.
"""

from __future__ import annotations

from typing import Any, Optional, Protocol

import torch


class Services(Protocol):
    """What the trainer offers a piece's state."""

    policy_model: torch.nn.Module
    """The policy being trained."""
    micro_batch_size: int
    """Sequences per forward/backward."""
    seed: int
    """The run seed."""

    def reference(self) -> torch.nn.Module:
        """The frozen reference policy (a copy of the policy at the start of RL)."""
        ...

    def num_rows(self) -> int:
        """Training rows (prompts) of the task."""
        ...

    def sample_and_score(
        self, model: torch.nn.Module, rows: list[int], k: int, seed: int
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """(rewards, valid), (len(rows), k) each: `k` completions per training row from `model` with the run's
        sampling settings and its own generator seeded by `seed`, scored by the run's rewards."""
        ...

    def value_model(self) -> torch.nn.Module:
        """A fresh value model: a copy of the policy's trunk with a scalar head, `(ids, mask) -> (n, T)`."""
        ...

    def optimizer(self, module: torch.nn.Module, lr: Optional[float] = None) -> tuple[Any, Any]:
        """(AdamW, schedule) for `module` with the run's optimizer settings and step count (lr: override)."""
        ...

    def clip_and_step(self, module: torch.nn.Module, optimizer: Any, scheduler: Any) -> tuple[float, bool]:
        """Clip the gradient norm as the run does, step (skipped on a non-finite norm): (norm, stepped)."""
        ...

    def load_frozen(self, path: str) -> torch.nn.Module:
        """A frozen model from a checkpoint folder or a run directory, checked to share the policy's tokenizer."""
        ...

    def full_logprobs(
        self, model: torch.nn.Module, input_ids: torch.Tensor, attention_mask: torch.Tensor
    ) -> torch.Tensor:
        """(n, T, V) full-vocabulary log-softmax of `model`, aligned with the learner's token log-probs."""
        ...

    def token_logprobs(
        self, model: torch.nn.Module, input_ids: torch.Tensor, attention_mask: torch.Tensor
    ) -> torch.Tensor:
        """(n, T) log p(x_t | x_<t) under `model` at the learner's temperature (0 at position 0)."""
        ...

    tokenizer: Any
    """The policy's tokenizer (text <-> ids), for pieces that place text in a sequence (SERL's feedback)."""


class PieceState:
    """A piece's state: every hook does nothing by default (see the module docstring for the order)."""

    def __init__(self, params: Any, services: Services) -> None:
        self.params, self.services = params, services

    def prepare(self) -> None:
        """Once before the first step; not again after a resume that restored this state."""

    def advantage_extras(self, batch: Any) -> dict[str, torch.Tensor]:
        """Entries for `AdvantageInput.extras` of this rollout batch."""
        return {}

    def sequence_inputs(self, batch: Any) -> dict[str, torch.Tensor]:
        """Per-sequence (N,) or token-aligned (N, T) `LossInput` fields for this rollout batch (sliced per
        micro-batch, and a (N, T) one trimmed to the micro-batch's width, by the learner)."""
        return {}

    def begin_update(self, batch: Any, rewards: torch.Tensor, valid: torch.Tensor, mask: torch.Tensor) -> None:
        """Before the optimizer steps on this rollout batch. mask: (N, T) tokens in the loss."""

    def token_inputs(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> dict[str, torch.Tensor]:
        """`LossInput` fields of one micro-batch (computed without grad)."""
        return {}

    def after_optimizer_step(self, batch: Any, rows: torch.Tensor, mask: torch.Tensor) -> dict[str, float]:
        """After each policy optimizer step on rows `rows` (long indices); returns metrics."""
        return {}

    def state_dict(self) -> dict[str, Any]:
        """What a resume needs; empty when nothing."""
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore `state_dict()`."""
