"""The `Trajectory` record of one agent episode, and its packing into a `RolloutBatch` for the learner."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Optional

import torch

from ascent.rollout.types import RolloutBatch


@dataclass
class Turn:
    """One model turn inside a trajectory's ids."""

    start: int
    """Position of the turn's first sampled token."""
    end: int
    """One past its last sampled token (ids[start:end] are exactly the sampled ids)."""
    text: str
    """The assistant message content: the decoded sampled ids, minus a sampled end-of-turn token."""
    stop: str
    """Why the turn ended: `eos` (end-of-turn token sampled), `stop` (a stop string), `length` (token budget)."""
    observation: Optional[tuple[int, int]] = None
    """[start, end) of the observation tokens that follow (None: no observation was appended)."""
    reward: float = 0.0
    """The environment's reward for this step."""
    info: dict[str, Any] = field(default_factory=dict)
    """The environment's step info."""
    context_tokens: int = 0
    """Tokens the model conditioned on when it sampled this turn (the whole history so far, or with
    `agent.context=workspace` the round's reconstructed workspace)."""


@dataclass
class Trajectory:
    """One episode, token-in/token-out. Positions t = 0..T-1 of `ids`; the three per-token lists are aligned."""

    ids: list[int]
    """(T,) prompt, then per turn: sampled ids, template end-of-turn ids, observation ids."""
    loss_mask: list[int]
    """(T,) 1 on sampled tokens, 0 on prompt / template / observation tokens."""
    sampled_logprobs: list[float]
    """(T,) sampling-time log-prob of each sampled token; 0 where loss_mask is 0."""
    prompt_len: int
    """Tokens of the initial prompt (system + user + generation prompt)."""
    messages: list[dict[str, str]]
    """The conversation as chat messages (system?, user, then assistant / tool alternating)."""
    task: Any
    group: int
    """Index of the task in the rollout call (the GRPO group)."""
    turns: list[Turn] = field(default_factory=list)
    reward: float = 0.0
    """Sum of the environment's step rewards."""
    finish_reason: str = ""
    """`done` (the environment ended it), `max_turns`, or `max_tokens`."""
    info: dict[str, Any] = field(default_factory=dict)
    """The last step's info (for a ToolEnv: tool calls, correctness, support, ...)."""
    rounds: list["Trajectory"] = field(default_factory=list)
    """`agent.context=workspace` (`ascent.agents.workspace`): one single-turn trajectory per round, its prompt the
    reconstructed workspace, the sequences the policy sampled on and trains on. The episode's own ids are then the
    rounds' ids one after the other (a record for logs and evaluation; each turn's `observation` span covers the
    next round's workspace). Empty for the usual growing history."""

    def __len__(self) -> int:
        return len(self.ids)

    @property
    def prompt(self) -> str:
        """The user message that started the episode."""
        return next(m["content"] for m in self.messages if m["role"] == "user")

    def append(self, ids: list[int], logprobs: Optional[list[float]] = None) -> tuple[int, int]:
        """Append tokens: sampled ones when `logprobs` is given (mask 1), else forced (mask 0). Returns their span."""
        start = len(self.ids)
        self.ids += ids
        self.loss_mask += [1 if logprobs is not None else 0] * len(ids)
        self.sampled_logprobs += list(logprobs) if logprobs is not None else [0.0] * len(ids)
        return start, len(self.ids)

    def token_kinds(self) -> list[str]:
        """(T,) what each position holds: prompt | sampled | template | observation."""
        kinds = ["prompt"] * self.prompt_len + ["template"] * (len(self.ids) - self.prompt_len)
        for t in self.turns:
            kinds[t.start : t.end] = ["sampled"] * (t.end - t.start)
            if t.observation is not None:
                kinds[t.observation[0] : t.observation[1]] = ["observation"] * (t.observation[1] - t.observation[0])
        return kinds

    def turn_index(self) -> list[int]:
        """(T,) index of the model turn each sampled token belongs to; -1 off the sampled tokens
        (what turn-level advantages broadcast over)."""
        out = [-1] * len(self.ids)
        for k, t in enumerate(self.turns):
            out[t.start : t.end] = [k] * (t.end - t.start)
        return out


def task_fields(task: Any) -> dict[str, Any]:
    """A task as the reward functions' fields: a dataclass's fields, a dict's items, else {"task": task}."""
    if dataclasses.is_dataclass(task) and not isinstance(task, type):
        return {f.name: getattr(task, f.name) for f in dataclasses.fields(task)}
    return dict(task) if isinstance(task, dict) else {"task": task}


def pack_trajectories(trajs: list[Trajectory], tokenizer: Any, policy_version: int = 0) -> RolloutBatch:
    """Right-pad trajectories into a `RolloutBatch` the learner trains on unchanged: completion_mask is
    the loss mask (sampled tokens only), group_index the task, finished = the environment ended the
    episode. Each row's fields carry the task's fields plus `agent_reward`, `agent_turns` (sampled spans),
    `agent_turn_texts` (each model turn's text), `agent_observation_texts` (the observation after each
    turn, None where none was appended), `agent_turn_infos` (each step's info),
    `agent_finish_reason` and `agent_info` (the last step's info)."""
    if not trajs:
        raise ValueError("pack_trajectories needs at least one trajectory")
    n, width = len(trajs), max(len(t) for t in trajs)
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    input_ids = torch.full((n, width), int(pad), dtype=torch.long)  # (N, T)
    attention = torch.zeros((n, width), dtype=torch.long)  # (N, T)
    mask = torch.zeros((n, width), dtype=torch.float32)  # (N, T)
    logps = torch.zeros((n, width), dtype=torch.float32)  # (N, T)
    for i, t in enumerate(trajs):
        input_ids[i, : len(t)] = torch.tensor(t.ids, dtype=torch.long)
        attention[i, : len(t)] = 1
        mask[i, : len(t)] = torch.tensor(t.loss_mask, dtype=torch.float32)
        logps[i, : len(t)] = torch.tensor(t.sampled_logprobs, dtype=torch.float32)
    sampled = float(mask.sum())
    return RolloutBatch(
        input_ids=input_ids,
        attention_mask=attention,
        completion_mask=mask,
        sampled_logprobs=logps,
        group_index=torch.tensor([t.group for t in trajs], dtype=torch.long),
        finished=torch.tensor([t.finish_reason == "done" for t in trajs], dtype=torch.bool),
        prompts=[t.prompt for t in trajs],
        completions=tokenizer.batch_decode([t.ids[t.prompt_len :] for t in trajs], skip_special_tokens=True),
        fields=[
            {
                **task_fields(t.task),
                "agent_reward": t.reward,
                "agent_turns": [(u.start, u.end) for u in t.turns],
                "agent_turn_texts": [u.text for u in t.turns],
                "agent_observation_texts": [
                    None
                    if u.observation is None
                    else tokenizer.decode(t.ids[u.observation[0] : u.observation[1]], skip_special_tokens=True)
                    for u in t.turns
                ],
                "agent_turn_infos": [u.info for u in t.turns],
                "agent_finish_reason": t.finish_reason,
                "agent_info": t.info,
            }
            for t in trajs
        ],
        policy_version=policy_version,
        stats=agent_stats(trajs)
        | {
            "rollout/completion_tokens": sampled,
            "rollout/completion_len_mean": sampled / n,
            "rollout/truncated_frac": sum(t.finish_reason != "done" for t in trajs) / n,
        },
    )


def agent_stats(trajs: list[Trajectory]) -> dict[str, float]:
    """Episode statistics (agent/ namespace)."""
    n = max(len(trajs), 1)
    return {
        "agent/turns_mean": sum(len(t.turns) for t in trajs) / n,
        "agent/reward_mean": sum(t.reward for t in trajs) / n,
        "agent/done_frac": sum(t.finish_reason == "done" for t in trajs) / n,
        "agent/tokens_mean": sum(len(t) for t in trajs) / n,
        "agent/observation_tokens_mean": sum(t.token_kinds().count("observation") for t in trajs) / n,
        "agent/tool_calls_mean": sum(t.info.get("num_tool_calls", 0) for t in trajs) / n,
        "agent/context_tokens_mean": context_tokens(trajs),
    }


def context_tokens(trajs: list[Trajectory]) -> float:
    """Mean over all model turns of the tokens the model conditioned on when it sampled the turn."""
    turns = [u.context_tokens for t in trajs for u in t.turns]
    return sum(turns) / max(len(turns), 1)
