"""Held-out evaluation of single-turn and agent tasks: greedy accuracy and pass@k, judged by the run's first
reward function, plus, for agent tasks, the episode statistics and the token checker on every trajectory.

Metrics (fractions and means over held-out rows):
- `accuracy`: first reward >= the threshold (greedy); `accuracy_lenient`: the lenient grader (when there is
  one) >= the threshold on the same greedy completions; `completion_len`: mean greedy completion tokens;
  `pass@1`, `pass@4`, `pass@16`, ... and `pass@n` when asked (n samples per row at the sampling temperature;
  every k of `pass_ks(n)` from the same n samples, unbiased estimator);
- agent tasks only: `tool_calls` (tool calls per episode, `num_tool_calls` of the final info, 0 when absent),
  `turns` (model turns per episode), `answer_rate` (episodes that ended with a final answer),
  `unsupported_answer_rate` (among episodes with an answer, those whose answer no retrieved document
  supports: the environment's `supported`, e.g. search_world; absent when the environment does not say),
  `token_check_pass_rate` (trajectories whose ids equal their conversation rendered by the chat template,
  `ascent.agents.token_check`; the first divergences are logged);
- `score_NAME` for each further grader of `eval.metrics` (`metric_key`): its mean on the greedy completions over
  the rows it has an opinion on.
"""

from __future__ import annotations

import logging
import re
from collections import defaultdict
from dataclasses import dataclass, field, replace
from math import comb
from typing import Any, Callable, Optional

import torch

from ascent.agents.collector import Episodes, pack_episodes
from ascent.agents.loop import AgentConfig, rollout
from ascent.agents.token_check import check_trajectories
from ascent.agents.trajectory import Trajectory, context_tokens
from ascent.data.prompts import PromptEncoder
from ascent.policy.model import Policy
from ascent.rewards.runner import RewardRunner
from ascent.rollout.batch import assemble
from ascent.rollout.engine import RolloutEngine
from ascent.rollout.types import RolloutBatch, SamplingSettings
from ascent.tasks.base import DataError

log = logging.getLogger(__name__)


def metric_key(spec: str) -> str:
    """The report key of an `eval.metrics` grader.

    >>> metric_key("citation_rubric"), metric_key("c_grpo(alpha=0.5)")
    ('score_citation_rubric', 'score_c_grpo_alpha_0_5')
    """
    return "score_" + re.sub(r"\W+", "_", spec).strip("_")


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k from n samples with c correct (Chen et al. 2021): 1 - C(n-c, k) / C(n, k).

    >>> pass_at_k(8, 0, 4), pass_at_k(8, 8, 1), round(pass_at_k(8, 2, 4), 4)
    (0.0, 1.0, 0.7857)
    """
    if n - c < k:
        return 1.0
    return 1.0 - comb(n - c, k) / comb(n, k)


def pass_ks(n: int) -> list[int]:
    """The k reported from n samples per row: every power of 4 up to n, and n.

    >>> pass_ks(1), pass_ks(2), pass_ks(16), pass_ks(64), pass_ks(100)
    ([1], [1, 2], [1, 4, 16], [1, 4, 16, 64], [1, 4, 16, 64, 100])
    """
    ks, k = {n}, 1
    while k <= n:
        ks.add(k)
        k *= 4
    return sorted(ks)


def episode_stats(trajs: list[Trajectory]) -> dict[str, float]:
    """tool_calls, turns, answer_rate, context_tokens (per model turn: what the model conditioned on) and (when
    the environment reports `supported`) unsupported_answer_rate."""
    n = max(len(trajs), 1)
    out = {
        "tool_calls": sum(t.info.get("num_tool_calls", 0) for t in trajs) / n,
        "turns": sum(len(t.turns) for t in trajs) / n,
        "answer_rate": sum("answer" in t.info for t in trajs) / n,
        "context_tokens": context_tokens(trajs),
    }
    answered = [t for t in trajs if "answer" in t.info and "supported" in t.info]
    if answered:
        out["unsupported_answer_rate"] = sum(not t.info["supported"] for t in answered) / len(answered)
    return out


@dataclass
class Evaluator:
    """Scores a policy on held-out rows: single-turn completions, or (with `agent`) episodes through the
    task's environment."""

    rows: list[dict[str, Any]]
    encoder: PromptEncoder
    engine: RolloutEngine
    rewards: RewardRunner
    settings: SamplingSettings
    threshold: float = 1.0
    batch_size: int = 512
    agent: Optional[Episodes] = None
    """The task's agent wiring (`TaskData.agent`); None: a single-turn task."""
    loop: Optional[AgentConfig] = None
    """The agent loop's limits (agent tasks)."""
    lenient: Optional[RewardRunner] = None
    """A lenient grader reported next to the strict one (single-turn tasks), e.g. `last_number`."""
    pass_k_rows: int = 0
    """pass@k on the first this many rows (0: all)."""
    on_batch: Optional[Callable[[int], None]] = None
    """Called with the number of rows after each batch is judged (a progress bar; may raise to stop)."""
    metrics: dict[str, RewardRunner] = field(default_factory=dict)
    """Further graders scored on the greedy completions, by report key (`score_NAME`, `metric_key`)."""
    by: Optional[str] = None
    """Also report greedy accuracy per value of this row field (`eval.by`, e.g. GSM8K's `steps`):
    `accuracy_FIELD_VALUE`, `accuracy_lenient_FIELD_VALUE` (`flat_breakdown`)."""

    def __post_init__(self) -> None:
        if self.by:
            check_field(self.rows, self.by, "eval.by")
        self.last_scores: dict[str, list[float]] = {}
        """The further graders' opinions on the last greedy judgement (`metrics`)."""
        if self.agent is not None and self.loop is None:
            raise ValueError("an agent task's evaluator needs the agent loop's limits (loop=AgentConfig(...))")

    def sample(
        self,
        policy: Policy,
        rows: list[dict[str, Any]],
        n: int,
        temperature: float,
        generator: Optional[torch.Generator],
    ) -> tuple[RolloutBatch, list[Trajectory]]:
        """n completions (or episodes) per row at `temperature`, packed; the episodes' trajectories (agent tasks)."""
        if self.agent is not None:
            trajs = rollout(
                self.engine,
                policy,
                [self.agent.env_task(r) for r in rows],
                self.agent.make_env,
                replace(self.loop, temperature=temperature),
                n,
                generator,
            )
            return pack_episodes(trajs, rows, n, policy.tokenizer), trajs
        s = SamplingSettings(**{**self.settings.__dict__, "temperature": temperature})
        prompts = [r["prompt"] for r in rows]
        ids = [self.encoder(p) for p in prompts]
        gen = self.engine.generate(policy.model, ids, n, s, generator)
        fields = [{k: v for k, v in r.items() if k != "prompt"} for r in rows]
        return assemble(prompts, ids, fields, gen, n, policy.tokenizer), []

    def correct(
        self,
        policy: Policy,
        n: int,
        temperature: float,
        generator: Optional[torch.Generator],
        rows: Optional[int] = None,
    ) -> tuple[torch.Tensor, list[Trajectory]]:
        """(P, n) bool: n samples per held-out row, each judged correct by the first reward; and the
        trajectories of agent episodes (empty for single-turn tasks); `rows`: the first this many only."""
        ok, _, _, trajs = self.judge(policy, n, temperature, generator, rows)
        return ok, trajs

    def scores(self, batch: RolloutBatch) -> dict[str, list[float]]:
        """Each further grader's opinions on a judged batch (NaN, no opinion, left out)."""
        fields = batch.reward_fields()
        out = {}
        for key, runner in self.metrics.items():
            col = runner.score(batch.prompts, batch.completions, fields).components[:, 0]
            out[key] = [float(v) for v in col if not torch.isnan(v)]
        return out

    def judge(
        self,
        policy: Policy,
        n: int,
        temperature: float,
        generator: Optional[torch.Generator],
        rows: Optional[int] = None,
    ) -> tuple[torch.Tensor, Optional[torch.Tensor], float, list[Trajectory]]:
        """`correct`, plus the lenient grader's (P, n) verdicts on the same completions (None without one) and
        the mean completion length in tokens."""
        out, loose, trajs, tokens = [], [], [], 0.0
        self.last_scores = {k: [] for k in self.metrics}
        policy.model.eval()
        todo = self.rows[:rows] if rows else self.rows
        for i in range(0, len(todo), self.batch_size):
            chunk = todo[i : i + self.batch_size]
            batch, got = self.sample(policy, chunk, n, temperature, generator)
            fields = batch.reward_fields()
            first = self.rewards.score(batch.prompts, batch.completions, fields).components[:, 0]  # (p*n,)
            out.append((first >= self.threshold).reshape(len(chunk), n))
            if self.lenient is not None and self.agent is None:
                second = self.lenient.score(batch.prompts, batch.completions, fields).components[:, 0]
                loose.append((second >= self.threshold).reshape(len(chunk), n))
            if n == 1 and temperature == 0.0:
                for key, values in self.scores(batch).items():
                    self.last_scores[key] += values
            tokens += float(batch.completion_mask.sum())
            trajs += got
            if self.on_batch is not None:
                self.on_batch(len(chunk))
        lengths = tokens / max(1, len(todo) * n)
        return torch.cat(out), (torch.cat(loose) if loose else None), lengths, trajs

    def __call__(self, policy: Policy, pass_k: int = 0, temperature: float = 1.0, seed: int = 0) -> dict[str, float]:
        """{'accuracy': greedy accuracy, 'accuracy_lenient', 'completion_len', the agent metrics, 'pass@1',
        f'pass@{k}' for k in pass_ks(pass_k): from pass_k samples per row at `temperature`, and with `by` the
        breakdown by that row field (`flat_breakdown`)}."""
        result, ok, loose = self.report(policy, pass_k, temperature, seed)
        if self.by:
            result.update(flat_breakdown(breakdown(self.rows, ok, loose, self.by), self.by))
        return result

    def report(
        self, policy: Policy, pass_k: int = 0, temperature: float = 1.0, seed: int = 0
    ) -> tuple[dict[str, float], torch.Tensor, Optional[torch.Tensor]]:
        """`__call__`'s metrics, and the greedy verdicts per held-out row: strict (P,) bool and lenient (P,) bool
        (None without a lenient grader), e.g. for a breakdown by a row field (`ascent eval --by steps`)."""
        ok, loose, length, trajs = self.judge(policy, 1, 0.0, None)
        greedy = ok[:, 0], (None if loose is None else loose[:, 0])
        result = {"accuracy": int(ok.sum()) / ok.numel()}  # exact fraction, not a float32 mean
        if loose is not None:
            result["accuracy_lenient"] = int(loose.sum()) / loose.numel()
        result["completion_len"] = length
        for key, values in self.last_scores.items():
            if values:
                result[key] = sum(values) / len(values)
        if self.agent is not None:
            result.update(episode_stats(trajs))
            report = check_trajectories(trajs, policy.tokenizer)
            result["token_check_pass_rate"] = report["match_frac"]
            for line in report["divergences"]:
                log.warning("token check: %s", line)
        if pass_k > 0:
            generator = torch.Generator().manual_seed(seed)
            ok, _ = self.correct(policy, pass_k, temperature, generator, self.pass_k_rows)  # (P, pass_k)
            counts = ok.sum(-1).tolist()
            for k in pass_ks(pass_k):
                result[f"pass@{k}"] = sum(pass_at_k(pass_k, c, k) for c in counts) / len(counts)
        return result, *greedy


def check_field(rows: list[dict[str, Any]], field: str, option: str) -> None:
    """A DataError (one line) naming `option` when some held-out row has no `field`."""
    if any(field not in r for r in rows):
        have = sorted(rows[0]) if rows else []
        raise DataError(f"{option} {field}: the task's held-out rows have no field {field!r} (they have {have})")


def breakdown(
    rows: list[dict[str, Any]], ok: torch.Tensor, loose: Optional[torch.Tensor], field: str, option: str = "eval.by"
) -> dict[str, dict[str, float]]:
    """Greedy accuracy (and lenient accuracy) per value of the rows' `field`, with the row count, values sorted.

    >>> rows = [{"steps": 2}, {"steps": 1}, {"steps": 2}]
    >>> breakdown(rows, torch.tensor([True, False, False]), None, "steps")
    {'1': {'n': 1, 'accuracy': 0.0}, '2': {'n': 2, 'accuracy': 0.5}}
    """
    check_field(rows, field, option)
    groups: dict[Any, list[int]] = defaultdict(list)
    for i, r in enumerate(rows):
        groups[r[field]].append(i)
    out = {}
    for value in sorted(groups, key=lambda v: (isinstance(v, str), v)):
        idx = torch.tensor(groups[value])
        entry: dict[str, float] = {"n": len(idx), "accuracy": int(ok[idx].sum()) / len(idx)}
        if loose is not None:
            entry["accuracy_lenient"] = int(loose[idx].sum()) / len(idx)
        out[str(value)] = entry
    return out


def flat_breakdown(groups: dict[str, dict[str, float]], field: str) -> dict[str, float]:
    """`breakdown`'s groups as flat metric keys (what metrics.jsonl and summary.json hold); the row counts are
    left out (they are the task's, not the policy's).

    >>> flat_breakdown({"1": {"n": 65, "accuracy": 0.5, "accuracy_lenient": 0.75}}, "steps")
    {'accuracy_steps_1': 0.5, 'accuracy_lenient_steps_1': 0.75}
    """
    out: dict[str, float] = {}
    for value, entry in groups.items():
        for metric, number in entry.items():
            if metric != "n":
                out[f"{metric}_{field}_{value}"] = number
    return out
