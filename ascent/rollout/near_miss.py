"""DAVID-GRPO's grounded expansion (Han et al. 2026, "Can David Beat Goliath? On Multi-Hop Reasoning with
Resource-Constrained Agents", arXiv:2601.21699): `rollout.explorer=near_miss` resamples truncated near-miss
trajectories of agent tasks.

Under a small rollout budget most groups of a multi-hop task hold no success, so GRPO has nothing to learn from.
DAVID-GRPO spends part of each group's budget on continuations of the round's own partial successes instead of
on fresh episodes from the question: an episode that failed the outcome but reached some of the gold evidence (a
near miss) is cut right after the turn whose observation brought its last gold document, and the policy samples
on from there, so the budget buys samples where the evidence already gathered makes success likely rather than
from a poorly chosen prefix (the paper's criticism of random tree expansion).

Per group of n = rollout.samples_per_prompt episodes:

    1. n - m fresh episodes (m = `resample`);
    2. each is scored with the run's rewards: a failure has reward < `threshold`; its evidence recall after turn t
       is |gold documents whose id appears in observations 0..t| / |gold|, gold = the row's `evidence_field`;
    3. near misses: failures whose recall reaches more than `min_recall`, ranked by recall (then by shorter cut);
       each is cut after turn k = the first turn at which its recall is highest (it must leave a turn to sample);
    4. the m remaining episodes resume the near misses in rank order, round robin (`acontinue`: a fresh
       environment replays the first k turns, their tokens are forced, mask 0); a group with no near miss gets
       m fresh episodes instead.

The group is the n episodes together: a resumed episode's outcome is compared with the fresh ones' (GRPO's
baseline over all n), and only its new turns enter the loss. Everything is sampled by the current policy, so
the round stays on-policy (no TIS needed). Logged: `explore/near_miss_groups` (share of groups with a near miss),
`explore/resumed` (resumed episodes per round), `explore/resumed_success` and `explore/fresh_success` (success
rates of the two kinds, after the round is scored).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

import torch

from ascent import papers
from ascent.data.samplers import Draw
from ascent.rollout.explorers import EXPLORERS, Explorer, ExplorerContext
from ascent.rollout.types import RolloutBatch


@dataclass(frozen=True)
class NearMissParams:
    """DAVID-GRPO's grounded expansion: resample truncated near-miss trajectories."""

    resample: int = 2
    """Episodes per group that resume a near miss (taken from the group's rollout.samples_per_prompt, so the budget
    is the same as plain GRPO's); in [1, samples_per_prompt - 1]."""
    threshold: float = 1.0
    """An episode succeeded when its reward is >= this; a failure can be a near miss."""
    min_recall: float = 0.0
    """A failure is a near miss when its evidence recall is above this; in [0, 1)."""
    evidence_field: str = "evidence"
    """Row field with the gold evidence document ids (search_world: `evidence`)."""
    id_format: str = "[{id}]"
    """How a document id appears in an observation that shows it (search_world: `[doc-007] title: ...`)."""

    def __post_init__(self) -> None:
        if self.resample < 1:
            raise ValueError(f"resample must be >= 1, got {self.resample}")
        if not 0.0 <= self.min_recall < 1.0:
            raise ValueError(f"min_recall must be in [0, 1), got {self.min_recall}")
        if "{id}" not in self.id_format:
            raise ValueError(f"id_format must contain {{id}}, got {self.id_format!r}")


def recall_by_turn(gold: list[str], observations: list[Optional[str]], id_format: str = "[{id}]") -> list[float]:
    """Evidence recall after each turn: the share of `gold` ids shown (as `id_format`) in observations 0..t.

    >>> recall_by_turn(["d1", "d2"], ["[d3] x", "[d1] y", None, "[d2] z"])
    [0.0, 0.5, 0.5, 1.0]
    """
    seen: set[str] = set()
    out = []
    for text in observations:
        seen |= {d for d in gold if text is not None and id_format.format(id=d) in text}
        out.append(len(seen) / len(gold) if gold else 0.0)
    return out


def near_miss_plan(
    rewards: torch.Tensor,
    fields: list[dict[str, Any]],
    fresh: int,
    max_turns: int,
    p: NearMissParams,
) -> list[list[Optional[tuple[int, int]]]]:
    """Per group (`fresh` scored episodes each, row-major, `rewards` (N,), NaN = invalid), the `p.resample`
    starts of its resumed episodes: (episode j of the group, cut after turn k), None for a fresh episode.

    >>> f = lambda obs: {"evidence": ["d1", "d2"], "agent_observation_texts": obs}
    >>> rows = [f(["[d1]", "[d2]", None]), f(["[d1]", "x", None]), f(["x", None]), f(["[d1]", "[d2]", None])]
    >>> near_miss_plan(torch.tensor([0.0, 0.0, 0.0, 1.0]), rows, 4, 4, NearMissParams(resample=3))
    [[(0, 2), (1, 1), (0, 2)]]
    """
    plan: list[list[Optional[tuple[int, int]]]] = []
    for g in range(len(fields) // fresh):
        ranked = []  # (-recall, cut, j)
        for j in range(fresh):
            i = g * fresh + j
            r = float(rewards[i])
            if r != r or r >= p.threshold:  # invalid, or a success
                continue
            gold = [str(d) for d in (fields[i].get(p.evidence_field) or [])]
            obs = fields[i].get("agent_observation_texts") or []
            recall = recall_by_turn(gold, obs, p.id_format)
            if not recall or max(recall) <= p.min_recall:
                continue
            cut = recall.index(max(recall)) + 1  # resume after the turn that brought the last gold document
            if cut < max_turns and obs[cut - 1] is not None:
                ranked.append((-max(recall), cut, j))
        ranked.sort()
        plan.append(
            [(ranked[m % len(ranked)][2], ranked[m % len(ranked)][1]) if ranked else None for m in range(p.resample)]
        )
    return plan


@EXPLORERS.register(
    "near_miss",
    params=NearMissParams,
    paper=papers.DAVID_GRPO,
    fidelity="reduced",
    departures=(
        (
            "a near miss is a failed episode with evidence recall above `min_recall`, cut after the turn that "
            "brought its last gold document and resumed round robin in order of recall: ascent's reading of the "
            "paper's grounded expansion (the method section's exact selection and cut rule were not available)"
        ),
        (
            "resumed episodes take `resample` of the group's samples_per_prompt slots (same budget as GRPO) and "
            "train on their new turns only (the replayed prefix is masked; it is trained through its own episode)"
        ),
        "a gold document counts as reached when its id appears in an observation (search results or an opened doc)",
        "DAVID-GRPO's minimal-supervision (few expert trajectories) stage is not part of this explorer",
    ),
)
class NearMissExplorer(Explorer):
    """DAVID-GRPO's grounded expansion (Han et al. 2026, arXiv:2601.21699): resample truncated near-miss
    trajectories; the module docstring has the rule. Agent tasks only (it needs `AgentCollector`); scores the
    first stage with the run's rewards (ctx.scorer), so the round's rewards are computed twice for those episodes.
    """

    agents = True
    """Works on agent tasks (the trainer refuses other explorers there)."""

    def __init__(self, ctx: ExplorerContext, params: NearMissParams = NearMissParams()) -> None:
        if not hasattr(ctx.collector, "collect_continued"):
            raise ValueError("rollout.explorer=near_miss resumes agent episodes: it needs an agent task (data.task)")
        if getattr(ctx, "scorer", None) is None:
            raise ValueError("rollout.explorer=near_miss needs ExplorerContext.scorer (the run's rewards)")
        if params.resample >= ctx.samples_per_prompt:
            raise ValueError(
                f"near_miss: resample={params.resample} must be < rollout.samples_per_prompt="
                f"{ctx.samples_per_prompt} (at least one fresh episode per group)"
            )
        self.ctx, self.params = ctx, params
        self.resumed: Optional[torch.Tensor] = None  # (N,) bool of the last round
        self.last = {
            "near_miss_groups": 0.0,
            "resumed": 0.0,
            "resumed_success": float("nan"),
            "fresh_success": float("nan"),
        }

    def collect(self, draw: Draw, generator: torch.Generator) -> RolloutBatch:
        if draw.samples is not None:
            raise ValueError("rollout.explorer=near_miss needs a fixed group size (a sampler without per-row samples)")
        n, fresh = self.ctx.samples_per_prompt, self.ctx.samples_per_prompt - self.params.resample
        chosen: list[list[Optional[tuple[int, int]]]] = []

        def choose(first: RolloutBatch) -> list[list[Optional[tuple[int, int]]]]:
            scores = self.ctx.scorer(first.prompts, first.completions, first.reward_fields())
            rewards = torch.where(scores.valid, scores.rewards, torch.nan)
            chosen.extend(near_miss_plan(rewards, first.fields, fresh, self.ctx.collector.loop.max_turns, self.params))
            return chosen

        batch = self.ctx.collector.collect_continued(draw.indices, generator, fresh, choose)
        resumed = torch.tensor([j >= fresh and plan[j - fresh] is not None for plan in chosen for j in range(n)])
        self.resumed = resumed
        self.last.update(
            near_miss_groups=sum(any(s is not None for s in plan) for plan in chosen) / max(len(chosen), 1),
            resumed=float(resumed.sum()),
        )
        return batch

    def observe(self, batch: RolloutBatch, rewards: torch.Tensor, valid: torch.Tensor) -> None:
        if self.resumed is None or len(self.resumed) != len(batch):
            return
        ok = valid & (torch.nan_to_num(rewards, nan=-float("inf")) >= self.params.threshold)
        for key, mask in (("resumed_success", self.resumed), ("fresh_success", ~self.resumed)):
            self.last[key] = float(ok[mask].float().mean()) if mask.any() else float("nan")

    def state_dict(self) -> dict[str, Any]:
        return {"last": dict(self.last)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if state:
            self.last = dict(state["last"])
