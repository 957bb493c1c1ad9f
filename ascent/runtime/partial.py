"""Interruptible (partial) rollouts: a batch sampled in segments, each under the policy version current
when the segment starts (`ray.partial_rollout_tokens`).

Kimi k1.5 (Kimi Team, 2025, "partial rollouts": a fixed per-iteration token budget, unfinished
trajectories saved and continued in the next iteration) and APRIL (Zhou et al., 2025, "Active Partial
Rollouts": long-tail generations interrupted and resumed under newer weights) cut the long tail of
generation into pieces. Here a segment samples at most `cap` new tokens per open sequence; sequences that
end (EOS or `max_new_tokens`) are frozen, the others are continued by the next segment from their exact
ids (prompt ids + the ids sampled so far: no detokenisation, no re-tokenisation; the prefix is prefilled
again under the new weights). Every token keeps the log-prob it was sampled with and the version that
sampled it, so the learner's truncated importance weights stay exact per token.

Determinism: the first segment draws exactly the uniforms a one-piece rollout would draw for its first
`cap` positions (the engines pre-draw one uniform per (position, sequence)); later segments use their own
generator, seeded by the trainer from the run seed, the request id and the segment index. Which version
samples which segment is fixed by the schedule (`AsyncTrainer`), so the tokens do not depend on timing.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Optional

import torch

from ascent.rollout.batch import assemble
from ascent.rollout.collector import SingleTurnCollector
from ascent.rollout.types import Generation, RolloutBatch


@dataclass
class Carry:
    """A batch being sampled over several policy versions: N = P prompts x n sequences, prompt-major."""

    indices: list[int]
    """Training rows (prompts) of the batch."""
    prompt_ids: list[list[int]]
    """(P) the prompts' token ids."""
    tokens: list[list[int]] = field(default_factory=list)
    """(N) ids sampled so far per sequence."""
    logprobs: list[list[float]] = field(default_factory=list)
    """(N) sampling-time log-prob of each of those ids."""
    versions: list[list[int]] = field(default_factory=list)
    """(N) policy version that sampled each of those ids."""
    finished: list[bool] = field(default_factory=list)
    """(N) ended with EOS."""
    segments: int = 0
    """Segments run so far (engine calls)."""
    rollout_s: float = 0.0
    """Seconds spent sampling, all segments together."""

    def open(self, max_new: int) -> list[int]:
        """Sequences still sampling: no EOS yet and fewer than `max_new` tokens."""
        return [i for i, (t, f) in enumerate(zip(self.tokens, self.finished)) if not f and len(t) < max_new]


def start(collector: SingleTurnCollector, indices: list[int]) -> Carry:
    """An empty carry for the training rows `indices` (n empty sequences per prompt)."""
    prompt_ids = [collector.encoder(collector.rows[i]["prompt"]) for i in indices]
    total = len(indices) * collector.n
    return Carry(
        list(indices),
        prompt_ids,
        [[] for _ in range(total)],
        [[] for _ in range(total)],
        [[] for _ in range(total)],
        [False] * total,
    )


def sample_segment(
    collector: SingleTurnCollector, carry: Carry, generator: torch.Generator, version: int, cap: Optional[int]
) -> Carry:
    """Continue every open sequence of `carry` by at most `cap` tokens (None: to the end) with the
    collector's policy (holding `version`'s weights). Returns a new carry; the input is not changed."""
    s, n = collector.settings, collector.n
    out = replace(
        carry,
        tokens=[list(t) for t in carry.tokens],
        logprobs=[list(x) for x in carry.logprobs],
        versions=[list(v) for v in carry.versions],
        finished=list(carry.finished),
        segments=carry.segments + 1,
    )
    todo = out.open(s.max_new_tokens)
    if not todo:
        return out
    room = [s.max_new_tokens - len(out.tokens[i]) for i in todo]
    steps = max(room) if cap is None else min(cap, max(room))
    collector.policy.model.eval()
    if out.segments == 1:  # first segment: the grouped call (shared prefill) a one-piece rollout makes
        gen = collector.engine.generate(
            collector.policy.model, out.prompt_ids, n, replace(s, max_new_tokens=steps), generator
        )
    else:  # continuations: one sequence per "prompt", the prompt's ids followed by its own sampled ids
        ids = [out.prompt_ids[i // n] + out.tokens[i] for i in todo]
        gen = collector.engine.generate(collector.policy.model, ids, 1, replace(s, max_new_tokens=steps), generator)
    for row, (i, r) in enumerate(zip(todo, room)):
        k = min(int(gen.lengths[row]), r)  # (k,) new tokens of sequence i
        out.tokens[i] += gen.tokens[row, :k].tolist()
        out.logprobs[i] += gen.logprobs[row, :k].tolist()
        out.versions[i] += [version] * k
        out.finished[i] = bool(gen.finished[row]) and k == int(gen.lengths[row])
    return out


def to_batch(collector: SingleTurnCollector, carry: Carry) -> tuple[RolloutBatch, torch.Tensor]:
    """The finished carry as a `RolloutBatch` (stamped with its oldest version) and the per-token
    versions (N, T) long aligned with `input_ids` (-1 off the completion)."""
    s, n = collector.settings, collector.n
    total, width = len(carry.tokens), max(1, max(len(t) for t in carry.tokens))
    gen = Generation(
        torch.full((total, width), s.pad_id, dtype=torch.long),
        torch.zeros((total, width)),
        torch.tensor([len(t) for t in carry.tokens], dtype=torch.long),
        torch.tensor(carry.finished, dtype=torch.bool),
    )
    for i, (t, lp) in enumerate(zip(carry.tokens, carry.logprobs)):
        gen.tokens[i, : len(t)] = torch.tensor(t, dtype=torch.long)
        gen.logprobs[i, : len(lp)] = torch.tensor(lp, dtype=torch.float32)
    rows = [collector.rows[i] for i in carry.indices]
    fields = [{k: v for k, v in r.items() if k != "prompt"} for r in rows]
    batch = assemble(
        [r["prompt"] for r in rows],
        carry.prompt_ids,
        fields,
        gen,
        n,
        collector.policy.tokenizer,
        row_indices=carry.indices,
    )
    versions = torch.full(batch.input_ids.shape, -1, dtype=torch.long)  # (N, T)
    for i, v in enumerate(carry.versions):
        start_col = len(carry.prompt_ids[i // n])
        versions[i, start_col : start_col + len(v)] = torch.tensor(v, dtype=torch.long)
    batch.policy_version = min((min(v) for v in carry.versions if v), default=0)
    return batch, versions


def version_stats(token_versions: torch.Tensor, learner_version: int) -> dict[str, float]:
    """async/versions_per_sample_mean (distinct versions per sequence), async/token_staleness_mean
    (learner version minus each completion token's sampling version) of a (N, T) version map.

    >>> v = torch.tensor([[-1, 3, 3, 4], [-1, 4, -1, -1]])
    >>> version_stats(v, 5)
    {'async/versions_per_sample_mean': 1.5, 'async/token_staleness_mean': 1.5}
    """
    sampled = token_versions >= 0  # (N, T)
    distinct = [len(set(row[m].tolist())) for row, m in zip(token_versions, sampled)]
    stale = (learner_version - token_versions)[sampled].float()
    return {
        "async/versions_per_sample_mean": sum(distinct) / max(len(distinct), 1),
        "async/token_staleness_mean": float(stale.mean()) if len(stale) else 0.0,
    }


def supports_partial(collector: Any) -> bool:
    """Partial rollouts continue single-turn sequences (agent episodes interleave environment turns)."""
    return isinstance(collector, SingleTurnCollector)
