"""Sample logs: what the policy wrote and what the rewards made of it.

Every `logging.samples_every` steps, `SampleLogger` appends the first `logging.samples_groups` groups of the
step's batch to `run_dir/samples.jsonl`, one JSON line per sample:

    {"phase", "step", "group", "sample", "prompt", "completion", "completion_tokens", "finished",
     "reward" (the weighted sum; null where invalid), "rewards" ({reward name: value or null}), "valid",
     "advantage" (mean over the completion's tokens), "fields" (the dataset row's other fields, without the
     hidden ones, HIDDEN_FIELDS, unless `logging.samples_hidden`; their names are listed under "hidden_fields"),
     "agent" (agent tasks: {"finish_reason", "reward", "turns": [{"text", "observation", "info"}]})}

Bounded: past `logging.samples_max_mb` the file is renamed to `samples.1.jsonl` (replacing the one before)
and a new one begun, so the logs never take more than twice that. Resumable: a resumed run drops the
lines past its checkpoint (`truncate_after`), as metrics.jsonl does, then writes them again.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

import torch

from ascent.logging import jsonsafe
from ascent.rewards.runner import RewardResult
from ascent.rollout.types import RolloutBatch

HIDDEN_FIELDS = ("tests", "solution")
"""Row fields that grade completions (a code task's hidden unit tests and reference solution): left out of the
log unless asked for, so the log does not carry the answers."""
AGENT_KEYS = ("agent_turn_texts", "agent_observation_texts", "agent_turn_infos", "agent_finish_reason", "agent_reward")


@dataclass
class StepSamples:
    """One RL step's scored batch, as the trainer used it."""

    batch: RolloutBatch
    scores: RewardResult
    advantages: torch.Tensor
    """(N, T) the advantages the learner trained on."""


class SampleLogger:
    """Appends sample lines to run_dir/samples.jsonl (see the module docstring)."""

    def __init__(
        self, run_dir: Path, every: int, groups: int, max_mb: float, reward_names: list[str], hidden: bool = False
    ) -> None:
        self.path = Path(run_dir) / "samples.jsonl"
        self.old = Path(run_dir) / "samples.1.jsonl"
        self.every, self.groups, self.max_bytes = every, groups, int(max_mb * 2**20)
        self.reward_names = list(reward_names)
        self.hidden = hidden

    def due(self, step: int) -> bool:
        return self.every > 0 and step % self.every == 0

    def log(self, phase: str, step: int, record: Optional[StepSamples]) -> int:
        """Write the step's sample lines (none when `record` is None); returns how many."""
        if record is None:
            return 0
        lines = [
            jsonsafe.dumps(row) for row in sample_rows(phase, step, record, self.reward_names, self.groups, self.hidden)
        ]
        if self.path.exists() and self.path.stat().st_size > self.max_bytes:
            self.path.replace(self.old)
        with open(self.path, "a") as fh:
            fh.write("".join(line + "\n" for line in lines))
        return len(lines)

    def truncate_after(self, phase: str, step: int) -> None:
        """Drop lines of `phase` past `step` from both files (a resumed run writes them again)."""
        for path in (self.old, self.path):
            if path.exists():
                keep = [
                    line for line in path.read_text().splitlines() if line.strip() and not _after(line, phase, step)
                ]
                path.write_text("".join(line + "\n" for line in keep))


def _after(line: str, phase: str, step: int) -> bool:
    try:
        row = json.loads(line)
    except json.JSONDecodeError:  # a line cut short by a crash: drop it
        return True
    return row.get("phase") == phase and row.get("step", 0) > step


def _num(x: float) -> Optional[float]:
    return float(x) if math.isfinite(x) else None


def sample_rows(
    phase: str, step: int, record: StepSamples, reward_names: list[str], groups: int, hidden: bool = False
) -> list[dict]:
    """The sample lines of the batch's first `groups` groups (every sample of each); the rows' HIDDEN_FIELDS only
    when `hidden`."""
    batch, scores, adv = record.batch, record.scores, record.advantages
    mask = batch.completion_mask  # (N, T)
    tokens = mask.sum(-1)  # (N,)
    width = min(adv.shape[-1], mask.shape[-1])
    adv_mean = (adv[:, :width] * mask[:, :width]).sum(-1) / tokens.clamp(min=1.0)  # (N,)
    keep = sorted(set(batch.group_index.tolist()))[:groups]
    rows, seen = [], {}
    for i, g in enumerate(batch.group_index.tolist()):
        if g not in keep:
            continue
        seen[g] = seen.get(g, -1) + 1
        fields = {k: v for k, v in batch.fields[i].items() if not k.startswith("agent_")}
        left_out = [] if hidden else sorted(k for k in fields if k in HIDDEN_FIELDS)
        row = {
            "phase": phase,
            "step": step,
            "group": g,
            "sample": seen[g],
            "prompt": batch.prompts[i],
            "completion": batch.completions[i],
            "completion_tokens": int(tokens[i]),
            "finished": bool(batch.finished[i]),
            "reward": _num(float(scores.rewards[i])),
            "rewards": {name: _num(float(v)) for name, v in zip(reward_names, scores.components[i].tolist())},
            "valid": bool(scores.valid[i]),
            "advantage": _num(float(adv_mean[i])),
            "fields": {k: v for k, v in fields.items() if k not in left_out},
        }
        if left_out:
            row["hidden_fields"] = left_out
        agent = {k: batch.fields[i][k] for k in AGENT_KEYS if k in batch.fields[i]}
        if agent:
            texts = agent.get("agent_turn_texts", [])
            obs = agent.get("agent_observation_texts", [None] * len(texts))
            infos = agent.get("agent_turn_infos", [{}] * len(texts))
            row["agent"] = {
                "finish_reason": agent.get("agent_finish_reason"),
                "reward": agent.get("agent_reward"),
                "turns": [{"text": t, "observation": o, "info": f} for t, o, f in zip(texts, obs, infos)],
            }
        rows.append(row)
    return rows


def read_samples(run_dir: Path) -> list[dict[str, Any]]:
    """Every sample line of a run, oldest first (the rotated file, then the current one)."""
    out = []
    for path in (Path(run_dir) / "samples.1.jsonl", Path(run_dir) / "samples.jsonl"):
        if path.exists():
            out += [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return out
