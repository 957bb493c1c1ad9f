"""A query-level workflow the policy writes, executed: `reward=workflow_exec` (task `workflow`).

FlowReasoner (Gao et al. 2025, "FlowReasoner: Reinforcing Query-Level Meta-Agents", arXiv:2504.15257;
github.com/sail-sg/FlowReasoner) trains a meta-agent that writes one multi-agent system per user query; the system
is executed by worker models and the meta-agent is trained with GRPO on a multi-purpose reward of the system's
performance, complexity and efficiency. Here the system is a workflow in a three-operator DSL, written as text:

    workflow := op ('>' op)*        at most `max_ops` operators, run left to right on one state (answer, calls)
    solve    one worker call: answer <- worker(a, b)
    check    needs an answer: c <- worker(a, b); if c != answer, d <- worker(a, b) and answer <- the majority of
             (answer, c, d), d on a three-way tie (1 or 2 calls: verify, and re-solve on disagreement)
    split    decompose into columns: one worker call per column of the longer operand, each a one-digit add
             with the carry passed on by the workflow, which the worker gets right (cost = the number of columns)

The worker is a scripted noisy adder (`noisy_add`): adding whole numbers, it drops each carry with probability
`drop`, so its error rate grows with the carries a query has, which the query shows and the policy must read.
For a completion y of query x (a + b):

    perf(y)  = 1 if the executed workflow's answer is a + b, else 0
    r(y)     = perf(y) − complexity_weight · ops(y) − cost_weight · calls(y)
             = invalid_reward     when y does not parse (unknown operator, `check` before an answer, > max_ops)

Every worker call draws from its own generator, seeded from (seed, the query, the workflow text, the call's
position in the batch, the reward's call count), so a run scores the same way on a rerun and a resumed run (the
call count travels in `state_dict`). `last_stats` holds the last batch's mean ops, calls and perf.
"""

from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass
from typing import Any, Optional

from ascent import papers
from ascent.rewards.builtin import REWARDS
from ascent.typed import build

OPERATORS = ("solve", "check", "split")
"""The DSL's operators; the first of a workflow must produce an answer (`solve` or `split`)."""


@dataclass(frozen=True)
class WorkflowParams:
    """The `workflow_exec` reward's knobs."""

    drop: float = 0.3
    """The worker's chance of dropping each carry when it adds whole numbers, in [0, 1]."""
    complexity_weight: float = 0.02
    """Penalty per operator of the workflow (FlowReasoner's complexity term), >= 0."""
    cost_weight: float = 0.05
    """Penalty per worker call (FlowReasoner's efficiency term), >= 0."""
    invalid_reward: float = -0.5
    """Reward of a completion that is not a valid workflow."""
    max_ops: int = 3
    """Most operators in a workflow, >= 1."""
    seed: int = 0
    """Seeds the worker's draws."""

    def __post_init__(self) -> None:
        if not 0.0 <= self.drop <= 1.0:
            raise ValueError(f"drop must be in [0, 1], got {self.drop}")
        if self.complexity_weight < 0 or self.cost_weight < 0:
            raise ValueError("complexity_weight and cost_weight must be >= 0")
        if self.max_ops < 1:
            raise ValueError(f"max_ops must be >= 1, got {self.max_ops}")


def parse_workflow(text: str, max_ops: int = 3) -> Optional[list[str]]:
    """The operators of a workflow text, or None when it is not a valid workflow.

    >>> parse_workflow(" solve > check "), parse_workflow("split"), parse_workflow("check>solve")
    (['solve', 'check'], ['split'], None)
    >>> parse_workflow("solve>vote"), parse_workflow("solve>check>check>check"), parse_workflow("")
    (None, None, None)
    """
    ops = [t.strip() for t in text.strip().split(">")]
    if not ops or len(ops) > max_ops or any(op not in OPERATORS for op in ops) or ops[0] == "check":
        return None
    return ops


def noisy_add(a: int, b: int, drop: float, rng: random.Random) -> int:
    """a + b column by column, each carry dropped with probability `drop` (one draw per carry, ones first).

    >>> noisy_add(58, 67, 0.0, random.Random(0)), noisy_add(58, 67, 1.0, random.Random(0)), noisy_add(12, 34, 1.0, None)
    (125, 15, 46)
    """
    total, carry, column = 0, 0, 0
    while a or b or carry:
        s = a % 10 + b % 10 + carry
        carry = int(s >= 10)
        if carry and rng.random() < drop:
            carry = 0
        total += (s % 10) * 10**column
        a, b, column = a // 10, b // 10, column + 1
    return total


def execute(ops: list[str], a: int, b: int, drop: float, rng: random.Random) -> tuple[int, int]:
    """Run a parsed workflow on a + b with the noisy worker: (answer, worker calls).

    >>> execute(["split"], 958, 67, 1.0, random.Random(0)), execute(["solve"], 958, 67, 1.0, random.Random(0))
    ((1025, 3), (915, 1))
    >>> execute(["solve", "check"], 12, 34, 1.0, random.Random(0))  # no carry: the check agrees, one call more
    (46, 2)
    """
    answer, calls = None, 0
    for op in ops:
        if op == "solve":
            answer, calls = noisy_add(a, b, drop, rng), calls + 1
        elif op == "split":
            answer, calls = a + b, calls + max(len(str(a)), len(str(b)))
        else:  # check
            c = noisy_add(a, b, drop, rng)
            calls += 1
            if c != answer:
                d = noisy_add(a, b, drop, rng)
                calls += 1
                answer = answer if d == answer else (c if c == d else d)
    assert answer is not None  # parse_workflow: the first operator answers
    return answer, calls


def call_rng(seed: int, prompt: str, completion: str, position: int, count: int) -> random.Random:
    """The worker's generator for one completion: seeded from a hash of everything that identifies the call."""
    key = f"{seed}\x00{prompt}\x00{completion}\x00{position}\x00{count}".encode()
    return random.Random(int.from_bytes(hashlib.sha256(key).digest()[:8], "little"))


@REWARDS.register(
    "workflow_exec",
    params=WorkflowParams,
    paper=papers.FLOWREASONER,
    fidelity="reduced",
    departures=(
        "a three-operator workflow DSL on addition queries, executed by a scripted noisy worker, instead of "
        "LLM-written multi-agent code executed by o1-mini / GPT-4o workers on code benchmarks",
        "reward = perf − complexity_weight·operators − cost_weight·worker calls: ascent's reading of the paper's "
        "performance / complexity / efficiency reward (its exact weighting is not reproduced)",
        "no reasoning trace and no R1 distillation: the warm start imitates a query-blind teacher (`workflow` task)",
    ),
)
class WorkflowReward:
    """FlowReasoner's execution reward (Gao et al. 2025, arXiv:2504.15257): the completion is a workflow
    (`solve`, `check`, `split` joined by `>`), executed on the row's a + b by a noisy worker;
    r = 1[answer = a + b] − complexity_weight · ops − cost_weight · calls, `invalid_reward` when it does not parse."""

    def __init__(self, **params: Any) -> None:
        self.params = build(WorkflowParams, params, "workflow_exec")
        self.count = 0
        self.last_stats: dict[str, float] = {}
        self.__name__ = "workflow_exec"

    def state_dict(self) -> dict[str, Any]:
        return {"count": self.count}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.count = int(state.get("count", 0))

    def metrics(self) -> dict[str, float]:
        return {f"workflow/{k}": v for k, v in self.last_stats.items()}

    def score_one(self, prompt: str, completion: str, a: int, b: int, position: int) -> tuple[float, dict[str, float]]:
        """(reward, {"valid", "perf", "ops", "calls"}) of one completion."""
        p = self.params
        ops = parse_workflow(completion, p.max_ops)
        if ops is None:
            return p.invalid_reward, {"valid": 0.0, "perf": 0.0, "ops": 0.0, "calls": 0.0}
        answer, calls = execute(ops, a, b, p.drop, call_rng(p.seed, prompt, completion, position, self.count))
        perf = float(answer == a + b)
        reward = perf - p.complexity_weight * len(ops) - p.cost_weight * calls
        return reward, {"valid": 1.0, "perf": perf, "ops": float(len(ops)), "calls": float(calls)}

    def __call__(
        self,
        prompts: list[str],
        completions: list[str],
        a: Optional[list[Any]] = None,
        b: Optional[list[Any]] = None,
        **_: Any,
    ) -> list[Optional[float]]:
        if a is None or b is None:
            return [None] * len(completions)
        out, stats = [], {"valid": 0.0, "perf": 0.0, "ops": 0.0, "calls": 0.0}
        for i, (x, y, ai, bi) in enumerate(zip(prompts, completions, a, b)):
            r, s = self.score_one(x, y, int(ai), int(bi), i)
            out.append(r)
            stats = {k: stats[k] + s[k] for k in stats}
        self.count += 1
        self.last_stats = {k: v / max(len(out), 1) for k, v in stats.items()}
        return out
