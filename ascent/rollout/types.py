"""Records that flow out of the rollout stage."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

import torch


@dataclass(frozen=True)
class SamplingSettings:
    """What the engine needs to sample (no model config, no trainer state)."""

    max_new_tokens: int
    eos_id: int
    pad_id: int
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    ignore_eos: bool = False
    """Keep sampling after EOS (fixed-length benchmarks); EOS is then an ordinary token."""


@dataclass
class Generation:
    """Raw engine output for N = prompts x samples sequences, in prompt-major order (prompt p's samples
    are rows p*n .. p*n+n-1)."""

    tokens: torch.Tensor
    """(N, max_new) long: sampled ids, pad after the end."""
    logprobs: torch.Tensor
    """(N, max_new) float32: log-prob of each sampled token at sampling time (temperature-scaled)."""
    lengths: torch.Tensor
    """(N,) long: sampled tokens per sequence (EOS included)."""
    finished: torch.Tensor
    """(N,) bool: the sequence ended with EOS (False: cut at max_new_tokens)."""


@dataclass
class RolloutBatch:
    """Prompts + completions, right-padded, with everything the later stages need. N sequences, T positions."""

    input_ids: torch.Tensor
    """(N, T) long: prompt then completion, right-padded."""
    attention_mask: torch.Tensor
    """(N, T) long: 1 on real tokens."""
    completion_mask: torch.Tensor
    """(N, T) float: 1 on sampled tokens (these and only these enter the loss)."""
    sampled_logprobs: torch.Tensor
    """(N, T) float32: sampling-time log-probs, aligned with input_ids; 0 off the completion."""
    group_index: torch.Tensor
    """(N,) long: the prompt each sequence answers (0..P-1)."""
    finished: torch.Tensor
    """(N,) bool: ended with EOS."""
    prompts: list[str]
    """(N) prompt text per sequence."""
    completions: list[str]
    """(N) decoded completion per sequence (special tokens removed)."""
    fields: list[dict[str, Any]]
    """(N) the dataset row's other fields per sequence (they reach reward functions)."""
    policy_version: int = 0
    """Learner step whose weights produced this batch."""
    stats: dict[str, float] = field(default_factory=dict)
    """Timing and token counts (rollout/ namespace)."""
    row_index: Optional[torch.Tensor] = None
    """(N,) long: index of each sequence's training row in the dataset (None where the rows are not
    training rows, e.g. evaluation); A*-PO looks up its per-row V* with it."""
    extras: dict[str, torch.Tensor] = field(default_factory=dict)
    """Per-sequence tensors (N, ...) for the advantage estimators (merged into `AdvantageInput.extras`),
    e.g. the turn structure of agent batches (`ascent.agents.collector.turn_extras`). An extra whose
    second dimension is T (the batch's width) is token-aligned: `select` trims it with the ids. Padding
    (`concat_batches`): `extra_pad` by dtype, float NaN, integer -1, bool False."""

    def __len__(self) -> int:
        return int(self.input_ids.shape[0])

    def reward_fields(self) -> list[dict[str, Any]]:
        """(N) what a reward function receives besides prompts and completions: the row's fields plus
        per-sample `completion_tokens` (int), `completion_logprob` (mean sampled log-prob per token),
        `finished` (ended with EOS) and `group` (index of the sample's prompt in this batch)."""
        lengths = self.completion_mask.sum(-1)  # (N,)
        mean_lp = (self.sampled_logprobs * self.completion_mask).sum(-1) / lengths.clamp(min=1.0)
        return [
            {**f, "completion_tokens": int(n), "completion_logprob": float(lp), "finished": bool(fin), "group": int(g)}
            for f, n, lp, fin, g in zip(
                self.fields, lengths.tolist(), mean_lp.tolist(), self.finished.tolist(), self.group_index.tolist()
            )
        ]

    def select(self, idx: torch.Tensor) -> "RolloutBatch":
        """The sub-batch of rows `idx` (1-D long), trimmed to its longest sequence."""
        width = int(self.attention_mask[idx].sum(-1).max()) if len(idx) else 1
        pick = lambda xs: [xs[int(i)] for i in idx]  # noqa: E731
        return RolloutBatch(
            input_ids=self.input_ids[idx, :width],
            attention_mask=self.attention_mask[idx, :width],
            completion_mask=self.completion_mask[idx, :width],
            sampled_logprobs=self.sampled_logprobs[idx, :width],
            group_index=self.group_index[idx],
            finished=self.finished[idx],
            prompts=pick(self.prompts),
            completions=pick(self.completions),
            fields=pick(self.fields),
            policy_version=self.policy_version,
            stats=dict(self.stats),
            row_index=None if self.row_index is None else self.row_index[idx],
            extras={k: select_extra(v, idx, self.input_ids.shape[1], width) for k, v in self.extras.items()},
        )


def extra_pad(x: torch.Tensor) -> float | int | bool:
    """Padding value of an extra: NaN for floats ("no value"), -1 for integers ("no turn"), False for bools."""
    if x.dtype == torch.bool:
        return False
    return float("nan") if x.is_floating_point() else -1


def select_extra(x: torch.Tensor, idx: torch.Tensor, width: int, new_width: int) -> torch.Tensor:
    """Rows `idx` of an extra; a token-aligned one ((N, T, ...) with T == `width`) is trimmed to `new_width`."""
    x = x[idx]
    return x[:, :new_width] if x.dim() >= 2 and x.shape[1] == width else x
