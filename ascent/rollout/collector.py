"""Collectors: the rollout stage of an RL step as one swappable piece, `collect(indices, generator) ->
RolloutBatch`.

`SingleTurnCollector` samples `n` completions per prompt with a rollout engine (the GRPO-family path);
`ascent.agents.collector.AgentCollector` runs multi-turn episodes through environments and packs them.
The trainer only ever calls `collect`, so it never branches on the kind of task.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional, Protocol

import torch

from ascent.data.prompts import PromptEncoder
from ascent.rollout.batch import assemble, concat_batches
from ascent.rollout.engine import RolloutEngine
from ascent.rollout.types import RolloutBatch, SamplingSettings


class Collector(Protocol):
    """The rollout stage: a scored-to-be batch for the training rows `indices`, sampled with `generator`
    (the trainer's, checkpointed with it). The batch's `row_index` holds the rows' indices and its
    groups are the rows (group g = indices[g])."""

    def collect(self, indices: list[int], generator: torch.Generator) -> RolloutBatch: ...


class VariableGroups(Protocol):
    """A collector that can give each prompt its own group size (`samples[g]` completions for indices[g])."""

    def collect(
        self, indices: list[int], generator: torch.Generator, samples: Optional[list[int]] = None
    ) -> RolloutBatch: ...


@dataclass
class SingleTurnCollector:
    """`n` sampled completions per prompt, one engine call."""

    policy: Any
    rows: list[dict[str, Any]]
    encoder: PromptEncoder
    engine: RolloutEngine
    settings: SamplingSettings
    n: int
    """Samples per prompt (rollout.samples_per_prompt)."""

    def collect(
        self, indices: list[int], generator: torch.Generator, samples: Optional[list[int]] = None
    ) -> RolloutBatch:
        """`n` completions for each row of `indices`; `samples`: a group size per row instead (one engine call
        per distinct size, in order of first appearance; the groups of a size keep their relative order)."""
        if samples is None or all(s == self.n for s in samples):
            return self.sample(indices, self.n, generator)
        sizes = list(dict.fromkeys(samples))
        return concat_batches(
            [self.sample([i for i, s in zip(indices, samples) if s == n], n, generator) for n in sizes]
        )

    def sample(self, indices: list[int], n: int, generator: torch.Generator) -> RolloutBatch:
        rows = [self.rows[i] for i in indices]
        ids = [self.encoder(r["prompt"]) for r in rows]
        self.policy.model.eval()
        gen = self.engine.generate(self.policy.model, ids, n, self.settings, generator)
        fields = [{k: v for k, v in r.items() if k != "prompt"} for r in rows]
        return assemble([r["prompt"] for r in rows], ids, fields, gen, n, self.policy.tokenizer, row_indices=indices)
