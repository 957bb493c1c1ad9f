"""`experiment_world`: an ML-experiment tool world whose actions take variable simulated time.

The world of MLE-agent RL (Yang, He-Yueya & Liang 2025, arXiv:2509.01684) reduced to what its two techniques
need: an agent is given a dataset (small or large) and runs an experiment plan with the tool
`run_experiment(plan)`; the run goes through four instrumented stages (load data, train model, predict, write
submission), each taking simulated seconds and each failing with a plan-dependent probability, and prints one
progress line per stage it completes (the paper's *environment instrumentation*: print statements inserted into
the program so that partial progress is visible in the log). The episode ends with `<answer>PLAN</answer>`, which
submits the last run of that plan.

Plans trade time for score: `linear` is fast and mediocre, `gbm` medium, `deep` slow (its training stage alone
takes 24 simulated seconds and fails 20% of the time) but best on large data. Reward of a submission:

    r = score(plan, size)                                   if the run wrote its submission
    r = partial_credit * stages_logged / 4                  otherwise (0 with partial_credit = 0)

`score` is the test metric of the plan on that dataset size (`PLANS`). The step's `info["duration"]` is the
simulated seconds the turn's runs took: what `duration_aware` (ascent/algorithms/duration.py) weights by.

>>> env = ExperimentEnv(seed=3)
>>> _ = env.reset(ExperimentTask(name="housing", size="large"))
>>> r = env.step('<tool_call>{"name": "run_experiment", "arguments": {"plan": "linear"}}</tool_call>')
>>> "[progress] loaded data" in r.observation, r.info["duration"] > 0
(True, True)
>>> env.step("<answer>linear</answer>").reward
0.5
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

from ascent.envs.base import Observation
from ascent.envs.tool_env import ToolEnv
from ascent.envs.tools import ToolSet, tool

STAGES = ("loaded data", "trained model", "wrote predictions", "wrote submission")
"""The instrumented stages of every run, in order; each completed stage prints `[progress] <stage>`."""
SIZES = ("small", "large")


@dataclass(frozen=True)
class Plan:
    """One experiment plan: per-stage simulated seconds and failure probabilities, and its test score."""

    seconds: tuple[float, float, float, float]
    """Simulated seconds of each stage (a failing stage costs its full time, later stages none)."""
    fail: tuple[float, float, float, float]
    """Probability that each stage fails (given it was reached)."""
    score: dict[str, float]
    """Test score of a written submission, by dataset size."""

    def success(self) -> float:
        """Probability that all four stages complete."""
        p = 1.0
        for f in self.fail:
            p *= 1.0 - f
        return p


PLANS: dict[str, Plan] = {
    "linear": Plan((1.0, 1.0, 0.5, 0.5), (0.02, 0.02, 0.02, 0.02), {"small": 0.55, "large": 0.50}),
    "gbm": Plan((1.0, 5.0, 1.0, 0.5), (0.02, 0.10, 0.02, 0.02), {"small": 0.65, "large": 0.65}),
    "deep": Plan((1.0, 24.0, 2.0, 0.5), (0.02, 0.20, 0.05, 0.02), {"small": 0.45, "large": 0.95}),
}
"""The plans. Expected outcome reward (score x success): small data gbm 0.551 > linear 0.507 > deep 0.328; large
data deep 0.693 > gbm 0.551 > linear 0.461; expected seconds 2.9 / 7.2 / 26.5: the slow plan is the best one on
large data."""


@dataclass(frozen=True)
class ExperimentTask:
    """One dataset to solve."""

    name: str
    """The competition's name (shown in the prompt)."""
    size: str
    """`small` or `large`."""

    def __post_init__(self) -> None:
        if self.size not in SIZES:
            raise ValueError(f"size must be one of {SIZES}, got {self.size!r}")


@dataclass(frozen=True)
class RunRecord:
    """What one simulated run did."""

    plan: str
    stages: int
    """Stages completed (0-4); 4 = the submission was written."""
    seconds: float
    """Simulated seconds the run took."""
    log: str


def simulate(plan: str, rng: random.Random) -> RunRecord:
    """Run `plan` once: stage by stage until one fails; the log has a progress line per completed stage."""
    if plan not in PLANS:
        raise ValueError(f"unknown plan {plan!r}; plans: {', '.join(PLANS)}")
    p, lines, seconds, done = PLANS[plan], [], 0.0, 0
    for stage, (sec, fail) in enumerate(zip(p.seconds, p.fail)):
        seconds += sec
        if rng.random() < fail:
            lines.append(f"Traceback: stage '{STAGES[stage]}' failed")
            break
        lines.append(f"[progress] {STAGES[stage]}")
        done += 1
    return RunRecord(plan, done, seconds, "\n".join(lines))


def progress_credit(log: str, partial_credit: float) -> float:
    """Partial credit read from a run's log: `partial_credit` times the fraction of stages it logged."""
    logged = sum(f"[progress] {s}" in log for s in STAGES)
    return partial_credit * logged / len(STAGES)


def reward(run: RunRecord, size: str, partial_credit: float) -> float:
    """The submission's reward: the test score if the submission was written, else the log's partial credit."""
    if run.stages == len(STAGES):
        return PLANS[run.plan].score[size]
    return progress_credit(run.log, partial_credit)


def expected_reward(plan: str, size: str, partial_credit: float) -> float:
    """E[reward] of submitting one run of `plan` (exact, over the stage failures)."""
    p, reached, total = PLANS[plan], 1.0, 0.0
    for stage, fail in enumerate(p.fail):
        total += reached * fail * partial_credit * stage / len(STAGES)  # fails at `stage`: `stage` logged
        reached *= 1.0 - fail
    return total + reached * p.score[size]


def expected_seconds(plan: str) -> float:
    """E[simulated seconds] of one run of `plan`."""
    p, reached, total = PLANS[plan], 1.0, 0.0
    for sec, fail in zip(p.seconds, p.fail):
        total += reached * sec
        reached *= 1.0 - fail
    return total


PROMPT = (
    "You are an ML engineer. Competition '{name}': a tabular dataset, {size} ({rows} rows). Run experiments with "
    "the tool below, then submit one plan's last run as <answer>PLAN</answer>. Plans: {plans}.\n{tools}"
)


class ExperimentEnv(ToolEnv):
    """One MLE episode: `run_experiment(plan)` (simulated, variable time), then `<answer>PLAN</answer>`.

    Step info carries `duration` (simulated seconds of the turn's runs) and, on the final step, `stages`
    (stages the submitted run logged) and `outcome` (its test score, 0 when it wrote no submission)."""

    def __init__(self, seed: int = 0, partial_credit: float = 0.2) -> None:
        if not 0.0 <= partial_credit <= 1.0:
            raise ValueError(f"partial_credit must be in [0, 1], got {partial_credit}")
        super().__init__(ToolSet([tool(self.run_experiment)]))
        self.rng, self.partial_credit = random.Random(seed), partial_credit
        self.runs: dict[str, RunRecord] = {}
        self.seconds = 0.0

    def run_experiment(self, plan: str) -> str:
        """Run one experiment plan to completion or failure; returns its log.

        Args:
            plan: one of linear, gbm, deep.
        """
        run = simulate(plan.strip(), self.rng)
        self.runs[run.plan] = run
        self.seconds += run.seconds
        return f"{run.log}\n(took {run.seconds:g} s)"

    def reset(self, task: ExperimentTask) -> Observation:
        self.runs, self.seconds = {}, 0.0
        return super().reset(task)

    def prompt(self, task: ExperimentTask) -> Observation:
        rows = 2_000 if task.size == "small" else 2_000_000
        text = PROMPT.format(name=task.name, size=task.size, rows=rows, plans=", ".join(PLANS), tools="")
        return Observation(text=text + self.tools.describe())

    def step(self, action: str):  # noqa: ANN201 (StepResult)
        before = self.seconds
        result = super().step(action)
        result.info["duration"] = self.seconds - before
        return result

    def score(self, answer: str) -> tuple[float, dict[str, Any]]:
        run = self.runs.get(answer.strip())
        if run is None:
            return 0.0, {"stages": 0, "outcome": 0.0, "error": f"no run of plan {answer.strip()!r} to submit"}
        outcome = PLANS[run.plan].score[self.task.size] if run.stages == len(STAGES) else 0.0
        return reward(run, self.task.size, self.partial_credit), {"stages": run.stages, "outcome": outcome}
