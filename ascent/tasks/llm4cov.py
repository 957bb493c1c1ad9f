"""The `llm4cov` prompt sampler (`data.sampler=llm4cov`): execution-validated data curation and worst-state-prioritised
sampling (Zhang, Yu, Ho, Ren, Khailany & Zhao 2026, "LLM4Cov: Execution-Aware Agentic Learning for High-coverage
Testbench Generation", arXiv:2602.16953; the authors' selection script: github.com/HejiaZ2023/llm4cov_oss,
scripts/select_direct_infer_samples.py, read to learn it, not copied).

LLM4Cov trains a testbench writer offline from states scored by a deterministic evaluator (a simulator's coverage in
[0, 1]). Two of its pieces carry over to a task whose rows are executed and scored in [0, 1]:
- **Execution-validated data curation**: data enters training only once execution has confirmed it. Here every
  training row's reference `solution` is run on its hidden `tests` in the sandbox (`ascent.rewards.sandbox`) when
  the sampler is built; a row whose reference fails a test, or that has no solution / entry point / tests to run,
  is never drawn (`sampler/curated_out`).
- **Worst-state-prioritised sampling**: among the states the policy reached on a problem, the ones to learn from
  first are the *worst* that still executed and did not already reach full coverage (the authors select, per
  problem, the executed run of lowest coverage below 1). Here a row's states are the valid samples of its latest
  observed group, the candidates those with reward < `solved_at`; each draw takes `priority` of its k rows from
  the rows with candidates, in increasing order of their worst candidate's reward (ties: the seeded epoch order),
  and the rest from the seeded epoch order (every row keeps being visited, as the paper keeps synthesising from
  fresh problems).

This sampler lives beside the tasks because it reads the code tasks' row format (`solution`, `entry_point`, `tests`)
and runs the sandbox of `ascent.rewards`, which the data layer below them may not import.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Optional

import torch

from ascent.data.sampler import RowSampler
from ascent.data.samplers import SAMPLERS, Draw, PromptSampler, SamplerContext, group_rewards
from ascent.registry import Paper
from ascent.rewards.sandbox import SandboxUnavailable, isolation, run_code, score_tests
from ascent.typed import ConfigError

LLM4COV = Paper(
    "LLM4Cov",
    "Zhang, Yu, Ho, Ren, Khailany & Zhao",
    2026,
    "LLM4Cov: Execution-Aware Agentic Learning for High-coverage Testbench Generation",
    "arXiv:2602.16953",
)


@dataclass(frozen=True)
class LLM4CovParams:
    """Worst-state-prioritised sampling over execution-validated rows (LLM4Cov, arXiv:2602.16953)."""

    priority: float = 0.5
    """Fraction of each draw's rows taken from the prioritised rows (worst observed state first); in [0, 1]
    (0: the seeded epoch order over the validated rows only)."""
    solved_at: float = 1.0
    """A sample with reward >= this reached full coverage (all tests pass) and is not a candidate state."""
    validate: bool = True
    """Run every row's reference solution on its tests when the sampler is built and drop the rows that fail."""
    sandbox: str = "bwrap"
    """Isolation of the validation runs: bwrap, or unsafe-local (no bubblewrap; the references are the task's)."""

    def __post_init__(self) -> None:
        if not 0.0 <= self.priority <= 1.0:
            raise ValueError(f"priority must be in [0, 1], got {self.priority}")
        if self.sandbox not in ("bwrap", "unsafe-local"):
            raise ValueError(f"sandbox must be bwrap or unsafe-local, got {self.sandbox!r}")


def validate_row(row: dict[str, Any], sandbox: str) -> Optional[str]:
    """None when the row's reference solution passes every one of its tests in the sandbox; else why not."""
    missing = [k for k in ("solution", "entry_point", "tests") if not row.get(k)]
    if missing:
        return f"no {', '.join(missing)}"
    cases = row["tests"]
    result = run_code(row["solution"], row["entry_point"], [list(c["args"]) for c in cases], mode=sandbox)
    if result.status != "ok":
        return f"the reference did not run ({result.status})"
    passed = score_tests(result, [c["expected"] for c in cases])
    return None if passed == 1.0 else f"the reference passes {passed:.0%} of its tests"


def worst_candidate(rewards: list[float], solved_at: float) -> Optional[float]:
    """The lowest reward below `solved_at` among a group's valid rewards (None: every state reached full coverage).

    >>> worst_candidate([1.0, 0.5, 0.25, 1.0], 1.0), worst_candidate([1.0, 1.0], 1.0)
    (0.25, None)
    """
    cands = [r for r in rewards if r < solved_at]
    return min(cands) if cands else None


@SAMPLERS.register(
    "llm4cov",
    params=LLM4CovParams,
    paper=LLM4COV,
    fidelity="reduced",
    departures=(
        "prompt-level: a row's states are the samples of its latest group (single-turn), not the partial testbenches"
        " of an agentic trajectory, and prioritising a state means drawing its prompt again for the policy",
        "online, in the RL loop (the paper curates and samples an offline SFT data set built from teacher runs)",
        "curation validates the task's reference solutions on their tests; the paper validates teacher-synthesised"
        " transitions by simulation and coverage gain",
        "the paper's median-state rule (also keep the median run when it beats the worst by > 0.1) is not reproduced;"
        " the prioritised share of a draw (priority) is ascent's choice",
    ),
)
class LLM4CovSampler(PromptSampler):
    """Execution-validated rows, drawn worst observed state first (see the module docstring)."""

    def __init__(self, ctx: SamplerContext, params: LLM4CovParams = LLM4CovParams()) -> None:
        self.params = params
        n = len(ctx.rows)
        if params.validate:
            try:
                isolation(params.sandbox)
            except SandboxUnavailable as err:
                raise ConfigError(
                    f"data.sampler=llm4cov: cannot validate rows: {str(err).split('. Install')[0]}; install "
                    "bubblewrap, or set llm4cov(sandbox=unsafe-local) (the rows' reference solutions) or validate=false"
                ) from err
            with ThreadPoolExecutor(max_workers=2) as pool:
                reasons = list(pool.map(lambda r: validate_row(r, params.sandbox), ctx.rows))
        else:
            reasons = [None] * n
        self.valid = [r is None for r in reasons]
        if not any(self.valid):
            first = next(i for i, r in enumerate(reasons) if r is not None)
            raise ConfigError(
                f"data.sampler=llm4cov: no training row passed execution validation ({n} rows; row {first}: "
                f"{reasons[first]}); set llm4cov(validate=false) to sample unvalidated rows"
            )
        self.order = RowSampler(n, ctx.seed)
        self.worst: list[Optional[float]] = [None] * n  # the worst candidate state of each row's latest group
        self.last = {"prioritised": 0.0, "mean_worst": float("nan")}

    def next(self, k: int) -> Draw:
        pool = sorted((w, i) for i, w in enumerate(self.worst) if w is not None and self.valid[i])
        n_pri = min(round(self.params.priority * k), len(pool))
        chosen = [i for _, i in pool[:n_pri]]
        taken = set(chosen)
        met = 0
        while len(chosen) < k and met < 2 * self.order.num_rows:  # two epochs: every validated row is met
            i = self.order.next(1)[0]
            met += 1
            if self.valid[i] and i not in taken:
                chosen.append(i)
                taken.add(i)
        while len(chosen) < k:  # k above the validated rows: repeat them in the epoch order
            i = self.order.next(1)[0]
            if self.valid[i]:
                chosen.append(i)
        worst = [w for w, _ in pool[:n_pri]]
        self.last = {"prioritised": float(n_pri), "mean_worst": sum(worst) / len(worst) if worst else float("nan")}
        return Draw(chosen)

    def observe(self, rows: torch.Tensor, rewards: torch.Tensor, valid: torch.Tensor) -> None:
        for row, xs in group_rewards(rows, rewards, valid).items():
            self.worst[row] = worst_candidate(xs, self.params.solved_at)

    def metrics(self) -> dict[str, float]:
        return {
            "sampler/curated_out": float(self.valid.count(False)),
            "sampler/pool_size": float(sum(w is not None for w in self.worst)),
            "sampler/prioritised": self.last["prioritised"],
            "sampler/mean_worst": self.last["mean_worst"],
        }

    def state_dict(self) -> dict[str, Any]:
        return {"order": self.order.state_dict(), "worst": list(self.worst), "valid": list(self.valid),
                "last": dict(self.last)}  # fmt: skip

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.order.load_state_dict(state["order"])
        self.worst, self.valid, self.last = list(state["worst"]), list(state["valid"]), dict(state["last"])
