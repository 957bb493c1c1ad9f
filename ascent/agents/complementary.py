"""Complementary RL (Muhtar et al. 2026, arXiv:2603.17621): an experience extractor co-trained with the actor.

The actor is trained on sparse outcome reward with experience in its context; the extractor reads the past
trajectories of a task (an `ExperienceBank`) and writes the experience: short statements such as
`step 1: use 2` or `step 0: avoid 3` (0-based steps and options). The extractor is a policy over the
statements it can write, rewarded by what its experience does for the actor: the same task is played with
and without the experience, and

    r_extractor = success(with experience) - success(without)

so the extractor's way of distilling history keeps up with what the actor can use (the paper's co-evolution).

Here a trajectory is a sequence of discrete choices (`choices[k]` = the option taken at step k) with an outcome.
The extractor scores each candidate statement s with a linear function of its evidence,
phi(s) = polarity one-hot x (share of successful past trajectories that took it, share of failed ones, 1),
samples `num_statements` of them without replacement (Plackett-Luce) and learns by REINFORCE with a mean
baseline on r_extractor. `Statement.text` is the experience as the actor's prompt would carry it.

>>> bank = ExperienceBank(keep=8)
>>> bank.add("task-a", (1, 0, 2), True)
>>> bank.add("task-a", (1, 3, 3), False)
>>> sorted(s.text for s in bank.candidates("task-a"))[:2]
['step 0: avoid 1', 'step 0: use 1']
>>> ext = ExperienceExtractor(ExtractorParams(num_statements=1))
>>> written, logp = ext.write(bank.candidates("task-a"), torch.Generator().manual_seed(0))
>>> len(written), float(logp) < 0
(1, True)
"""

from __future__ import annotations

from collections import defaultdict, deque
from dataclasses import dataclass
from typing import Any, Hashable, Sequence

import torch

from ascent import papers
from ascent.registry import Registry

EXTRACTORS: Registry = Registry("experience extractor")
"""Experience extractors co-trained with the actor (`ascent list experience_extractors`)."""

NUM_FEATURES = 6
"""phi: (use, avoid) x (share of successes with the choice, share of failures with it, bias)."""


@dataclass(frozen=True)
class Statement:
    """One experience statement about a task: at `step`, use (or avoid) `option`."""

    step: int
    option: int
    use: bool
    """True: `step k: use o`; False: `step k: avoid o`."""
    features: tuple[float, ...]
    """phi(s), NUM_FEATURES values (the evidence in the bank)."""

    @property
    def text(self) -> str:
        return f"step {self.step}: {'use' if self.use else 'avoid'} {self.option}"


class ExperienceBank:
    """The last `keep` trajectories of each task (key), as (choices, success)."""

    def __init__(self, keep: int = 16) -> None:
        if keep < 1:
            raise ValueError(f"keep must be >= 1, got {keep}")
        self.keep = keep
        self.memory: dict[Hashable, deque] = defaultdict(lambda: deque(maxlen=self.keep))

    def add(self, key: Hashable, choices: Sequence[int], success: bool) -> None:
        self.memory[key].append((tuple(int(c) for c in choices), bool(success)))

    def candidates(self, key: Hashable) -> list[Statement]:
        """Every (step, option) some stored trajectory of `key` took, as a `use` and an `avoid` statement, with
        phi = polarity x (share of the successes that took it, share of the failures that took it, 1)."""
        trajs = list(self.memory.get(key, ()))
        wins = [c for c, ok in trajs if ok]
        losses = [c for c, ok in trajs if not ok]
        seen = sorted({(k, o) for c, _ in trajs for k, o in enumerate(c)})
        out = []
        for k, o in seen:
            sw = sum(c[k] == o for c in wins) / max(len(wins), 1)
            sl = sum(c[k] == o for c in losses) / max(len(losses), 1)
            for use in (True, False):
                evidence = (sw, sl, 1.0)
                phi = evidence + (0.0, 0.0, 0.0) if use else (0.0, 0.0, 0.0) + evidence
                out.append(Statement(k, o, use, phi))
        return out


@dataclass(frozen=True)
class ExtractorParams:
    """The experience extractor (Complementary RL, Muhtar et al. 2026, arXiv:2603.17621)."""

    num_statements: int = 2
    """Statements written per experience (sampled without replacement; fewer when there are fewer); >= 1."""
    lr: float = 0.1
    """Adam learning rate of the extractor's scorer; > 0."""
    temperature: float = 1.0
    """Sampling temperature of the statements (the update uses the same); > 0."""

    def __post_init__(self) -> None:
        if self.num_statements < 1:
            raise ValueError(f"num_statements must be >= 1, got {self.num_statements}")
        if not self.lr > 0 or not self.temperature > 0:
            raise ValueError(f"lr and temperature must be > 0, got {self.lr}, {self.temperature}")


def plackett_luce_logprob(scores: torch.Tensor, picks: Sequence[int]) -> torch.Tensor:
    """log P(picks in that order) when each pick is a softmax draw over the `scores` (C,) not yet picked."""
    total, left = scores.new_zeros(()), torch.ones_like(scores, dtype=torch.bool)
    for i in picks:
        total = total + scores[i] - torch.logsumexp(scores[left], 0)
        left = left.clone()
        left[i] = False
    return total


@EXTRACTORS.register(
    "complementary",
    params=ExtractorParams,
    paper=papers.COMPLEMENTARY_RL,
    fidelity="reduced",
    departures=(
        (
            "the extractor is a linear scorer choosing statements among those the bank's trajectories support (a "
            "step's option, to use or to avoid), not an LLM writing free text; its features are the evidence "
            "(share of successes and of failures that took the option), ascent's reading"
        ),
        (
            "its reward is success with its experience minus success without it on the same task, one paired "
            "episode each (the catalogue marks the with-vs-without form as inferred from the abstract)"
        ),
        (
            "REINFORCE with a batch-mean baseline and Adam; measured on a sparse-reward pipeline world with a "
            "tabular actor (benchmarks/agent_complementary.py), not with LLM actors on the paper's benchmarks"
        ),
    ),
)
class ExperienceExtractor:
    """A linear scorer over statements (zero-initialised: uniform), trained by REINFORCE on the actor's
    with-minus-without success."""

    def __init__(self, params: ExtractorParams = ExtractorParams()) -> None:
        self.params = params
        self.weight = torch.zeros(NUM_FEATURES, requires_grad=True)  # (F,)
        self.optimizer = torch.optim.Adam([self.weight], lr=params.lr)

    def scores(self, cands: Sequence[Statement]) -> torch.Tensor:
        phi = torch.tensor([s.features for s in cands], dtype=torch.float32)  # (C, F)
        return phi @ self.weight / self.params.temperature  # (C,)

    def write(self, cands: Sequence[Statement], generator: torch.Generator) -> tuple[list[Statement], torch.Tensor]:
        """Sample the experience: up to `num_statements` statements, and the log-probability of the draw (with
        grad; 0 when there is nothing to write)."""
        if not cands:
            return [], torch.zeros(())
        scores = self.scores(cands)
        k = min(self.params.num_statements, len(cands))
        with torch.no_grad():
            g = -torch.log(-torch.log(torch.rand(len(cands), generator=generator).clamp(1e-12, 1 - 1e-12)))
            picks = torch.topk(scores.detach() + g, k).indices.tolist()  # Gumbel top-k = Plackett-Luce sampling
        return [cands[i] for i in picks], plackett_luce_logprob(scores, picks)

    def update(self, logprobs: Sequence[torch.Tensor], rewards: Sequence[float]) -> dict[str, float]:
        """One REINFORCE step on r_extractor = success(with) - success(without), mean baseline over the batch."""
        r = torch.tensor(list(rewards), dtype=torch.float32)  # (B,)
        adv = r - r.mean()
        loss = -(adv * torch.stack(list(logprobs))).mean()
        self.optimizer.zero_grad()
        if loss.requires_grad:
            loss.backward()
            self.optimizer.step()
        return {"extractor/reward": float(r.mean()), "extractor/loss": float(loss.detach())}

    def state_dict(self) -> dict[str, Any]:
        return {"weight": self.weight.detach().clone(), "optimizer": self.optimizer.state_dict()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        with torch.no_grad():
            self.weight.copy_(state["weight"])
        self.optimizer.load_state_dict(state["optimizer"])


def extractor_reward(success_with: float, success_without: float) -> float:
    """The extractor's reward: how much its experience raised the actor's success on the same task."""
    return float(success_with) - float(success_without)
