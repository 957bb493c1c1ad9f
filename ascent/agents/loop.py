"""The agent rollout, token-in/token-out, on top of a rollout engine.

For a batch of episodes (tasks x n samples, one environment each), alternate:

1. a model turn: `engine.generate` on the current ids of every active episode, stopping at the end-of-turn
   token; engines cannot stop on strings, so the sampled ids are cut right after the first stop string
   (`</tool_call>`, `</answer>`) and only the kept tokens' log-probs are kept. The kept ids are appended
   exactly as sampled (mask 1), then the template's end-of-turn tokens (mask 0);
2. the environments' steps (concurrently: `await env.astep`), whose observations are tokenised once, with
   the template's role header and the next generation prompt, and appended (mask 0).

Because the template pieces come from the tokenizer's chat template (`ChatFormat`), the ids equal the
chat template's rendering of the conversation whenever the model's tokens are the canonical tokenisation
of its text; `ascent.agents.token_check` verifies it per trajectory.

Limits: `max_turns` model turns, `max_turn_tokens` per turn, `max_total_tokens` per trajectory (prompt,
turns and observations; an observation that does not fit ends the episode with `max_tokens`).

`context="workspace"` (IterResearch's workspace reconstruction, `ascent.agents.workspace`): instead of appending
the observation, each round's context is rebuilt as question + the policy's evolving report + the last action
and its observation, tokenised once as a fresh prompt; `max_total_tokens` then bounds each round's sequence.
"""

from __future__ import annotations

import asyncio
import dataclasses
from dataclasses import dataclass
from typing import Any, Callable, Literal, Optional

import torch

from ascent.agents.chat import ChatFormat
from ascent.agents.trajectory import Trajectory, Turn
from ascent.agents.workspace import split_report, with_report, workspace_messages
from ascent.envs.base import Env, Observation, StepResult
from ascent.rollout.engine import RolloutEngine
from ascent.rollout.types import SamplingSettings


@dataclass(frozen=True)
class AgentConfig:
    """Limits and sampling of agent rollouts."""

    max_turns: int = 4
    """Model turns per episode."""
    max_turn_tokens: int = 128
    """Tokens the model may sample in one turn."""
    max_total_tokens: int = 1024
    """Tokens per trajectory: prompt + turns + template pieces + observations."""
    stop_strings: tuple[str, ...] = ("</tool_call>", "</answer>")
    """A model turn ends right after the first of these (besides the end-of-turn token)."""
    observation_role: str = "tool"
    """Chat role of observation messages."""
    temperature: float = 1.0
    """Sampling temperature (0: greedy)."""
    top_p: float = 1.0
    """Nucleus sampling mass."""
    top_k: int = 0
    """Top-k sampling (0: off)."""
    context: Literal["history", "workspace"] = "history"
    """history: each turn sees the whole conversation so far; workspace: IterResearch's reconstruction, each round
    sees the question + the policy's report + the last action and observation only (`ascent.agents.workspace`)."""

    def __post_init__(self) -> None:
        if self.context not in ("history", "workspace"):
            raise ValueError(f"context must be 'history' or 'workspace', got {self.context!r}")
        if self.max_turns < 1 or self.max_turn_tokens < 1:
            raise ValueError(
                f"max_turns and max_turn_tokens must be >= 1, got {self.max_turns} and {self.max_turn_tokens}"
            )
        if self.max_total_tokens < 2:
            raise ValueError(f"max_total_tokens must be >= 2, got {self.max_total_tokens}")
        if any(not s for s in self.stop_strings):
            raise ValueError("stop_strings must be non-empty strings")


def cut_turn(
    tokenizer: Any, ids: list[int], stop_ids: frozenset[int], stop_strings: tuple[str, ...], budget: int
) -> tuple[int, str]:
    """How many of the sampled `ids` the turn keeps, and why it ends: `eos` (a stop token, kept; also
    when it directly follows a stop string), `stop` (the shortest prefix whose text contains a stop
    string), else `length` (at most `budget` tokens).

    >>> from ascent.policy.tokenizer import char_tokenizer
    >>> tok = char_tokenizer("abc</>")
    >>> ids = tok("ab</a>cc", add_special_tokens=False)["input_ids"]
    >>> cut_turn(tok, ids, frozenset({tok.eos_token_id}), ("</a>",), 100), cut_turn(tok, ids, frozenset(), (), 3)
    ((6, 'stop'), (3, 'length'))
    """
    limit, reason = min(len(ids), budget), "length"
    first_stop = next((i for i, t in enumerate(ids[:limit]) if t in stop_ids), None)
    if first_stop is not None:
        limit, reason = first_stop + 1, "eos"
    if stop_strings and _has_stop(tokenizer, ids[:limit], stop_strings):
        lo, hi = 1, limit  # smallest k whose prefix contains a stop string (containment grows with k)
        while lo < hi:
            mid = (lo + hi) // 2
            lo, hi = (lo, mid) if _has_stop(tokenizer, ids[:mid], stop_strings) else (mid + 1, hi)
        if lo < limit and ids[lo] in stop_ids:  # the model ended its turn right after the stop string: keep that too
            return lo + 1, "eos"
        return lo, "stop" if lo < limit or reason != "eos" else "eos"
    return limit, reason


def _has_stop(tokenizer: Any, ids: list[int], stops: tuple[str, ...]) -> bool:
    text = tokenizer.decode(ids, skip_special_tokens=False)
    return any(s in text for s in stops)


class _Episode:
    """One episode under construction."""

    def __init__(self, env: Env, task: Any, group: int) -> None:
        self.env, self.task, self.group = env, task, group
        self.traj: Optional[Trajectory] = None
        self.head: list[dict[str, str]] = []
        """The first round's messages (system?, user question): what a workspace is rebuilt from."""
        self.report = ""
        """The evolving report M_t (workspace context)."""

    @property
    def active(self) -> bool:
        return self.traj is not None and not self.traj.finish_reason

    @property
    def context(self) -> Trajectory:
        """The sequence the next turn is sampled on: the episode's (history) or its current round's (workspace)."""
        return self.traj.rounds[-1] if self.traj.rounds else self.traj

    def start(self, fmt: ChatFormat, obs: Observation, cfg: AgentConfig) -> None:
        self.head = ([{"role": "system", "content": obs.system}] if obs.system is not None else []) + [
            {"role": "user", "content": obs.text}
        ]
        messages = with_report(self.head, "") if cfg.context == "workspace" else [dict(m) for m in self.head]
        self.traj = self._sequence(fmt, messages, info=dict(obs.info))
        if cfg.context == "workspace":
            self.traj.rounds.append(self._sequence(fmt, messages))
        if self.budget(fmt, cfg) < 1:
            self.traj.finish_reason = "max_tokens"

    def _sequence(self, fmt: ChatFormat, messages: list[dict[str, str]], info: Optional[dict] = None) -> Trajectory:
        ids = fmt.prompt_ids(messages)
        return Trajectory(
            ids=ids,
            loss_mask=[0] * len(ids),
            sampled_logprobs=[0.0] * len(ids),
            prompt_len=len(ids),
            messages=[dict(m) for m in messages],
            task=self.task,
            group=self.group,
            info=info or {},
        )

    def budget(self, fmt: ChatFormat, cfg: AgentConfig) -> int:
        """Tokens the next model turn may sample (room is kept for the end-of-turn tokens)."""
        room = cfg.max_total_tokens - len(self.context) - len(fmt.assistant_end_ids)
        return min(cfg.max_turn_tokens, room)

    def add_turn(self, fmt: ChatFormat, ids: list[int], logprobs: list[float], stop: str) -> str:
        """Append a model turn (sampled ids, then the template's end of turn) to the episode and, with a workspace,
        to its current round; returns its text."""
        ended = stop == "eos" and bool(ids) and ids[-1] == fmt.turn_end_id
        content = fmt.tokenizer.decode(ids[:-1] if ended else ids, skip_special_tokens=False)
        seen = len(self.context)
        for t in [self.traj] + self.traj.rounds[-1:]:
            start, end = t.append(ids, logprobs)
            t.append(fmt.end_ids(sampled_turn_end=ended))
            t.turns.append(Turn(start=start, end=end, text=content, stop=stop, context_tokens=seen))
            t.messages.append({"role": "assistant", "content": content})
        return content

    def observe(self, fmt: ChatFormat, res: StepResult, cfg: AgentConfig, last_turn: bool) -> None:
        """Record the environment's step; append its observation (history) or start the next round from the
        reconstructed workspace (workspace) unless the episode ends here."""
        t, turn = self.traj, self.traj.turns[-1]
        for u in [turn] + [r.turns[-1] for r in t.rounds[-1:]]:
            u.reward, u.info = float(res.reward), dict(res.info)
        t.reward += float(res.reward)
        t.info = dict(res.info)
        if res.done:
            t.finish_reason = "done"
        elif last_turn:
            t.finish_reason = "max_turns"
        elif cfg.context == "workspace":
            self.report, action = split_report(turn.text, self.report)
            messages = workspace_messages(self.head, self.report, action, res.observation, fmt.observation_role)
            nxt = self._sequence(fmt, messages)
            if len(nxt) + len(fmt.assistant_end_ids) + 1 > cfg.max_total_tokens:
                t.finish_reason = "max_tokens"
                return
            turn.observation = t.append(nxt.ids)
            t.messages += messages
            t.rounds.append(nxt)
        else:
            obs = fmt.observation_ids(res.observation)
            if len(t) + len(obs) + len(fmt.assistant_end_ids) + 1 > cfg.max_total_tokens:
                t.finish_reason = "max_tokens"
                return
            turn.observation = t.append(obs)
            t.messages.append({"role": fmt.observation_role, "content": res.observation})


def _model_turn(
    engine: RolloutEngine,
    model: Any,
    fmt: ChatFormat,
    cfg: AgentConfig,
    episodes: list[_Episode],
    pad_id: int,
    generator: Optional[torch.Generator],
) -> list[str]:
    """One sampled turn for every episode in `episodes` (one engine call); returns the turns' texts."""
    budgets = [e.budget(fmt, cfg) for e in episodes]
    s = SamplingSettings(
        max_new_tokens=max(budgets),
        eos_id=fmt.turn_end_id,
        pad_id=pad_id,
        temperature=cfg.temperature,
        top_p=cfg.top_p,
        top_k=cfg.top_k,
    )
    gen = engine.generate(model, [e.context.ids for e in episodes], 1, s, generator)  # tokens/logprobs: (A, max_new)
    texts = []
    for i, (e, budget) in enumerate(zip(episodes, budgets)):
        ids, lps = gen.tokens[i, : int(gen.lengths[i])].tolist(), gen.logprobs[i, : int(gen.lengths[i])].tolist()
        keep, stop = cut_turn(fmt.tokenizer, ids, fmt.stop_ids, cfg.stop_strings, budget)
        texts.append(e.add_turn(fmt, ids[:keep], lps[:keep], stop))
    return texts


async def arollout(
    engine: RolloutEngine,
    policy: Any,
    tasks: list[Any],
    make_env: Callable[[], Env],
    cfg: AgentConfig = AgentConfig(),
    n: int = 1,
    generator: Optional[torch.Generator] = None,
) -> list[Trajectory]:
    """Run `n` episodes per task (task-major order: task g's episodes are g*n .. g*n+n-1) with the
    policy's model and tokenizer (its chat template); returns one `Trajectory` per episode."""
    fmt = ChatFormat.from_tokenizer(policy.tokenizer, cfg.observation_role)
    episodes = [_Episode(make_env(), task, g) for g, task in enumerate(tasks) for _ in range(n)]
    for e, obs in zip(episodes, await asyncio.gather(*(e.env.areset(e.task) for e in episodes))):
        e.start(fmt, obs, cfg)
    await _play(engine, policy, fmt, cfg, episodes, generator)
    return [e.traj for e in episodes]


async def _play(
    engine: RolloutEngine,
    policy: Any,
    fmt: ChatFormat,
    cfg: AgentConfig,
    episodes: list[_Episode],
    generator: Optional[torch.Generator],
) -> None:
    """Model turns and environment steps until every episode has ended (an episode's turn count is its
    trajectory's: a resumed episode goes on from its prefix)."""
    while True:
        active = [e for e in episodes if e.active and len(e.traj.turns) < cfg.max_turns]
        if not active:
            break
        texts = _model_turn(engine, policy.model, fmt, cfg, active, policy.pad_id, generator)
        results = await asyncio.gather(*(e.env.astep(text) for e, text in zip(active, texts)))
        for e, res in zip(active, results):
            e.observe(fmt, res, cfg, last_turn=len(e.traj.turns) == cfg.max_turns)


def forced_prefix(traj: Trajectory, turns: int, group: int) -> Trajectory:
    """A new trajectory holding `traj`'s prompt and its first `turns` model turns with their observations, every
    token forced (loss mask 0, log-prob 0): the start of a resumed episode (`acontinue`). Turn `turns - 1`
    must have been followed by an observation. Not for workspace episodes (their context is not a prefix)."""
    if traj.rounds:
        raise ValueError("resuming an episode is not supported with agent.context=workspace")
    if not 1 <= turns <= len(traj.turns) or traj.turns[turns - 1].observation is None:
        raise ValueError(f"cannot resume after turn {turns} of {len(traj.turns)}: no observation followed it")
    end = traj.turns[turns - 1].observation[1]
    head = next(i for i, m in enumerate(traj.messages) if m["role"] == "assistant")
    kept = [dataclasses.replace(u, info=dict(u.info)) for u in traj.turns[:turns]]
    return Trajectory(
        ids=list(traj.ids[:end]),
        loss_mask=[0] * end,
        sampled_logprobs=[0.0] * end,
        prompt_len=traj.prompt_len,
        messages=[dict(m) for m in traj.messages[: head + 2 * turns]],
        task=traj.task,
        group=group,
        turns=kept,
        reward=sum(u.reward for u in kept),
        info=dict(kept[-1].info),
    )


async def acontinue(
    engine: RolloutEngine,
    policy: Any,
    starts: list[tuple[Any, Optional[Trajectory], int]],
    make_env: Callable[[], Env],
    cfg: AgentConfig = AgentConfig(),
    generator: Optional[torch.Generator] = None,
) -> list[Trajectory]:
    """One episode per `(task, prefix, turns)`: with `prefix` None a fresh episode of `task`; else a fresh
    environment replays the first `turns` model turns of `prefix` (their texts, so the environment's state is
    the one the prefix saw; it must not end there), the trajectory starts as `forced_prefix(prefix, turns)`
    (mask 0: the resumed episode trains on its new turns only) and the policy samples on from there (within
    the same `max_turns` and token limits). Group of episode i: i."""
    fmt = ChatFormat.from_tokenizer(policy.tokenizer, cfg.observation_role)
    episodes = [_Episode(make_env(), task, g) for g, (task, _, _) in enumerate(starts)]
    await asyncio.gather(*(_resume(e, fmt, cfg, prefix, k) for e, (_, prefix, k) in zip(episodes, starts)))
    await _play(engine, policy, fmt, cfg, episodes, generator)
    return [e.traj for e in episodes]


async def _resume(e: _Episode, fmt: ChatFormat, cfg: AgentConfig, prefix: Optional[Trajectory], turns: int) -> None:
    obs = await e.env.areset(e.task)
    if prefix is None:
        e.start(fmt, obs, cfg)
        return
    e.traj = forced_prefix(prefix, turns, e.group)
    for u in prefix.turns[:turns]:
        if (await e.env.astep(u.text)).done:
            raise ValueError("a resumed prefix ended its episode while being replayed; resume before its last turn")


def continue_episodes(
    engine: RolloutEngine,
    policy: Any,
    starts: list[tuple[Any, Optional[Trajectory], int]],
    make_env: Callable[[], Env],
    cfg: AgentConfig = AgentConfig(),
    generator: Optional[torch.Generator] = None,
) -> list[Trajectory]:
    """`acontinue` from synchronous code."""
    return asyncio.run(acontinue(engine, policy, starts, make_env, cfg, generator))


def rollout(
    engine: RolloutEngine,
    policy: Any,
    tasks: list[Any],
    make_env: Callable[[], Env],
    cfg: AgentConfig = AgentConfig(),
    n: int = 1,
    generator: Optional[torch.Generator] = None,
) -> list[Trajectory]:
    """`arollout` from synchronous code (it starts an event loop; from async code await `arollout`)."""
    return asyncio.run(arollout(engine, policy, tasks, make_env, cfg, n, generator))
