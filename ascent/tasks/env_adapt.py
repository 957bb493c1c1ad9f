"""RLAnything's environment (task) adaptation (Wang et al. 2026, arXiv:2602.02488) as a prompt sampler,
`data.sampler=env_adapt`: the task set grows new task variants, harder where the policy succeeds and easier
where it fails, and keeps a variant only when the policy's accuracy on it moved the way it was meant to.

The authors' loop (Open-AgentRL, `sample/osworld_env_rollout.py` and `reward/osworld_rl_reward.py`): after a
rollout round each task's accuracy `pre` is its share of successful samples; a task with pre >= 0.8 is rewritten
harder, one with pre <= 0.2 easier (an LLM rewrites it, reading the reward model's summaries of the
trajectories); the rewrite is rolled out in the next round and promoted into the task set only when its accuracy
`after` satisfies: harder, 0.2 <= after < pre; easier, pre < after <= 0.8; never when after = 0.

Here a variant comes from the task's generator (`VARIANTS`; `addition`: one digit of an operand changed so the
sum has one column-carry more or one fewer, ascent/tasks/addition.py `sum_variant`), is appended to the training
rows, and waits in a queue; each draw takes up to `share` of its prompts from the queue (oldest first), the rest
from the seeded epoch order of the original rows. When a variant's group is scored it is judged by the rule
above: accepted, it stays in the rows and is adapted again like any task (its own harder or easier variant),
rejected, it is never drawn again. A sample succeeds when its reward is above `success` (0: exact_answer's 1 and
rm_online's integrated O + λS̄ with O = +1; both give the outcome's sign).
"""

from __future__ import annotations

import random
from collections import deque
from dataclasses import dataclass
from typing import Any, Callable, Optional

import torch

from ascent import papers
from ascent.data.sampler import RowSampler
from ascent.data.samplers import SAMPLERS, Draw, PromptSampler, SamplerContext, group_rewards
from ascent.tasks.addition import sum_variant
from ascent.tasks.base import Row
from ascent.typed import ConfigError

VARIANTS: dict[str, Callable[[Row, bool, random.Random], Optional[Row]]] = {"addition": sum_variant}
"""Task generators: (row, harder, rng) -> a new row one step harder / easier, or None (none exists)."""


@dataclass(frozen=True)
class EnvAdaptParams:
    """RLAnything's environment adaptation."""

    generator: str = "addition"
    """The task generator (`VARIANTS`) that writes the variants; it must understand the training rows."""
    high: float = 0.8
    """A task whose accuracy is >= high gets a harder variant (the authors' 0.8)."""
    low: float = 0.2
    """A task whose accuracy is <= low gets an easier variant (the authors' 0.2). `low` is also the floor a
    harder variant's accuracy must keep, `high` the ceiling an easier one's must stay under."""
    share: float = 0.5
    """At most this share of each draw's prompts are queued variants (the rest: the original rows, in order)."""
    success: float = 0.0
    """A sample succeeds when its reward is above this."""
    max_queue: int = 256
    """Variants waiting for their first rollout beyond this are dropped, oldest first."""

    def __post_init__(self) -> None:
        if self.generator not in VARIANTS:
            raise ValueError(f"env_adapt: unknown generator {self.generator!r}; known: {sorted(VARIANTS)}")
        if not 0.0 <= self.low < self.high <= 1.0:
            raise ValueError(f"env_adapt needs 0 <= low < high <= 1, got low={self.low}, high={self.high}")
        if not 0.0 <= self.share <= 1.0:
            raise ValueError(f"env_adapt: share must lie in [0, 1], got {self.share}")
        if self.max_queue < 1:
            raise ValueError(f"env_adapt: max_queue must be >= 1, got {self.max_queue}")


def accepted(harder: bool, pre: float, after: float, low: float, high: float) -> bool:
    """The authors' promotion rule for a variant rolled out once: harder, low <= after < pre; easier,
    pre < after <= high; never with after = 0.

    >>> accepted(True, 0.9, 0.5, 0.2, 0.8), accepted(True, 0.9, 0.1, 0.2, 0.8), accepted(False, 0.1, 0.9, 0.2, 0.8)
    (True, False, False)
    """
    if after == 0.0:
        return False
    return low <= after < pre if harder else pre < after <= high


@SAMPLERS.register(
    "env_adapt",
    params=EnvAdaptParams,
    paper=papers.RLANYTHING,
    fidelity="reduced",
    departures=(
        "a rule-based generator rewrites a task (addition: one operand digit changed for one column-carry more or "
        "fewer), not an LLM; it does not read the reward model's critiques of the trajectories (the paper's "
        "critic feedback to the environment): the direction comes from the policy's accuracy alone",
        "a variant is appended to the task set and drawn in the next steps (up to `share` of a draw) instead of "
        "replacing its task for the next epoch: with 7600 sums and 40 steps of 32 prompts no task is drawn twice",
        "thresholds and the promotion rule are the authors' code's (0.8 / 0.2; harder: 0.2 <= after < pre, "
        "easier: pre < after <= 0.8, never after = 0)",
    ),
)
class EnvAdaptSampler(PromptSampler):
    """Environment adaptation (see the module docstring): harder / easier variants of the tasks just scored,
    queued, drawn, and kept only when the policy's accuracy moved as intended."""

    def __init__(self, ctx: SamplerContext, params: EnvAdaptParams = EnvAdaptParams()) -> None:
        self.params, self.seed = params, ctx.seed
        self.rows = ctx.rows  # the trainer's list: variants appended here are what the collector reads
        self.base = len(ctx.rows)
        if not any(VARIANTS[params.generator](r, True, random.Random(0)) for r in ctx.rows[:50]) and not any(
            VARIANTS[params.generator](r, False, random.Random(0)) for r in ctx.rows[:50]
        ):
            raise ConfigError(
                f"data.sampler=env_adapt: generator {params.generator!r} writes no variant of the first training rows;"
                " pick the generator of this task"
            )
        self.order = RowSampler(self.base, ctx.seed)
        self.queue: deque[int] = deque()
        self.info: dict[int, dict[str, Any]] = {}  # variant row -> {"harder": bool, "pre": float, "parent": int}
        self.dead: set[int] = set()
        self.draws = 0
        self.counts = {"generated": 0, "accepted": 0, "rejected": 0, "no_variant": 0, "dropped": 0}
        self.last_variants = 0

    def next(self, k: int) -> Draw:
        self.draws += 1
        take = min(len(self.queue), int(self.params.share * k))
        chosen = [self.queue.popleft() for _ in range(take)]
        self.last_variants = take
        return Draw(chosen + self.order.next(k - take))

    def observe(self, rows: torch.Tensor, rewards: torch.Tensor, valid: torch.Tensor) -> None:
        p = self.params
        rng = random.Random(f"env_adapt:{self.seed}:{self.draws}")
        for row, xs in sorted(group_rewards(rows, rewards, valid).items()):
            acc = sum(x > p.success for x in xs) / len(xs)
            info = self.info.get(row)
            if info is not None and not info.get("judged"):
                info["judged"], info["after"] = True, acc
                if not accepted(info["harder"], info["pre"], acc, p.low, p.high):
                    self.counts["rejected"] += 1
                    self.dead.add(row)
                    continue
                self.counts["accepted"] += 1
            if row in self.dead or not (acc >= p.high or acc <= p.low):
                continue
            harder = acc >= p.high
            new = VARIANTS[p.generator](self.rows[row], harder, rng)
            if new is None:
                self.counts["no_variant"] += 1
                continue
            self.rows.append(new)
            idx = len(self.rows) - 1
            self.info[idx] = {"harder": harder, "pre": acc, "parent": row}
            self.queue.append(idx)
            self.counts["generated"] += 1
            while len(self.queue) > p.max_queue:
                self.dead.add(self.queue.popleft())
                self.counts["dropped"] += 1

    def metrics(self) -> dict[str, float]:
        judged = self.counts["accepted"] + self.counts["rejected"]
        out = {f"sampler/env_{k}": float(v) for k, v in self.counts.items()}
        out["sampler/env_queue"] = float(len(self.queue))
        out["sampler/env_variants_drawn"] = float(self.last_variants)
        out["sampler/env_accept_rate"] = self.counts["accepted"] / judged if judged else float("nan")
        return out

    def state_dict(self) -> dict[str, Any]:
        return {
            "order": self.order.state_dict(),
            "variants": self.rows[self.base :],
            "info": {str(k): v for k, v in self.info.items()},
            "queue": list(self.queue),
            "dead": sorted(self.dead),
            "draws": self.draws,
            "counts": dict(self.counts),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.order.load_state_dict(state["order"])
        del self.rows[self.base :]
        self.rows.extend(state["variants"])
        self.info = {int(k): dict(v) for k, v in state["info"].items()}
        self.queue = deque(state["queue"])
        self.dead = set(state["dead"])
        self.draws = state["draws"]
        self.counts = dict(state["counts"])
