"""In-Context Policy Iteration (ICPI; Brooks, Walls, Lewis & Singh 2022, arXiv:2210.03821) on a tiny text MDP.

A frozen language model is both the world model and the rollout policy; all learning is in the prompt. At state s,
for every action a, ICPI rolls out in the model: the world-model prompt (transitions from the replay buffer that
took the same action, terminal and non-terminal balanced, then `state = s; action = a;`) is completed with the
reward and next state; the policy prompt (the most recent episodes, then `state = s';`) is completed with the next
action; and so on until the model says the episode is done or `depth` steps. Q(s, a) is the discounted sum of the
predicted rewards; the agent takes argmax_a Q (ties at random) in the real MDP, appends the transition to the
buffer, and the next prompts show it: the policy improves because the prompt's episodes are its own recent
(greedy) behaviour, the policy-iteration loop of the paper.

The MDP is the paper's "chain": positions 0..n-1, the agent starts at a random position other than the goal, actions
`left` / `right` move one step (clipped at the ends), reaching the goal pays 1 and ends the episode; an episode is at
most `horizon` steps.

Models (`TextModel`: `complete(prompts, max_new_tokens) -> completions`): `HFTextModel` wraps a Hugging Face causal
LM (SmolLM2-135M-Instruct in the measurement, a scratch model in the tests), greedy, one batch per rollout step
across actions, its answer the first non-empty line it writes; `ScriptedModel` is the stand-in upper bound: a
perfect in-context copier that answers a world-model query with the outcome of the same (state, action) in its
prompt (reward 0 and the same state where there is none) and a policy query with the action last taken from that
state in its prompt (random where the prompt holds none). Text the parser cannot read counts as a
`parse_failure` (the rollout ends with reward 0) and never raises.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Optional, Protocol

import numpy as np
import torch

from ascent.incontext.agents import AGENTS
from ascent.papers import ICPI

ACTIONS = ("left", "right")


@dataclass(frozen=True)
class Transition:
    state: int
    action: int
    reward: float
    next_state: int
    done: bool

    def text(self) -> str:
        """`state = 2; action = right; reward = 0; next state = 3` (+ `; done` at the end of an episode)."""
        end = "; done" if self.done else ""
        return (
            f"state = {self.state}; action = {ACTIONS[self.action]}; reward = {self.reward:g}; "
            f"next state = {self.next_state}{end}"
        )


class ChainMDP:
    """The chain: n positions, goal at `goal`, actions left/right, reward 1 on reaching the goal (episode ends)."""

    def __init__(self, n: int = 6, goal: int = 4, horizon: int = 8) -> None:
        if not 0 <= goal < n or n < 2 or horizon < 1:
            raise ValueError("need n >= 2, 0 <= goal < n and horizon >= 1")
        self.n, self.goal, self.horizon = n, goal, horizon

    def reset(self, rng: np.random.Generator) -> int:
        return int(rng.choice([s for s in range(self.n) if s != self.goal]))

    def step(self, s: int, a: int) -> tuple[float, int, bool]:
        nxt = min(self.n - 1, max(0, s + (1 if a == 1 else -1)))
        return (1.0, nxt, True) if nxt == self.goal else (0.0, nxt, False)

    def optimal_return(self, s: int, gamma: float) -> float:
        d = abs(s - self.goal)
        return gamma ** (d - 1) if d <= self.horizon else 0.0


class TextModel(Protocol):
    def complete(self, prompts: list[str], max_new_tokens: int) -> list[str]: ...


class ScriptedModel:
    """The stand-in upper bound: copies the answer to the same query from its prompt (see the module docstring)."""

    def __init__(self, seed: int = 0) -> None:
        self.rng = np.random.default_rng(seed)

    def complete(self, prompts: list[str], max_new_tokens: int) -> list[str]:
        return [self._one(p) for p in prompts]

    def _one(self, prompt: str) -> str:
        *examples, query = prompt.rstrip("\n").split("\n")
        if "action = " in query:  # world model: `state = s; action = a;`
            for line in reversed(examples):
                if line.startswith(query):
                    return line[len(query) :] + "\n"
            return f" reward = 0; next state = {query.split(';')[0].split('=')[1].strip()}\n"
        for line in reversed(examples):  # policy: `state = s; action =`
            if line.startswith(query):
                return " " + line[len(query) :].split(";")[0].strip() + "\n"
        return f" {ACTIONS[int(self.rng.integers(2))]}\n"


class HFTextModel:
    """A Hugging Face causal LM and tokenizer, greedy, batched with left padding, cut at the first newline."""

    def __init__(self, model, tokenizer) -> None:
        self.model, self.tok = model.eval(), tokenizer
        self.tok.padding_side = "left"
        if self.tok.pad_token_id is None:
            self.tok.pad_token = self.tok.eos_token

    @torch.inference_mode()
    def complete(self, prompts: list[str], max_new_tokens: int) -> list[str]:
        enc = self.tok(prompts, return_tensors="pt", padding=True)
        out = self.model.generate(
            **enc,
            max_new_tokens=max_new_tokens,
            do_sample=False,
            pad_token_id=self.tok.pad_token_id,
        )
        texts = self.tok.batch_decode(out[:, enc["input_ids"].shape[1] :], skip_special_tokens=True)
        return [(t.strip("\n").split("\n") or [""])[0] for t in texts]  # the first non-empty line


WM_RE = re.compile(r"^\s*reward\s*=\s*(-?[0-9.]+)\s*;\s*next state\s*=\s*(\d+)\s*(;\s*done)?")
POLICY_RE = re.compile(r"^\s*(left|right)\b")


@dataclass(frozen=True)
class ICPIParams:
    """In-context policy iteration (prompt sizes, rollout depth, discount)."""

    gamma: float = 0.8
    """Discount of the rollout's predicted rewards."""
    depth: int = 4
    """Steps per rollout (the model's `done` ends it earlier)."""
    wm_examples: int = 8
    """World-model prompt: up to this many buffer transitions with the queried action, half terminal if any."""
    policy_episodes: int = 3
    """Policy prompt: the most recent episodes (their steps as `state = s; action = a`)."""
    max_new_tokens: int = 12
    """Tokens generated per query."""

    def __post_init__(self) -> None:
        if not 0 < self.gamma <= 1 or self.depth < 1 or self.wm_examples < 1 or self.policy_episodes < 1:
            raise ValueError("need 0 < gamma <= 1 and depth, wm_examples, policy_episodes >= 1")


@dataclass
class ICPIStats:
    wm_queries: int = 0
    wm_correct: int = 0
    policy_queries: int = 0
    parse_failures: int = 0
    samples: list[tuple[str, str]] = field(default_factory=list)


class ICPIAgent:
    """ICPI's loop over one MDP: `act(s)` (Q by model rollouts, argmax), `observe(transition)` (the buffer)."""

    def __init__(self, model: TextModel, params: ICPIParams, mdp: ChainMDP, seed: int = 0) -> None:
        self.model, self.params, self.mdp = model, params, mdp
        self.rng = np.random.default_rng([seed, 65])
        self.episodes: list[list[Transition]] = [[]]
        self.stats = ICPIStats()

    # prompts ---------------------------------------------------------------------------------------------------
    def world_model_prompt(self, s: int, a: int) -> str:
        same = [t for ep in self.episodes for t in ep if t.action == a]
        k = self.params.wm_examples
        term = [t for t in same if t.done][-(k // 2) :]
        rest = [t for t in same if not t.done][-(k - len(term)) :]
        lines = [t.text() for t in sorted(term + rest, key=lambda t: (t.state, t.done))]
        return "\n".join(lines + [f"state = {s}; action = {ACTIONS[a]};"])

    def policy_prompt(self, s: int) -> str:
        eps = [ep for ep in self.episodes if ep][-self.params.policy_episodes :]
        lines = [f"state = {t.state}; action = {ACTIONS[t.action]}" for ep in eps for t in ep]
        return "\n".join(lines + [f"state = {s}; action ="])

    # rollouts --------------------------------------------------------------------------------------------------
    def q_values(self, s: int) -> np.ndarray:
        """Q(s, a) for every action by rollouts in the model, the actions' rollouts batched step by step."""
        p, n = self.params, len(ACTIONS)
        state, action = [s] * n, list(range(n))
        q, alive, disc = np.zeros(n), [True] * n, np.ones(n)
        for _ in range(p.depth):
            idx = [i for i in range(n) if alive[i]]
            if not idx:
                break
            prompts = [self.world_model_prompt(state[i], action[i]) for i in idx]
            outs = self.model.complete(prompts, p.max_new_tokens)
            for i, prompt, out in zip(idx, prompts, outs):
                self._record(prompt, out)
                m = WM_RE.match(out)
                self.stats.wm_queries += 1
                if m is None:
                    self.stats.parse_failures += 1
                    alive[i] = False
                    continue
                r, nxt, done = float(m.group(1)), int(m.group(2)), m.group(3) is not None
                true = self.mdp.step(state[i], action[i]) if 0 <= state[i] < self.mdp.n else None
                self.stats.wm_correct += int(true == (r, nxt, done))
                q[i] += disc[i] * r
                disc[i] *= p.gamma
                state[i], alive[i] = nxt, not done
            idx = [i for i in range(n) if alive[i]]
            if idx:
                outs = self.model.complete([self.policy_prompt(state[i]) for i in idx], 4)
                for i, out in zip(idx, outs):
                    self.stats.policy_queries += 1
                    m = POLICY_RE.match(out)
                    if m is None:
                        self.stats.parse_failures += 1
                        alive[i] = False
                    else:
                        action[i] = ACTIONS.index(m.group(1))
        return q

    def _record(self, prompt: str, out: str) -> None:
        if len(self.stats.samples) < 40:
            self.stats.samples.append((prompt.split("\n")[-1], out))

    def act(self, s: int) -> int:
        q = self.q_values(s)
        best = np.flatnonzero(q >= q.max() - 1e-9)
        return int(self.rng.choice(best))

    def observe(self, t: Transition) -> None:
        self.episodes[-1].append(t)
        if t.done:
            self.episodes.append([])

    def end_episode(self) -> None:
        if self.episodes[-1]:
            self.episodes.append([])


def run_episodes(agent, mdp: ChainMDP, episodes: int, seed: int, gamma: float) -> np.ndarray:
    """(episodes,) discounted returns of `agent` (act/observe/end_episode) on the chain, starts seeded."""
    rng = np.random.default_rng([seed, 3])
    out = np.zeros(episodes)
    for e in range(episodes):
        s = mdp.reset(rng)
        for t in range(mdp.horizon):
            a = agent.act(s)
            r, nxt, done = mdp.step(s, a)
            agent.observe(Transition(s, a, r, nxt, done))
            out[e] += gamma**t * r
            s = nxt
            if done:
                break
        agent.end_episode()
    return out


class RandomAgent:
    """Uniform actions (the lower bound)."""

    def __init__(self, seed: int = 0) -> None:
        self.rng = np.random.default_rng([seed, 66])

    def act(self, s: int) -> int:
        return int(self.rng.integers(len(ACTIONS)))

    def observe(self, t: Transition) -> None:
        pass

    def end_episode(self) -> None:
        pass


@AGENTS.register(
    "icpi",
    params=ICPIParams,
    paper=ICPI,
    fidelity="reduced",
    departures=(
        "one tiny domain (the chain) and a 135M model instead of Codex on six domains",
        "the policy prompt is the most recent episodes; the paper also balances and filters the episodes it shows",
        "greedy argmax on Q with random ties, no epsilon exploration; rollouts cut at `depth` steps",
        "a parse failure ends the rollout with reward 0 (counted), where the paper's Codex rarely fails to parse",
    ),
)
def icpi(
    params: ICPIParams = ICPIParams(), model: Optional[TextModel] = None, mdp: Optional[ChainMDP] = None, seed: int = 0
) -> ICPIAgent:
    """ICPI (Brooks et al. 2022, arXiv:2210.03821): Q(s, a) from world-model and policy rollouts of a frozen LM
    prompted with the replay buffer; act greedily; the buffer (the prompt) is the only thing that learns. The model
    defaults to the scripted stand-in (`ScriptedModel`)."""
    return ICPIAgent(model or ScriptedModel(seed), params, mdp or ChainMDP(), seed)
