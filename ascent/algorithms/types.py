"""Typed inputs of the algorithm registries: one record per kind, so every estimator and every loss has
one signature."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

import torch


@dataclass
class AdvantageInput:
    """What an advantage estimator sees. N sequences, T token positions (prompt + completion)."""

    rewards: torch.Tensor
    """(N,) scalar reward per sequence; NaN where the reward failed."""
    valid: torch.Tensor
    """(N,) bool: the reward is usable. Invalid samples get zero advantage."""
    group_index: torch.Tensor
    """(N,) long: which prompt (group) each sequence answers."""
    mask: torch.Tensor
    """(N, T) float: 1 on sampled completion tokens."""
    extras: dict[str, torch.Tensor] = field(default_factory=dict)
    """Optional per-estimator inputs (values, reward components, task ids, ...)."""


@dataclass
class LossInput:
    """What a policy loss sees; every (N, T) tensor is aligned to token positions."""

    logprobs: torch.Tensor
    """(N, T) log-probs of the taken tokens under the current policy (with grad)."""
    old_logprobs: torch.Tensor
    """(N, T) log-probs under the policy that the ratio is taken against (no grad)."""
    advantages: torch.Tensor
    """(N, T) per-token advantages."""
    mask: torch.Tensor
    """(N, T) float: 1 on tokens that enter the loss."""
    num_tokens: float
    """Tokens in the whole mini-batch (the normaliser, so micro-batching does not change the loss)."""
    num_seqs: float
    """Sequences in the whole mini-batch."""
    norm_length: float
    """Constant length for seq-mean-token-sum-norm."""
    ref_logprobs: Optional[torch.Tensor] = None
    """(N, T) log-probs under the frozen reference (KL penalty), if any."""
    sampled_logprobs: Optional[torch.Tensor] = None
    """(N, T) log-probs recorded by the rollout engine at sampling time."""
    rewards: Optional[torch.Tensor] = None
    """(N,) sequence rewards (0 where the reward failed; those rows have an all-zero `mask`). Losses that
    declare `requires` "rewards" get it."""
    group_index: Optional[torch.Tensor] = None
    """(N,) long: the prompt (group) of each sequence. With "groups" required, every micro-batch holds whole
    groups, so pairwise / group-mean terms see all of a group's sequences."""
    v_star: Optional[torch.Tensor] = None
    """(N,) A*-PO's estimate of the optimal value V*(x) of each sequence's prompt ("v_star")."""
    logits: Optional[torch.Tensor] = None
    """(N, T, V) full-vocabulary log-softmax of the current policy, with grad ("full_logits"); position t is
    the distribution of token t given the tokens before it (aligned like `logprobs`; position 0 is 0)."""
    teacher_logprobs: Optional[torch.Tensor] = None
    """(N, T, V) full-vocabulary log-softmax of the frozen teacher, aligned like `logits` ("teacher")."""
    teacher_token_logprobs: Optional[torch.Tensor] = None
    """(N, T) a teacher's log-probs of the sampled tokens (EDGE: the policy conditioned on an experience)."""
    distil_rows: Optional[torch.Tensor] = None
    """(N,) float: 1 on the rows a distillation term applies to (EDGE: experience-free rows of admitted groups)."""
