"""`AgentCollector`: the rollout stage of RL on agents. Runs `samples_per_prompt` episodes per training
row through the agent loop, packs them into a `RolloutBatch` (loss mask 1 on sampled tokens only) and
fills the batch's turn extras, the contract of the turn-level advantage estimators (M = the most model
turns of any trajectory in the batch, at least 1):

- `turn_index` (N, T) long: the 0-based model turn each sampled token belongs to, -1 elsewhere;
- `turn_rewards` (N, M) float32: each turn's reward, the environment's step reward (`agent.turn_rewards=env`),
  IGPO's information gain (`igpo`), Exploration-Aware PO's exploration reward (`eapo`: the variational information
  gain of each exploratory turn, 0 on task turns) or RLVMR's tag score (`meta_tags`), NaN where the trajectory has
  no such turn;
- `turn_kind` (N, M) long: 1 = exploratory action (a tool call), 0 = task action (final answer,
  environment action), -1 = no turn;
- `turn_prefix` (N, M) long: a 63-bit hash of the trajectory's ids up to the end of turn t (its sampled
  tokens), so equal values mean identical histories; -1 = no turn;
- `durations` (N,) float32: the seconds the episode's actions took, the sum of the environment's
  `info["duration"]` over its steps (0 where it reports none; `duration_aware` weights by it).

Reward functions receive each row's fields (minus `prompt`) plus the packed `agent_*` fields
(`ascent.agents.trajectory.pack_trajectories`), and `agent_answer_probs` with igpo and eapo.

With `agent.context=workspace` (IterResearch) a batch row is one round of an episode (`pack_rounds`): its ids are
the round's reconstructed workspace and the turn sampled on it, its fields the episode's (so a reward judges the
episode) plus `agent_round` (t, 1-based) and `agent_rounds` (T); the rounds are downsampled to a multiple of
`round_multiple` (EAPO's adaptive downsampling, `ascent.agents.workspace.downsample`).
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass
from typing import Any, Callable, Optional, Protocol

import numpy as np
import torch

from ascent.agents.loop import AgentConfig, continue_episodes, rollout
from ascent.agents.trajectory import Trajectory, Turn, pack_trajectories
from ascent.agents.workspace import downsample
from ascent.envs.base import Env
from ascent.envs.tools import CALL_OPEN
from ascent.policy.model import token_logprobs
from ascent.rollout.engine import RolloutEngine
from ascent.rollout.types import RolloutBatch

EXPLORE, TASK, NO_TURN = 1, 0, -1
"""Values of extras['turn_kind']."""


class Episodes(Protocol):
    """What running episodes over dataset rows needs: a fresh environment per episode and, per row, the task
    its `reset` takes (an agent task's wiring, `ascent.tasks.agent.AgentTask`, is one)."""

    make_env: Callable[[], Env]
    env_task: Callable[[dict[str, Any]], Any]


def pack_episodes(
    trajs: list[Trajectory], rows: list[dict[str, Any]], n: int, tokenizer: Any, indices: Optional[list[int]] = None
) -> RolloutBatch:
    """Trajectories (n per row, row-major) as a RolloutBatch whose fields are the rows' fields (minus
    `prompt`) plus the `agent_*` fields, whose prompts are the rows' prompts, and whose `row_index` holds
    `indices` (one per row) when given."""
    batch = pack_trajectories(trajs, tokenizer)
    batch.fields = [
        {
            **{k: v for k, v in rows[i // n].items() if k != "prompt"},
            **{k: v for k, v in f.items() if k.startswith("agent_")},
        }
        for i, f in enumerate(batch.fields)
    ]
    batch.prompts = [rows[i // n]["prompt"] for i in range(len(trajs))]
    batch.group_index = torch.arange(len(rows)).repeat_interleave(n)
    if indices is not None:
        batch.row_index = torch.tensor(indices, dtype=torch.long).repeat_interleave(n)
    return batch


def pack_rounds(
    trajs: list[Trajectory],
    rows: list[dict[str, Any]],
    n: int,
    tokenizer: Any,
    indices: Optional[list[int]] = None,
    multiple: int = 1,
    generator: Optional[torch.Generator] = None,
) -> tuple[RolloutBatch, list[Trajectory]]:
    """Workspace episodes (n per row, row-major) as one batch row per round, downsampled to a multiple of `multiple`
    (`ascent.agents.workspace.downsample`); returns the batch and the kept rounds. Row i's group is its episode's
    row, its fields the episode's packed fields (`pack_episodes`) plus `agent_round` and `agent_rounds`."""
    if any(not t.rounds for t in trajs):
        raise ValueError("pack_rounds needs workspace episodes (agent.context=workspace): an episode has no rounds")
    episodes = pack_episodes(trajs, rows, n, tokenizer, indices)
    flat = [(i, k, r) for i, t in enumerate(trajs) for k, r in enumerate(t.rounds)]
    flat = [flat[j] for j in downsample(len(flat), multiple, generator)]
    batch = pack_trajectories([r for _, _, r in flat], tokenizer)
    batch.fields = [
        {**episodes.fields[i], "agent_round": k + 1, "agent_rounds": len(trajs[i].rounds)} for i, k, _ in flat
    ]
    batch.prompts = [episodes.prompts[i] for i, _, _ in flat]
    batch.group_index = torch.tensor([i // n for i, _, _ in flat], dtype=torch.long)
    if indices is not None:
        batch.row_index = torch.tensor([indices[i // n] for i, _, _ in flat], dtype=torch.long)
    batch.finished = torch.tensor([trajs[i].finish_reason == "done" for i, _, _ in flat], dtype=torch.bool)
    rounds = sum(len(t.rounds) for t in trajs)
    batch.stats = {
        **episodes.stats,
        "rollout/completion_tokens": batch.stats["rollout/completion_tokens"],
        "rollout/completion_len_mean": batch.stats["rollout/completion_len_mean"],
        "agent/rounds": float(rounds),
        "agent/rounds_dropped": float(rounds - len(flat)),
    }
    return batch, [r for _, _, r in flat]


def turn_kind(turn: Turn) -> int:
    """EXPLORE for a turn that called tools, else TASK. An environment may decide itself with a boolean
    `exploratory` in its step info; otherwise a turn is exploratory when the environment counted tool
    calls (`tool_calls` > 0, ToolEnv) or, failing that, its text holds a `<tool_call>`."""
    info = turn.info
    if "exploratory" in info:
        return EXPLORE if info["exploratory"] else TASK
    if "tool_calls" in info:
        return EXPLORE if info["tool_calls"] > 0 else TASK
    return EXPLORE if CALL_OPEN in turn.text else TASK


def prefix_hashes(traj: Trajectory) -> list[int]:
    """For each turn t, a 63-bit hash (>= 0) of traj.ids[:turns[t].end] (the history through turn t's sampled
    tokens)."""
    h, done, out = hashlib.blake2b(digest_size=8), 0, []
    for turn in traj.turns:
        h.update(np.asarray(traj.ids[done : turn.end], dtype=np.int64).tobytes())
        done = turn.end
        out.append(int.from_bytes(h.copy().digest(), "little") & (2**63 - 1))
    return out


def turn_extras(trajs: list[Trajectory], width: int, turn_rewards: list[list[float]]) -> dict[str, torch.Tensor]:
    """The turn extras of trajectories packed to `width` positions; `turn_rewards[i][t]` is turn t's reward."""
    n, m = len(trajs), max(1, max(len(t.turns) for t in trajs))
    index = torch.full((n, width), -1, dtype=torch.long)  # (N, T)
    rewards = torch.full((n, m), math.nan, dtype=torch.float32)  # (N, M)
    kinds = torch.full((n, m), NO_TURN, dtype=torch.long)  # (N, M)
    prefix = torch.full((n, m), -1, dtype=torch.long)  # (N, M)
    durations = torch.zeros(n, dtype=torch.float32)  # (N,) seconds of the episode's actions
    for i, t in enumerate(trajs):
        durations[i] = sum(float(u.info.get("duration", 0.0)) for u in t.turns)
        k = len(t.turns)
        index[i, : len(t)] = torch.tensor(t.turn_index(), dtype=torch.long)
        if k:
            rewards[i, :k] = torch.tensor(turn_rewards[i], dtype=torch.float32)
            kinds[i, :k] = torch.tensor([turn_kind(u) for u in t.turns], dtype=torch.long)
            prefix[i, :k] = torch.tensor(prefix_hashes(t), dtype=torch.long)
    out = {"turn_index": index, "turn_rewards": rewards, "turn_kind": kinds, "turn_prefix": prefix}
    return out | {"durations": durations}


def history_ends(traj: Trajectory) -> list[Optional[int]]:
    """Where the model could answer: after the prompt, then after each turn's observation (None for a
    turn that no observation followed). K + 1 entries for K turns."""
    return [traj.prompt_len] + [None if u.observation is None else u.observation[1] for u in traj.turns]


@torch.no_grad()
def answer_probs(
    model: Any, trajs: list[Trajectory], answers: list[Any], template: str, tokenizer: Any, micro_batch: int = 32
) -> list[list[Optional[float]]]:
    """IGPO's probe (Wang et al., 2025, arXiv:2510.14967): for each trajectory and each history end h
    (`history_ends`), the policy's probability of the gold answer, exp(mean log p(answer tokens | ids[:h] +
    template prefix)), as the geometric mean per token so answers of different lengths compare. None where
    there is no history end."""
    pre, _, post = template.partition("{answer}")
    enc = lambda text: list(tokenizer(text, add_special_tokens=False)["input_ids"])  # noqa: E731
    probes: list[
        tuple[int, int, list[int], int, int]
    ] = []  # (trajectory, history point, ids, answer start, answer end)
    for i, (t, a) in enumerate(zip(trajs, answers)):
        gold, head, tail = enc(str(a)), enc(pre), enc(post)
        for k, end in enumerate(history_ends(t)):
            if end is not None and gold:
                ids = t.ids[:end] + head + gold + tail
                probes.append((i, k, ids, end + len(head), end + len(head) + len(gold)))
    out: list[list[Optional[float]]] = [[None] * (len(t.turns) + 1) for t in trajs]
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    for s in range(0, len(probes), micro_batch):
        chunk = probes[s : s + micro_batch]
        width = max(len(p[2]) for p in chunk)
        ids = torch.full((len(chunk), width), int(pad), dtype=torch.long)  # (B, L)
        mask = torch.zeros_like(ids)
        for r, p in enumerate(chunk):
            ids[r, : len(p[2])], mask[r, : len(p[2])] = torch.tensor(p[2]), 1
        lp = token_logprobs(model, ids, mask)  # (B, L): log p(x_t | x_<t)
        for r, (i, k, _, a, b) in enumerate(chunk):
            out[i][k] = float(lp[r, a:b].mean().exp())
    return out


Chooser = Callable[[RolloutBatch], list[list[Optional[tuple[int, int]]]]]
"""`AgentCollector.collect_continued`'s choice of resumed episodes: the first stage's batch -> per row, the starts
of its second stage ((episode j of the row, after turn k) or None for a fresh episode)."""


@dataclass
class AgentCollector:
    """`n` episodes per training row with the policy, packed, with the turn extras."""

    policy: Any
    rows: list[dict[str, Any]]
    engine: RolloutEngine
    task: Episodes
    loop: AgentConfig
    n: int
    """Episodes per row (rollout.samples_per_prompt): the GRPO group."""
    turn_rewards: str = "env"
    """env: the environment's step rewards; igpo: information gains (`ascent.rewards.agentic.igpo_turn_rewards`);
    eapo: Exploration-Aware PO's variational exploration reward (`ascent.rewards.agentic.eapo_turn_rewards`);
    meta_tags: RLVMR's per-turn tag scores (`ascent.rewards.meta_tags.meta_turn_rewards`)."""
    igpo_template: str = "<answer>{answer}</answer>"
    micro_batch_size: int = 32
    """Probe sequences per forward (igpo, eapo)."""
    round_multiple: int = 1
    """agent.context=workspace: round samples per batch are downsampled to a multiple of this (EAPO's adaptive
    downsampling; the data-parallel size in the paper, the micro-batch size in ascent's recipes)."""

    def collect(self, indices: list[int], generator: torch.Generator) -> RolloutBatch:
        rows = [self.rows[i] for i in indices]
        self.policy.model.eval()
        trajs = rollout(
            self.engine,
            self.policy,
            [self.task.env_task(r) for r in rows],
            self.task.make_env,
            self.loop,
            self.n,
            generator,
        )
        if self.loop.context == "workspace":
            return self.pack_workspace(trajs, rows, indices, generator)
        return self.pack(trajs, rows, indices)

    def pack_workspace(
        self, trajs: list[Trajectory], rows: list[dict[str, Any]], indices: list[int], generator: torch.Generator
    ) -> RolloutBatch:
        """Workspace episodes as round samples (`pack_rounds`) with the turn extras (one turn per row, its
        environment step reward)."""
        if self.turn_rewards != "env":
            raise ValueError("agent.context=workspace supports agent.turn_rewards=env only")
        batch, rounds = pack_rounds(trajs, rows, self.n, self.policy.tokenizer, indices, self.round_multiple, generator)
        batch.extras = turn_extras(rounds, batch.input_ids.shape[1], [[u.reward for u in r.turns] for r in rounds])
        return batch

    def collect_continued(
        self, indices: list[int], generator: torch.Generator, fresh: int, choose: Chooser
    ) -> RolloutBatch:
        """Two stages with the same budget of `n` episodes per row: `fresh` episodes per row, then the rest
        resumed from them. `choose(first)` sees the first stage packed (`fresh` per row, row-major) and returns,
        per row, `n - fresh` starts: `(j, k)` resumes the row's episode j (0 <= j < fresh) after its turn k
        (`ascent.agents.loop.acontinue`: its first k turns forced, mask 0), None runs a fresh episode. Each
        row's group is its `fresh` episodes followed by its `n - fresh` second-stage ones."""
        if self.loop.context == "workspace":
            raise ValueError("two-stage (resumed) collection is not supported with agent.context=workspace")
        if not 1 <= fresh <= self.n:
            raise ValueError(f"fresh must be in [1, {self.n}] (rollout.samples_per_prompt), got {fresh}")
        rows = [self.rows[i] for i in indices]
        tasks = [self.task.env_task(r) for r in rows]
        self.policy.model.eval()
        first = rollout(self.engine, self.policy, tasks, self.task.make_env, self.loop, fresh, generator)
        if fresh == self.n:
            return self.pack(first, rows, indices)
        plan = choose(pack_episodes(first, rows, fresh, self.policy.tokenizer, indices))
        if len(plan) != len(rows) or any(len(p) != self.n - fresh for p in plan):
            raise ValueError(f"choose must return {self.n - fresh} starts for each of the {len(rows)} rows")
        starts = [
            (tasks[r], None, 0) if s is None else (tasks[r], first[r * fresh + s[0]], s[1])
            for r, p in enumerate(plan)
            for s in p
        ]
        second = continue_episodes(self.engine, self.policy, starts, self.task.make_env, self.loop, generator)
        k = self.n - fresh
        trajs = [t for r in range(len(rows)) for t in first[r * fresh : (r + 1) * fresh] + second[r * k : (r + 1) * k]]
        return self.pack(trajs, rows, indices)

    def pack(self, trajs: list[Trajectory], rows: list[dict[str, Any]], indices: list[int]) -> RolloutBatch:
        """`n` trajectories per row (row-major) as the round's batch with its turn extras."""
        batch = pack_episodes(trajs, rows, self.n, self.policy.tokenizer, indices)
        rewards = [[u.reward for u in t.turns] for t in trajs]
        if self.turn_rewards in ("igpo", "eapo"):
            from ascent.rewards.agentic import eapo_turn_rewards, igpo_turn_rewards

            probs = answer_probs(
                self.policy.model,
                trajs,
                [r.get("answer") for r in rows for _ in range(self.n)],
                self.igpo_template,
                self.policy.tokenizer,
                self.micro_batch_size,
            )
            if self.turn_rewards == "igpo":
                rewards = [igpo_turn_rewards(p, [u.reward for u in t.turns]) for p, t in zip(probs, trajs)]
            else:
                rewards = [eapo_turn_rewards(p, [turn_kind(u) for u in t.turns]) for p, t in zip(probs, trajs)]
            for f, p in zip(batch.fields, probs):
                f["agent_answer_probs"] = p
        elif self.turn_rewards == "meta_tags":
            from ascent.rewards.agentic import answer_em
            from ascent.rewards.meta_tags import meta_turn_rewards, turn_tag_types

            rewards = []
            for i, t in enumerate(trajs):
                texts = [u.text for u in t.turns]
                ok = answer_em([""], [""], [rows[i // self.n].get("answer")], [t.info], [texts])[0]
                rewards.append(meta_turn_rewards(texts, [u.info for u in t.turns], bool(ok)))
        batch.extras = turn_extras(trajs, batch.input_ids.shape[1], rewards)
        if self.turn_rewards == "meta_tags":  # GRPO-MR's per-tag groups (`grpo_mr`): (N, M), -1 where no turn
            tags = torch.full(batch.extras["turn_kind"].shape, -1, dtype=torch.long)
            for i, t in enumerate(trajs):
                if t.turns:
                    tags[i, : len(t.turns)] = torch.tensor(turn_tag_types([u.text for u in t.turns]), dtype=torch.long)
            batch.extras["turn_tag"] = tags
        return batch
