"""Speculative agent planning: a cheap draft planner proposes the agent's next k steps, the policy verifies them,
and a learned chooser picks k per state (Dynamic Speculative Planning, Guan et al. 2025, arXiv:2509.01920,
after Interactive Speculative Planning, Hua et al. 2024, arXiv:2410.00079).

One episode (`plan_episode`), one round at a time, from the current state s_i:

1. the chooser (`SPECULATION_K`) picks k_i from s_i's features; k_i = 0 is a plain policy turn;
2. the draft planner (any `respond(context) -> reply`, e.g. the scripted `OracleAgent`) writes the next step,
   the environment executes it, and so on for k_i steps (the draft sees its own steps' observations);
3. the policy verifies every drafted turn in ONE forward pass over the whole speculated sequence (prompt,
   drafted turns, their observations): token by token, `accept_draft` keeps the longest prefix the policy
   agrees with. Greedy (temperature 0): a token is kept iff it is the policy's argmax. Sampled: a token x is
   kept with probability p(x) (speculative sampling with a point-mass draft, Leviathan et al. 2023); at the
   first rejection the policy's own token is drawn from p with x removed (renormalised);
4. fully accepted turns stand as they are (their environment steps already ran); from the first rejected turn
   on, the speculation is discarded: the environment is rebuilt and the accepted turns replayed on it (so the
   environment must be deterministic given the turns' texts, as `ascent.agents.acontinue` also assumes), and the
   policy's turn is finished by the rollout engine from the accepted tokens plus the corrected one;
5. the chooser learns from the round (`KChooser.update`).

What is guaranteed (the lossless property of speculative planning): every kept token is a token the policy
itself would have produced from the same context. Greedy: the trajectory is the one `ascent.agents.rollout` would
produce at temperature 0, token for token, up to argmax ties that the batched verification forward and the
engine's incremental decode break differently in floating point (`benchmarks/agent_dsp.py` counts the episodes
that differ). Sampled: each turn has exactly the policy's sampling distribution (temperature only; top-p/top-k are
refused). The draft planner never changes what the agent does, only how long it takes and what it costs.

The DSP chooser (`dsp`): a linear value V(s) = w . phi(s) over hashed features of the state (`state_features`: the
question's lower-case words, the last assistant turn's first words, the turn index, and their pairs with the turn
index) estimates how many consecutive drafted steps the policy will accept from s.
Its TD target after a verified draft step is y_i = a_i (1 + gamma V(s_{i+1})) (a_i = 1 accepted, 0 rejected;
0 after the episode ends), fitted online with the expectile loss |tau - 1[y < V]| (y - V)^2; k_i =
clip(round(V(s_i)), k_min, k_max). tau is the one user knob: tau > 0.5 over-estimates the run (speculates
further: faster, more wasted cost), tau < 0.5 under-estimates it (cheaper, slower).
"""

from __future__ import annotations

import dataclasses
import math
import re
import time
import zlib
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

import numpy as np
import torch

from ascent import papers
from ascent.agents.chat import ChatFormat
from ascent.agents.loop import AgentConfig, _Episode, cut_turn
from ascent.agents.trajectory import Trajectory
from ascent.envs.base import Env, StepResult
from ascent.registry import Registry
from ascent.rollout.engine import RolloutEngine
from ascent.rollout.types import SamplingSettings

SPECULATION_K: Registry = Registry("speculation-k chooser")
"""How many steps to speculate from a state: `fn(params) -> KChooser`."""


class KChooser:
    """Picks the speculation depth k for a state and learns from the verified drafts (the interface)."""

    def choose(self, phi: np.ndarray) -> int:
        """k >= 0 for a state with features `phi` (0: the policy plays the turn itself)."""
        raise NotImplementedError

    def update(self, steps: list[tuple[np.ndarray, bool, Optional[np.ndarray]]]) -> None:
        """Learn from one round: per verified draft step (features of its state, accepted, features of the next
        state, None when the episode ended there), in order."""


@dataclass(frozen=True)
class FixedKParams:
    """A fixed speculation depth (Interactive Speculative Planning's k)."""

    k: int = 2
    """Drafted steps per round (0: no speculation, the plain agent loop)."""

    def __post_init__(self) -> None:
        if not 0 <= self.k <= 64:
            raise ValueError(f"k must be in [0, 64], got {self.k}")


class FixedK(KChooser):
    def __init__(self, k: int) -> None:
        self.k = k

    def choose(self, phi: np.ndarray) -> int:
        return self.k


@SPECULATION_K.register(
    "fixed",
    "the same k from every state (k=0: no speculation)",
    params=FixedKParams,
    paper=papers.ISP,
    fidelity="reduced",
    departures=(
        "the target verifies all drafted steps in one forward pass after the draft finishes, not one target call per "
        "step running concurrently with the drafts: one CPU process, a small policy whose verification is a prefill",
    ),
)
def fixed_k(params: FixedKParams = FixedKParams()) -> KChooser:
    return FixedK(params.k)


@dataclass(frozen=True)
class DSPParams:
    """DSP's online predictor of the speculation depth (expectile TD regression over state features)."""

    tau: float = 0.5
    """Expectile of the fit, in (0, 1): above 0.5 speculates further (faster, more waste), below is cheaper."""
    k_min: int = 1
    """Smallest k it picks (>= 1 keeps learning everywhere: a state with k=0 yields no verified draft)."""
    k_max: int = 4
    """Largest k it picks."""
    lr: float = 0.2
    """Step size of the online expectile regression (per update, on unit-norm features)."""
    gamma: float = 1.0
    """Discount of the TD target y = a (1 + gamma V(s'))."""
    init: float = 1.0
    """Initial value of V (its bias weight): the k picked before anything is learned."""
    dims: int = 256
    """Hashed feature dimensions."""

    def __post_init__(self) -> None:
        if not 0 < self.tau < 1:
            raise ValueError(f"tau must be in (0, 1), got {self.tau}")
        if not 0 <= self.k_min <= self.k_max:
            raise ValueError(f"need 0 <= k_min <= k_max, got {self.k_min} and {self.k_max}")
        if self.lr <= 0 or not 0 <= self.gamma <= 1 or self.dims < 2:
            raise ValueError(f"need lr > 0, gamma in [0, 1], dims >= 2; got {self.lr}, {self.gamma}, {self.dims}")


class DSPChooser(KChooser):
    """V(s) = w . phi(s) fitted online to y = a (1 + gamma V(s')) with the tau-expectile loss; k = round(V)."""

    def __init__(self, p: DSPParams = DSPParams()) -> None:
        self.p = p
        self.w = np.zeros(p.dims + 1)  # last weight: the bias (feature 1)
        self.w[-1] = p.init
        self.updates = 0

    def value(self, phi: np.ndarray) -> float:
        return float(self.w[:-1] @ phi + self.w[-1])

    def choose(self, phi: np.ndarray) -> int:
        return int(min(max(round(self.value(phi)), self.p.k_min), self.p.k_max))

    def update(self, steps: list[tuple[np.ndarray, bool, Optional[np.ndarray]]]) -> None:
        for phi, accepted, nxt in steps:
            boot = self.value(nxt) if nxt is not None else 0.0
            y = float(accepted) * (1.0 + self.p.gamma * max(boot, 0.0))  # (a run length is never negative)
            delta = y - self.value(phi)
            weight = self.p.tau if delta >= 0 else 1.0 - self.p.tau  # |tau - 1[delta < 0]|
            x = np.append(phi, 1.0)
            self.w += self.p.lr * 2.0 * weight * delta * x / float(x @ x)  # normalised step on the expectile loss
            self.updates += 1


@SPECULATION_K.register(
    "dsp",
    "DSP: k from an online expectile TD regression of the accepted-run length on state features",
    params=DSPParams,
    paper=papers.DSP,
    fidelity="reduced",
    departures=(
        "a linear regression over hashed words of the state (the question's lower-case words, the last turn's first "
        "words, the turn index and their pairs with it) instead of the paper's DistilBERT regressor: the search "
        "world's states are short templated texts",
        "updated synchronously after each verified round (normalised SGD on the expectile loss), not by a trainer "
        "in a separate asynchronous process: numpy updates of 257 weights take microseconds",
        "the TD target y = a (1 + gamma V(s')) with a = 1 for an accepted step is ascent's reading of the paper's "
        "accepted-run target; k = clip(round(V), k_min, k_max)",
    ),
)
def dsp_k(params: DSPParams = DSPParams()) -> KChooser:
    return DSPChooser(params)


def state_features(traj: Trajectory, dims: int = 256) -> np.ndarray:
    """Unit-norm hashed features of the state: the lower-case words of the first user message (capitalised words,
    the names, are left out: they identify the question, not its kind), the first words of the last assistant turn
    (which tool it called, or an answer) and the turn index, each alone and paired with the turn index.

    >>> t = Trajectory([0], [0], [0.0], 1, [{"role": "user", "content": "Who is Kalo?"}], None, 0)
    >>> phi = state_features(t, 16)
    >>> phi.shape, round(float(phi @ phi), 6)
    ((16,), 1.0)
    """
    user = next((m["content"] for m in traj.messages if m["role"] == "user"), "")
    last = next((m["content"] for m in reversed(traj.messages) if m["role"] == "assistant"), "")
    turn = f"turn:{len(traj.turns)}"
    words = [f"q:{w}" for w in re.findall(r"\b[a-z]+\b", user)]
    words += [f"a:{w}" for w in re.findall(r"[a-z]+", last.lower())[:4]]
    words += [turn] + [f"{turn}|{w}" for w in words]
    phi = np.zeros(dims)
    for w in words:
        phi[zlib.crc32(w.encode()) % dims] += 1.0
    return phi / max(float(np.linalg.norm(phi)), 1e-12)


def accept_draft(
    logits: torch.Tensor, draft: list[int], temperature: float, generator: Optional[torch.Generator] = None
) -> tuple[int, Optional[int], list[float]]:
    """How many of the `draft` tokens the policy keeps, its own token at the first rejection (None when all are
    kept), and the log-probs under the policy of the kept tokens and of that correction. `logits` (n, V): the
    policy's logits predicting each draft token. Greedy (temperature 0): keep while the token is the argmax; the
    correction is the argmax. Sampled: keep x with probability p(x); the correction is drawn from p without x,
    renormalised (so each token is exactly p-distributed).

    >>> logits = torch.tensor([[2.0, 0.0, 0.0], [0.0, 3.0, 0.0], [1.0, 0.0, 0.0]])
    >>> n, fix, lps = accept_draft(logits, [0, 1, 2], 0.0)
    >>> n, fix, len(lps)
    (2, 0, 3)
    """
    scaled = logits.float() / temperature if temperature > 0 else logits.float()  # (n, V)
    logp = torch.log_softmax(scaled, dim=-1)  # (n, V)
    kept: list[float] = []
    for i, x in enumerate(draft):
        if temperature <= 0:
            ok = int(torch.argmax(logp[i])) == x
        else:
            u = torch.rand((), generator=generator)
            ok = bool(u < logp[i, x].exp())
        if not ok:
            if temperature <= 0:
                fix = int(torch.argmax(logp[i]))
            else:
                rest = logp[i].exp().clone()  # (V,)
                rest[x] = 0.0
                fix = int(torch.multinomial(rest / rest.sum(), 1, generator=generator))
            return i, fix, kept + [float(logp[i, fix])]
        kept.append(float(logp[i, x]))
    return len(draft), None, kept


@dataclass
class PlanStats:
    """What one episode cost. Policy tokens: every token the policy read or wrote (a generate call: its context
    and its sampled tokens; a verification: the whole speculated sequence); wasted: spent on drafted turns that
    were discarded (draft tokens, verification positions past the first rejection, environment steps)."""

    seconds: float = 0.0
    """Wall-clock seconds of the episode (draft, environment, policy)."""
    policy_calls: int = 0
    """Sequential policy invocations (engine generate calls + verification forwards)."""
    generate_calls: int = 0
    verify_calls: int = 0
    policy_tokens: int = 0
    draft_tokens: int = 0
    env_steps: int = 0
    """Environment steps run, including discarded speculative ones and replays."""
    wasted_policy_tokens: int = 0
    wasted_draft_tokens: int = 0
    wasted_env_steps: int = 0
    drafted_turns: int = 0
    accepted_turns: int = 0
    ks: list[int] = field(default_factory=list)
    """The k chosen in each round."""


@dataclass
class _Drafted:
    ids: list[int]
    stop: str
    result: StepResult
    phi: np.ndarray
    """Features of the state the step was drafted from."""


def _fork(e: _Episode) -> _Episode:
    """A copy of an episode under construction that can be extended without touching the original."""
    t = e.traj
    copy = dataclasses.replace(
        t,
        ids=list(t.ids),
        loss_mask=list(t.loss_mask),
        sampled_logprobs=list(t.sampled_logprobs),
        messages=[dict(m) for m in t.messages],
        turns=[dataclasses.replace(u) for u in t.turns],
        info=dict(t.info),
    )
    f = _Episode(e.env, e.task, e.group)
    f.traj = copy
    return f


class SpeculativePlanner:
    """Runs episodes with a draft planner, a verifying policy and a k chooser (see the module docstring)."""

    def __init__(
        self,
        engine: RolloutEngine,
        policy: Any,
        draft: Callable[[str], str],
        chooser: KChooser,
        make_env: Callable[[], Env],
        cfg: AgentConfig = AgentConfig(),
        features: Callable[[Trajectory], np.ndarray] = state_features,
    ) -> None:
        if cfg.top_p < 1.0 or cfg.top_k:
            raise ValueError("speculative planning verifies with temperature only; set top_p=1.0 and top_k=0")
        self.engine, self.policy, self.draft, self.chooser = engine, policy, draft, chooser
        self.make_env, self.cfg, self.features = make_env, cfg, features
        self.fmt = ChatFormat.from_tokenizer(policy.tokenizer, cfg.observation_role)

    def run(self, task: Any, generator: Optional[torch.Generator] = None) -> tuple[Trajectory, PlanStats]:
        """One episode of `task`; returns its trajectory and what it cost."""
        stats, t0 = PlanStats(), time.perf_counter()
        e = _Episode(self.make_env(), task, 0)
        e.start(self.fmt, e.env.reset(task), self.cfg)
        while e.active and len(e.traj.turns) < self.cfg.max_turns:
            k = min(self.chooser.choose(self.features(e.traj)), self.cfg.max_turns - len(e.traj.turns))
            stats.ks.append(k)
            if k == 0:
                self._policy_turn(e, list(e.traj.ids), [], stats, generator)
            else:
                self._round(e, k, stats, generator)
        stats.seconds = time.perf_counter() - t0
        return e.traj, stats

    def _round(self, e: _Episode, k: int, stats: PlanStats, generator: Optional[torch.Generator]) -> None:
        """Draft up to k steps on a fork, verify them in one forward, keep the accepted ones, finish the first
        rejected turn with the policy, and teach the chooser."""
        spec, drafted = _fork(e), []
        for _ in range(k):
            if not spec.active:
                break
            drafted.append(self._draft_step(spec, stats))
        ids = torch.tensor([spec.traj.ids], dtype=torch.long)  # (1, T)
        with torch.no_grad():
            logits = self.policy.model(ids).logits[0]  # (T, V)
        stats.policy_calls, stats.verify_calls = stats.policy_calls + 1, stats.verify_calls + 1
        stats.policy_tokens += len(spec.traj.ids)
        steps: list[tuple[np.ndarray, bool, Optional[np.ndarray]]] = []
        for j, (d, turn) in enumerate(zip(drafted, spec.traj.turns[len(e.traj.turns) :])):
            n, fix, lps = accept_draft(logits[turn.start - 1 : turn.end - 1], d.ids, self.cfg.temperature, generator)
            after_stop = n == len(d.ids) - 1 and d.stop == "eos" and _stop_before_end(self.fmt, self.cfg, d.ids)
            if n == len(d.ids) or after_stop:
                # accepted; or the policy would not end the turn right after its stop string: the loop cuts the turn
                # there, the same action, and the ids that follow are the same (template end instead of sampled end)
                keep = d.ids if n == len(d.ids) else d.ids[:-1]
                e.add_turn(self.fmt, keep, lps[: len(keep)], d.stop if n == len(d.ids) else "stop")
                e.observe(self.fmt, d.result, self.cfg, last_turn=len(e.traj.turns) == self.cfg.max_turns)
                stats.accepted_turns += 1
                steps.append((d.phi, True, self.features(e.traj) if e.active else None))
                continue
            steps.append((d.phi, False, None))
            self._discard(e, drafted, j, spec, turn.start + n, stats)
            self._policy_turn(e, list(e.traj.ids) + d.ids[:n] + [fix], lps, stats, generator)
            break
        self.chooser.update(steps)

    def _draft_step(self, spec: _Episode, stats: PlanStats) -> _Drafted:
        """The draft planner's next step on the fork: its reply as the loop would keep it, and the env's step."""
        phi = self.features(spec.traj)
        context = self.fmt.tokenizer.decode(spec.traj.ids, skip_special_tokens=False)
        reply = self.draft(context)
        ids = list(self.fmt.tokenizer(reply, add_special_tokens=False)["input_ids"]) + [self.fmt.turn_end_id]
        budget = spec.budget(self.fmt, self.cfg)
        keep, stop = cut_turn(self.fmt.tokenizer, ids[:budget], self.fmt.stop_ids, self.cfg.stop_strings, budget)
        ids = ids[:keep]
        text = spec.add_turn(self.fmt, ids, [0.0] * len(ids), stop)
        result = spec.env.step(text)
        spec.observe(self.fmt, result, self.cfg, last_turn=len(spec.traj.turns) == self.cfg.max_turns)
        stats.draft_tokens += len(ids)
        stats.env_steps += 1
        stats.drafted_turns += 1
        return _Drafted(ids, stop, result, phi)

    def _discard(
        self, e: _Episode, drafted: list[_Drafted], first: int, spec: _Episode, position: int, stats: PlanStats
    ) -> None:
        """Drop drafted steps `first`..: count their waste, rebuild the environment at the accepted state."""
        stats.wasted_draft_tokens += sum(len(d.ids) for d in drafted[first:])
        stats.wasted_env_steps += len(drafted) - first
        stats.wasted_policy_tokens += max(len(spec.traj.ids) - position, 0)
        env = self.make_env()
        env.reset(e.task)
        for u in e.traj.turns:
            env.step(u.text)
        stats.env_steps += len(e.traj.turns)
        stats.wasted_env_steps += len(e.traj.turns)
        e.env = env

    def _policy_turn(
        self,
        e: _Episode,
        prefix: list[int],
        head_lps: list[float],
        stats: PlanStats,
        generator: Optional[torch.Generator],
    ) -> None:
        """The policy's own turn from `prefix` (the context plus the turn's first tokens, already decided):
        sampled on by the engine, cut like the agent loop cuts it, then stepped in the environment."""
        head = prefix[len(e.traj.ids) :]
        budget = e.budget(self.fmt, self.cfg)
        ids, lps = list(head), list(head_lps)  # head_lps: the log-probs of the head's tokens (verification)
        room = budget - len(head)
        if room > 0 and not (head and head[-1] in self.fmt.stop_ids):
            s = SamplingSettings(
                max_new_tokens=room,
                eos_id=self.fmt.turn_end_id,
                pad_id=self.policy.pad_id,
                temperature=self.cfg.temperature,
            )
            gen = self.engine.generate(self.policy.model, [prefix], 1, s, generator)  # (1, room)
            n = int(gen.lengths[0])
            ids += gen.tokens[0, :n].tolist()
            lps += gen.logprobs[0, :n].tolist()
            stats.policy_calls, stats.generate_calls = stats.policy_calls + 1, stats.generate_calls + 1
            stats.policy_tokens += len(prefix) + n
        keep, stop = cut_turn(self.fmt.tokenizer, ids, self.fmt.stop_ids, self.cfg.stop_strings, budget)
        text = e.add_turn(self.fmt, ids[:keep], lps[:keep], stop)
        e.observe(self.fmt, e.env.step(text), self.cfg, last_turn=len(e.traj.turns) == self.cfg.max_turns)
        stats.env_steps += 1


def _stop_before_end(fmt: ChatFormat, cfg: AgentConfig, ids: list[int]) -> bool:
    """Whether the drafted turn `ids` (ending with the turn-end token) has a stop string right before that token:
    then a policy that does not end the turn there still plays the same action (the loop cuts at the stop)."""
    text = fmt.tokenizer.decode(ids[:-1], skip_special_tokens=False)
    return any(text.endswith(s) for s in cfg.stop_strings)


def summarize(stats: list[PlanStats]) -> dict[str, float]:
    """Per-episode means of a list of episodes' stats."""
    keys = [f.name for f in dataclasses.fields(PlanStats) if f.name != "ks"]
    out = {k: float(np.mean([getattr(s, k) for s in stats])) for k in keys}
    ks = [k for s in stats for k in s.ks]
    out["mean_k"] = float(np.mean(ks)) if ks else math.nan
    return out
