"""Explorers: how a group's completions are produced (plain sampling, parameter noise, prefixes of earlier
successes, replayed trajectories, branching...).

ONE construction signature, `EXPLORERS[name](ctx: ExplorerContext[, params]) -> Explorer`, and one
interface (`Explorer`): `collect(draw, generator) -> RolloutBatch` produces the round's groups for the prompts
a sampler drew; `observe(batch, rewards, valid)` sees every scored round (e.g. to keep successes);
`state_dict()` / `load_state_dict()` travel in the trainer state so a resumed run explores exactly as the
uninterrupted one. An explorer that samples from anything but the current policy must say so in the batch:
`RolloutBatch.sampled_logprobs` are the log-probs of the distribution that really produced each token (the
learner's truncated importance weight, `algorithm.tis_cap`, corrects for the difference), and tokens the
policy did not sample (a forced prefix) get `completion_mask` 0 so they never enter the loss.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from ascent.data.samplers import Draw
from ascent.registry import Registry
from ascent.rollout.types import RolloutBatch, SamplingSettings

EXPLORERS: Registry = Registry("explorer")


@dataclass
class ExplorerContext:
    """What an explorer is built from: the run's rollout stage and what it is made of."""

    collector: Any
    """The run's collector (`ascent.rollout.collector.Collector`): `collect(indices, generator[, samples])`."""
    policy: Any
    """The policy (`ascent.policy.model.Policy`: `.model`, `.tokenizer`)."""
    rows: list[dict[str, Any]]
    """The training rows."""
    encoder: Any
    """Prompt text -> token ids (`ascent.data.prompts.PromptEncoder`)."""
    engine: Any
    """The rollout engine (`generate(model, prompt_ids, n, settings, generator) -> Generation`)."""
    settings: SamplingSettings
    """The run's sampling settings."""
    samples_per_prompt: int
    """rollout.samples_per_prompt."""
    seed: int
    """The run seed."""


class Explorer:
    """The explorer interface (see the module docstring)."""

    def collect(self, draw: Draw, generator: torch.Generator) -> RolloutBatch:
        raise NotImplementedError

    def observe(self, batch: RolloutBatch, rewards: torch.Tensor, valid: torch.Tensor) -> None:
        """A scored round: `rewards` (N,), `valid` (N,) bool, aligned with `batch`'s rows."""

    def metrics(self) -> dict[str, float]:
        """explore/ metrics of the last round."""
        return {}

    def state_dict(self) -> dict[str, Any]:
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        pass


def collect_plain(collector: Any, draw: Draw, generator: torch.Generator) -> RolloutBatch:
    """The collector's batch for `draw` (a per-prompt group size needs a collector that takes `samples`)."""
    if draw.samples is None:
        return collector.collect(draw.indices, generator)
    return collector.collect(draw.indices, generator, draw.samples)


@EXPLORERS.register("plain")
class PlainExplorer(Explorer):
    """Sample every completion from the current policy at the run's temperature (the GRPO default)."""

    def __init__(self, ctx: ExplorerContext) -> None:
        self.collector = ctx.collector

    def collect(self, draw: Draw, generator: torch.Generator) -> RolloutBatch:
        return collect_plain(self.collector, draw, generator)
