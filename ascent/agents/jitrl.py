"""JitRL: training-free policy improvement at decode time (Just-In-Time Reinforcement Learning, Liu et al. 2026,
arXiv:2601.18510). No gradient step: a non-parametric memory of past steps (state, action, discounted return)
gives, for the state the agent is in, each candidate action's advantage over its neighbours' mean return, and
the policy's logits over the candidates are shifted by A / beta, the closed-form maximiser of
E[A] - beta KL(pi' || pi) (pi'(a|s) proportional to pi(a|s) exp(A(s, a) / beta)).

How ascent does it (the agent loop's model turn, `ascent.agents.loop`, with K candidates per decision):

1. the engine samples K candidate turns from the frozen policy at the current ids (one call, `n = K`);
2. each candidate is keyed (`action_key`: `tool`, the tool names it calls or `answer`; `exact`, its text);
3. `JitMemory.advantages` retrieves the `neighbours` stored steps whose state is most similar to the current one
   (word Jaccard similarity >= `min_similarity`), averages the discounted return per action key (v_a), takes the
   mean of all neighbours' returns as the baseline b, gives a key no neighbour took the optimistic value
   b + bonus / count (count = neighbours found; the authors' UCB-style bonus) and returns A_a = v_a - b, divided
   by the largest positive advantage (or the largest negative one's magnitude) as the authors' code does;
4. `mode=sample`: the turn is candidate i with probability proportional to exp(A_i / beta), sampling-importance-
   resampling of pi': the candidates already come from pi, so the shift is the only weight (exact as K grows);
   `mode=greedy`: argmax of log pi(candidate) + A / beta (log pi: the sum of its tokens' log-probs);
5. after an episode, each of its turns is stored with G_t = sum_u gamma^u r_{t+u} (the environment's step
   rewards).

An empty memory (or beta = inf) leaves the policy as it is: `sample` is plain sampling, `greedy` is the most
likely of K samples: the control of the comparison in docs/agents.md.
"""

from __future__ import annotations

import asyncio
import math
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

import torch

from ascent import papers
from ascent.agents.chat import ChatFormat
from ascent.agents.loop import AgentConfig, _Episode, cut_turn
from ascent.agents.trajectory import Trajectory
from ascent.envs.base import Env
from ascent.envs.tool_env import parse_answer
from ascent.envs.tools import parse_tool_calls
from ascent.registry import Registry
from ascent.rollout.engine import RolloutEngine
from ascent.rollout.types import SamplingSettings

AGENT_DECODERS: Registry = Registry("agent decoder")
"""Decode-time methods that change how an agent picks its turns without training (`ascent list agent_decoders`)."""

_WORD = re.compile(r"[a-z0-9]+")


def state_words(text: str) -> frozenset[str]:
    """The lowercase words of a state's text, the set the Jaccard similarity compares.

    >>> sorted(state_words("Q: What is the employer of Kalo Miran?"))
    ['employer', 'is', 'kalo', 'miran', 'of', 'q', 'the', 'what']
    """
    return frozenset(_WORD.findall(text.lower()))


def jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    """|a & b| / |a | b| (0 for two empty sets).

    >>> jaccard(frozenset("abc"), frozenset("bcd"))
    0.5
    """
    union = len(a | b)
    return len(a & b) / union if union else 0.0


def action_key(text: str, kind: str = "tool") -> str:
    """What makes two turns the same action: `tool`, the sorted names of the tools the turn calls (`call:open,search`),
    `answer` for a final answer, `none` otherwise; `exact`, the whitespace-normalised text.

    >>> action_key('<tool_call>{"name": "search", "arguments": {"query": "Kalo"}}</tool_call>')
    'call:search'
    >>> action_key("<answer>Velmor</answer>"), action_key("go east", "exact")
    ('answer', 'go east')
    """
    if kind == "exact":
        return " ".join(text.split())
    if kind != "tool":
        raise ValueError(f"action_key must be 'tool' or 'exact', got {kind!r}")
    if parse_answer(text) is not None:
        return "answer"
    names = sorted({c.name for c in parse_tool_calls(text) if getattr(c, "name", None)})
    return "call:" + ",".join(names) if names else "none"


@dataclass(frozen=True)
class JitRLParams:
    """JitRL (Liu et al. 2026, arXiv:2601.18510): trajectory memory, neighbour advantages, logit shift."""

    candidates: int = 4
    """K: turns sampled from the frozen policy per decision; >= 1 (1: the policy unchanged)."""
    neighbours: int = 16
    """k: stored steps retrieved per decision (the most similar states); >= 1."""
    min_similarity: float = 0.3
    """r: a stored step counts only when its state's word Jaccard similarity is >= this; in [0, 1]."""
    beta: float = 0.25
    """KL coefficient: logits over the candidates move by A / beta; > 0 (inf: no shift)."""
    gamma: float = 0.95
    """Discount of the stored returns G_t = sum_u gamma^u r_{t+u}; in [0, 1]."""
    bonus: float = 0.5
    """An action no neighbour took gets the value baseline + bonus / (neighbours found); >= 0."""
    normalize: bool = True
    """Divide advantages by the largest positive one (else the largest negative one's magnitude), as the authors'
    code does."""
    action_key: str = "tool"
    """`tool` (the tool names called, or `answer`) or `exact` (the turn's text)."""
    mode: str = "sample"
    """`sample`: pick candidate i with probability proportional to exp(A_i / beta); `greedy`: argmax of
    log pi + A / beta."""
    capacity: int = 20000
    """Steps the memory keeps (oldest dropped first); >= 1."""

    def __post_init__(self) -> None:
        if self.candidates < 1 or self.neighbours < 1 or self.capacity < 1:
            raise ValueError("candidates, neighbours and capacity must be >= 1")
        if not 0.0 <= self.min_similarity <= 1.0 or not 0.0 <= self.gamma <= 1.0:
            raise ValueError("min_similarity and gamma must be in [0, 1]")
        if not self.beta > 0 or self.bonus < 0:
            raise ValueError(f"beta must be > 0 and bonus >= 0, got {self.beta} and {self.bonus}")
        if self.action_key not in ("tool", "exact") or self.mode not in ("sample", "greedy"):
            raise ValueError(
                f"action_key must be tool|exact and mode sample|greedy, got {self.action_key}, {self.mode}"
            )


@dataclass
class JitMemory:
    """The non-parametric memory: one entry per stored step (state words, action key, discounted return)."""

    params: JitRLParams = field(default_factory=JitRLParams)
    states: list[frozenset[str]] = field(default_factory=list)
    keys: list[str] = field(default_factory=list)
    returns: list[float] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.keys)

    def add(self, state: str, key: str, ret: float) -> None:
        self.states.append(state_words(state))
        self.keys.append(key)
        self.returns.append(float(ret))
        if len(self.keys) > self.params.capacity:
            del self.states[0], self.keys[0], self.returns[0]

    def add_episode(self, states: list[str], keys: list[str], rewards: list[float]) -> None:
        """Store an episode's steps with their discounted returns G_t = sum_u gamma^u r_{t+u}."""
        if not len(states) == len(keys) == len(rewards):
            raise ValueError(f"states, keys and rewards differ in length: {len(states)}, {len(keys)}, {len(rewards)}")
        g, out = 0.0, []
        for r in reversed(rewards):
            g = float(r) + self.params.gamma * g
            out.append(g)
        for s, k, ret in zip(states, keys, reversed(out)):
            self.add(s, k, ret)

    def neighbours(self, state: str) -> list[int]:
        """Indices of the `neighbours` most similar stored states with similarity >= `min_similarity` (ties: newest)."""
        words, p = state_words(state), self.params
        scored = [(jaccard(words, s), i) for i, s in enumerate(self.states)]
        scored = [(sim, i) for sim, i in scored if sim >= p.min_similarity]
        scored.sort(key=lambda x: (-x[0], -x[1]))
        return [i for _, i in scored[: p.neighbours]]

    def advantages(self, state: str, keys: list[str]) -> list[float]:
        """A for each of `keys` at `state` (0 for all when no neighbour is found).

        >>> m = JitMemory(JitRLParams(min_similarity=0.0, bonus=0.0))
        >>> m.add_episode(["s"], ["answer"], [0.0]); m.add_episode(["s"], ["call:search"], [1.0])
        >>> m.advantages("s", ["answer", "call:search", "none"])
        [-1.0, 1.0, 0.0]
        """
        idx = self.neighbours(state)
        if not idx:
            return [0.0] * len(keys)
        by_key: dict[str, list[float]] = {}
        for i in idx:
            by_key.setdefault(self.keys[i], []).append(self.returns[i])
        baseline = sum(self.returns[i] for i in idx) / len(idx)
        value = {k: sum(v) / len(v) for k, v in by_key.items()}
        for k in keys:
            value.setdefault(k, baseline + self.params.bonus / len(idx))
        adv = {k: v - baseline for k, v in value.items()}
        if self.params.normalize:
            top = max(adv.values())
            scale = top if top > 0 else -min(adv.values())
            if scale > 0:
                adv = {k: a / scale for k, a in adv.items()}
        return [adv[k] for k in keys]


def choose(
    logprobs: list[float], advantages: list[float], beta: float, mode: str, generator: Optional[torch.Generator]
) -> int:
    """The candidate picked: `sample`, i with probability proportional to exp(A_i / beta) (the candidates are draws
    from pi); `greedy`, argmax of log pi_i + A_i / beta (first on ties).

    >>> choose([-1.0, -3.0], [0.0, 1.0], 0.4, "greedy", None), choose([-1.0, -3.0], [0.0, 0.5], 0.4, "greedy", None)
    (1, 0)
    """
    shift = [a / beta if math.isfinite(beta) else 0.0 for a in advantages]
    if mode == "greedy":
        scores = [lp + s for lp, s in zip(logprobs, shift)]
        return max(range(len(scores)), key=lambda i: (scores[i], -i))
    w = torch.softmax(torch.tensor(shift, dtype=torch.float64), dim=0)
    return int(torch.multinomial(w, 1, generator=generator).item())


def state_text(traj: Trajectory) -> str:
    """The state a decision is made in: every message so far (prompt, earlier turns, observations)."""
    return "\n".join(m["content"] for m in traj.messages if m["role"] != "system")


@AGENT_DECODERS.register(
    "jitrl",
    params=JitRLParams,
    paper=papers.JITRL,
    fidelity="reduced",
    departures=(
        (
            "candidate actions are K turns sampled from the policy and re-picked (sampling-importance-resampling of "
            "pi * exp(A / beta), or argmax of log pi + A / beta), not the LLM's listed options with their logits"
        ),
        (
            "states are compared by word Jaccard similarity of the whole conversation so far (the authors combine "
            "history unigram and current-observation 4-gram Jaccard with embeddings)"
        ),
        (
            "`action_key=tool` counts turns that call the same tools (or answer) as the same action, so statistics "
            "transfer across questions; the authors match action strings"
        ),
        (
            "returns are the environment's step rewards only (no LLM step evaluator); the unseen-action bonus is "
            "always applied (the authors gate it with an adaptive exploration probability) and there is no "
            "episode-count weight on the shift"
        ),
    ),
)
class JitRL:
    """JitRL (Liu et al. 2026, arXiv:2601.18510): a frozen policy's agent turns re-picked among K samples by
    advantages from a trajectory memory (module docstring). `play(tasks)` runs episodes and, with `learn`, stores
    them in the memory afterwards."""

    def __init__(
        self,
        engine: RolloutEngine,
        policy: Any,
        make_env: Callable[[], Env],
        cfg: AgentConfig = AgentConfig(),
        params: JitRLParams = JitRLParams(),
        memory: Optional[JitMemory] = None,
    ) -> None:
        self.engine, self.policy, self.make_env, self.cfg, self.params = engine, policy, make_env, cfg, params
        self.memory = memory if memory is not None else JitMemory(params)
        self.shifted = 0
        """Decisions at which the memory gave some candidate a non-zero advantage."""

    def play(
        self, tasks: list[Any], generator: Optional[torch.Generator] = None, learn: bool = True
    ) -> list[Trajectory]:
        """One episode per task (concurrent environments, one engine call per decision round); stored afterwards
        when `learn`."""
        trajs, states, keys = asyncio.run(self._aplay(tasks, generator))
        if learn:
            for t, s, k in zip(trajs, states, keys):
                self.memory.add_episode(s, k, [u.reward for u in t.turns])
        return trajs

    async def _aplay(
        self, tasks: list[Any], generator: Optional[torch.Generator]
    ) -> tuple[list[Trajectory], list[list[str]], list[list[str]]]:
        fmt = ChatFormat.from_tokenizer(self.policy.tokenizer, self.cfg.observation_role)
        episodes = [_Episode(self.make_env(), task, g) for g, task in enumerate(tasks)]
        for e, obs in zip(episodes, await asyncio.gather(*(e.env.areset(e.task) for e in episodes))):
            e.start(fmt, obs, self.cfg)
        states: list[list[str]] = [[] for _ in episodes]
        keys: list[list[str]] = [[] for _ in episodes]
        while True:
            active = [i for i, e in enumerate(episodes) if e.active and len(e.traj.turns) < self.cfg.max_turns]
            if not active:
                break
            texts = self._decide([episodes[i] for i in active], fmt, generator, [states[i] for i in active])
            for i, text in zip(active, texts):
                keys[i].append(action_key(text, self.params.action_key))
            results = await asyncio.gather(*(episodes[i].env.astep(t) for i, t in zip(active, texts)))
            for i, res in zip(active, results):
                e = episodes[i]
                e.observe(fmt, res, self.cfg, last_turn=len(e.traj.turns) == self.cfg.max_turns)
        return [e.traj for e in episodes], states, keys

    def _decide(
        self, episodes: list[_Episode], fmt: ChatFormat, generator: Optional[torch.Generator], states: list[list[str]]
    ) -> list[str]:
        """K candidates per episode in one engine call; the picked one is appended to each trajectory."""
        p, cfg = self.params, self.cfg
        budgets = [e.budget(fmt, cfg) for e in episodes]
        s = SamplingSettings(
            max_new_tokens=max(budgets),
            eos_id=fmt.turn_end_id,
            pad_id=self.policy.pad_id,
            temperature=cfg.temperature,
            top_p=cfg.top_p,
            top_k=cfg.top_k,
        )
        gen = self.engine.generate(self.policy.model, [e.traj.ids for e in episodes], p.candidates, s, generator)
        texts = []
        for j, (e, budget) in enumerate(zip(episodes, budgets)):
            cands = []
            for r in range(j * p.candidates, (j + 1) * p.candidates):
                n = int(gen.lengths[r])
                ids, lps = gen.tokens[r, :n].tolist(), gen.logprobs[r, :n].tolist()
                keep, stop = cut_turn(fmt.tokenizer, ids, fmt.stop_ids, cfg.stop_strings, budget)
                text = fmt.tokenizer.decode(ids[:keep], skip_special_tokens=True)
                cands.append((ids[:keep], lps[:keep], stop, action_key(text, p.action_key)))
            state = state_text(e.traj)
            adv = self.memory.advantages(state, [c[3] for c in cands])
            self.shifted += any(a != 0 for a in adv)
            pick = choose([sum(c[1]) for c in cands], adv, p.beta, p.mode, generator)
            ids, lps, stop, _ = cands[pick]
            states[j].append(state)
            texts.append(e.add_turn(fmt, ids, lps, stop))
        return texts
