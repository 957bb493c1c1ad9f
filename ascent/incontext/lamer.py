"""LaMer (Jiang, Jiang, Teney, Moor & Brbić 2025, arXiv:2512.16848): meta-RL across attempts with reflection, on
TextWorld, against single-attempt GRPO at equal samples.

A trial is K attempts (episodes) at the same game. Between attempts the loop writes a reflection, text that
summarises the attempt (`reflect`: each command and its reward, won or not), and the next attempt's policy reads
every earlier reflection of the trial; nothing is updated between attempts (the adaptation is in-context).
Training (LaMer's cross-episode objective): attempt k of a trial is credited with the discounted return of the
trial from k on, G_k = R_k + gamma_traj G_{k+1}, normalised across the group of trials of the same game at the
same attempt index (GRPO's group baseline), so an attempt that explores and makes the next one win is rewarded.
The control, single-attempt GRPO, trains the same policy on single episodes (no reflection), the group being
episodes of the same game, with as many episodes per update: group x K.

The policy scores each admissible command (TextWorld's `Possible commands`, `show_commands=True`) linearly in a
hashed bag of the command's words and in what the trial's reflections say about it (tried and unrewarded, tried
and rewarded), whether it was already used in this attempt, and the attempt index; a softmax over the commands.
The games (`GameSpec(1 room, 4 objects, quest of 1 command)`, one command an attempt) hide the goal from this
policy: it sees the commands only, so finding the winning command is exploration, which the reflections can carry
across attempts. `GuessGame` is the same shape in pure Python (the tests' environment).
TextWorld games are deterministic; `GameCache` memoises the outcome of each command sequence.
"""

from __future__ import annotations

import re
import zlib
from dataclasses import dataclass
from typing import Optional

import numpy as np
import torch
from torch import nn

from ascent.incontext.agents import AGENTS
from ascent.papers import GRPO, LAMER

_COMMANDS = re.compile(r"Possible commands: (.*)\.\s*$", re.DOTALL)


def admissible(text: str) -> list[str]:
    """The commands listed at the end of an observation (`show_commands=True`); [] when none.

    >>> admissible("You see a box.\\n\\nPossible commands: look, open box, take key.")
    ['look', 'open box', 'take key']
    """
    m = _COMMANDS.search(text)
    return [c.strip() for c in m.group(1).split(", ")] if m else []


class GameCache:
    """Outcomes of command sequences on deterministic TextWorld games: (observation text, reward, done, won) after
    `commands`, from a `TextWorldEnv` (replayed from reset on a miss)."""

    def __init__(self, env) -> None:
        self.env = env
        self.memo: dict = {}

    def outcome(self, game, commands: tuple[str, ...]) -> tuple[str, float, bool, bool]:
        key = (str(game), commands)
        if key not in self.memo:
            if not commands:
                self.memo[key] = (self.env.reset(game).text, 0.0, False, False)
            else:
                self.outcome(game, commands[:-1])  # the prefix first (its own entry)
                self.env.reset(game)
                for c in commands[:-1]:
                    self.env.step(c)
                r = self.env.step(commands[-1])
                self.memo[key] = (r.observation, float(r.reward), bool(r.done), bool(r.info.get("won")))
        return self.memo[key]


def reflect(k: int, steps: list[tuple[str, float]], won: bool) -> str:
    """The reflection after attempt k (1-based): every command with its reward, and the outcome.

    >>> reflect(1, [("open box", 0.0), ("take key", 1.0)], True)
    'Attempt 1: open box (reward 0); take key (reward 1). Won.'
    """
    done = "; ".join(f"{c} (reward {r:g})" for c, r in steps)
    return f"Attempt {k}: {done}. {'Won' if won else 'Not won'}."


@dataclass(frozen=True)
class LaMerParams:
    """Multi-attempt training (LaMer) or its single-attempt GRPO control; the same policy and sample budget."""

    attempts: int = 3
    """K: attempts per trial (LaMer trains on trials; GRPO on single attempts, K x as many per group)."""
    gamma_traj: float = 0.6
    """LaMer's cross-episode discount: G_k = R_k + gamma_traj G_{k+1}."""
    group: int = 4
    """Trials per game per update (GRPO: group x attempts single episodes)."""
    games_per_update: int = 4
    """Games per update."""
    updates: int = 60
    """Policy-gradient updates."""
    lr: float = 0.05
    """Adam step size."""
    buckets: int = 256
    """Hash buckets of the command's bag of words."""

    def __post_init__(self) -> None:
        if self.attempts < 1 or self.group < 2 or self.games_per_update < 1 or self.updates < 0:
            raise ValueError("need attempts >= 1, group >= 2, games_per_update >= 1, updates >= 0")
        if not 0 <= self.gamma_traj <= 1:
            raise ValueError("gamma_traj must be in [0, 1]")


class CommandScorer(nn.Module):
    """logit(command | reflections, attempt) = sum of the command's hashed word weights + u . reflection features."""

    FEATURES = 3

    def __init__(self, params: LaMerParams) -> None:
        super().__init__()
        self.params = params
        self.words = nn.EmbeddingBag(params.buckets, 1, mode="sum")
        self.head = nn.Linear(self.FEATURES + params.attempts, 1)

    def features(self, cmds: list[str], memory: str, used: set[str], k: int) -> torch.Tensor:
        """(C, 3 + K): tried-unrewarded and tried-rewarded in the reflections, used this attempt, attempt one-hot."""
        rows = []
        for c in cmds:
            unrewarded = f"{c} (reward 0)" in memory
            rewarded = f"{c} (reward " in memory and not unrewarded
            rows.append(
                [float(unrewarded), float(rewarded), float(c in used)]
                + [float(i == k) for i in range(self.params.attempts)]
            )
        return torch.tensor(rows)

    def forward(self, cmds: list[str], feats: torch.Tensor) -> torch.Tensor:
        ids, offsets = [], []
        for c in cmds:
            offsets.append(len(ids))
            ids.extend(zlib.crc32(w.encode()) % self.params.buckets for w in c.split())
        bag = self.words(torch.tensor(ids), torch.tensor(offsets))  # (C, 1)
        return (bag + self.head(feats)).squeeze(1)  # (C,) logits


@dataclass
class Attempt:
    logps: list[torch.Tensor]
    steps: list[tuple[str, float]]
    ret: float
    won: bool


def play_trial(
    policy: CommandScorer, cache: GameCache, game, attempts: int, rng: torch.Generator, reflect_between: bool = True
) -> list[Attempt]:
    """K attempts at `game`; each attempt's policy reads the reflections of the earlier ones (none when
    `reflect_between` is False: independent attempts). Actions sampled; log-probabilities kept for training."""
    memory, out = "", []
    for k in range(attempts):
        cmds_done: tuple[str, ...] = ()
        text, _, done, won = cache.outcome(game, cmds_done)
        att = Attempt([], [], 0.0, False)
        while not done:
            cmds = admissible(text)
            if not cmds:
                break
            logits = policy(cmds, policy.features(cmds, memory, set(cmds_done), k))
            logp = torch.log_softmax(logits, 0)
            i = int(torch.multinomial(logp.exp(), 1, generator=rng))
            cmds_done = cmds_done + (cmds[i],)
            text, r, done, won = cache.outcome(game, cmds_done)
            att.logps.append(logp[i])
            att.steps.append((cmds[i], r))
            att.ret += r
        att.won = won
        out.append(att)
        if reflect_between:
            memory += reflect(k + 1, att.steps, won) + "\n"
    return out


def trial_advantages(returns: np.ndarray, gamma_traj: float) -> np.ndarray:
    """LaMer's credit: (group, K) attempt returns -> G_k = R_k + gamma_traj G_{k+1}, normalised over the group at
    each attempt index (mean 0, population sd 1; 0 where the group agrees).

    >>> trial_advantages(np.array([[0.0, 1.0], [0.0, 0.0]]), 0.5).round(3).tolist()
    [[1.0, 1.0], [-1.0, -1.0]]
    """
    g = returns.astype(float).copy()
    for k in range(g.shape[1] - 2, -1, -1):
        g[:, k] += gamma_traj * g[:, k + 1]
    sd = g.std(0)
    return np.where(sd > 1e-8, (g - g.mean(0)) / np.maximum(sd, 1e-8), 0.0)


class MultiAttemptTrainer:
    """Trains a `CommandScorer` with LaMer's cross-attempt objective (`method="lamer"`) or single-attempt GRPO
    (`method="grpo"`) at the same number of episodes per update; `evaluate` plays K-attempt trials on games."""

    def __init__(self, params: LaMerParams, method: str, seed: int = 0) -> None:
        if method not in ("lamer", "grpo"):
            raise ValueError(f"method must be lamer or grpo, got {method!r}")
        self.params, self.method = params, method
        torch.manual_seed(seed)
        self.policy = CommandScorer(params)
        self.opt = torch.optim.Adam(self.policy.parameters(), lr=params.lr)
        self.rng = torch.Generator().manual_seed(seed)
        self.np_rng = np.random.default_rng([seed, 90])
        self.episodes = 0

    def update(self, cache: GameCache, games: list) -> float:
        """One policy-gradient step on `games_per_update` games drawn from `games`; returns the mean episode return."""
        p, losses, rets = self.params, [], []
        for gi in self.np_rng.choice(len(games), size=p.games_per_update, replace=False):
            if self.method == "lamer":
                trials = [play_trial(self.policy, cache, games[gi], p.attempts, self.rng) for _ in range(p.group)]
            else:  # single attempts: group x K independent episodes
                trials = [play_trial(self.policy, cache, games[gi], 1, self.rng) for _ in range(p.group * p.attempts)]
            R = np.array([[a.ret for a in t] for t in trials])  # (group, K) or (group * K, 1)
            adv = trial_advantages(R, p.gamma_traj)
            for t, row in zip(trials, adv):
                for a, A in zip(t, row):
                    losses.extend(-float(A) * lp for lp in a.logps)
            rets.extend(R.ravel().tolist())
            self.episodes += R.size
        if losses:
            loss = torch.stack(losses).mean()
            self.opt.zero_grad()
            loss.backward()
            self.opt.step()
        return float(np.mean(rets))

    def train(self, cache: GameCache, games: list) -> list[float]:
        return [self.update(cache, games) for _ in range(self.params.updates)]

    @torch.no_grad()
    def evaluate(self, cache: GameCache, games: list, trials: int, seed: int, reflect_between: bool = True) -> dict:
        """Per game: won within the first k attempts (k = 1..K) and the return summed over the K attempts, averaged
        over `trials` sampled trials: {"won_by": (games, K), "summed_return": (games,)}."""
        K, rng = self.params.attempts, torch.Generator().manual_seed(seed)
        won_by, summed = np.zeros((len(games), K)), np.zeros(len(games))
        for g, game in enumerate(games):
            for _ in range(trials):
                t = play_trial(self.policy, cache, game, K, rng, reflect_between)
                won_by[g] += np.maximum.accumulate([float(a.won) for a in t]) / trials
                summed[g] += sum(a.ret for a in t) / trials
        return {"won_by": won_by, "summed_return": summed}


@AGENTS.register(
    "lamer",
    params=LaMerParams,
    paper=LAMER,
    fidelity="reduced",
    departures=(
        "the policy is a linear command scorer over TextWorld's admissible commands, not an LLM writing them",
        "the reflection is a template the loop writes (each command and its reward, the outcome), read by the policy "
        "through string features; LaMer's LLM writes its own reflection and is trained on it",
        "one REINFORCE step per batch with GRPO's group baseline (the clipped ratio is 1 on-policy), no KL term",
        "tiny TextWorld games (1 room, 4 objects, a one-command quest, 1 command an attempt), not Sokoban/MineSweeper/"
        "Webshop/ALFWorld",
    ),
)
def lamer(params: LaMerParams = LaMerParams(), seed: int = 0) -> MultiAttemptTrainer:
    """LaMer (Jiang et al. 2025, arXiv:2512.16848): K attempts per trial with reflections between them, each attempt
    credited with the trial's discounted return from it on (gamma_traj), group-normalised."""
    return MultiAttemptTrainer(params, "lamer", seed)


@AGENTS.register(
    "grpo_single_attempt",
    params=LaMerParams,
    paper=GRPO,
    fidelity="reduced",
    departures=(
        "LaMer's RL baseline: the same command-scoring policy and budget, single attempts with group-normalised "
        "returns; one on-policy step per batch (ratio 1), no KL term",
    ),
)
def grpo_single_attempt(params: LaMerParams = LaMerParams(), seed: int = 0) -> MultiAttemptTrainer:
    """Single-attempt GRPO (Shao et al. 2024): episodes of the same game form the group, advantage (R - mean) / sd."""
    return MultiAttemptTrainer(params, "grpo", seed)


def default_env(cache_dir: Optional[str] = None, max_steps: int = 1):
    """The TextWorld env LaMer's games are played in: admissible commands shown, score reward, `max_steps` a try."""
    from ascent.envs.textworld_env import TextWorldEnv

    return TextWorldEnv(cache_dir=cache_dir, max_steps=max_steps, reward="score", show_commands=True)


class GuessGame:
    """A pure-Python text game with TextWorldEnv's interface: `reset(game)` / `step(command)`; a game is a tuple
    (commands, winning command); one command an episode, reward 1 for the winning one."""

    def reset(self, game):
        from ascent.envs.base import Observation

        self.game = game
        return Observation(text=f"A room.\n\nPossible commands: {', '.join(game[0])}.", info={})

    def step(self, command: str):
        from ascent.envs.base import StepResult

        won = command == self.game[1]
        return StepResult("Done.", float(won), True, {"won": won})
