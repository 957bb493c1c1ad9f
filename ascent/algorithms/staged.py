"""Staged advantage estimation for groups whose completions start from different depths of one tree path.

Tree-OPO (Huang, Nguyen & Zimmer, 2025, arXiv:2509.09284, "Tree-OPO: Off-policy Monte Carlo Tree-Guided
Advantage Optimization for Multistep Reasoning"; first version: "staged GRPO with MCTS-derived trajectories")
trains GRPO on completions that start from partially revealed MCTS rollouts. Samples of one group then condition
on different prefixes, each with its own expected return, so one group mean is the wrong baseline; their Staged
Advantage Estimation (SAE) projects the per-prefix baselines onto a set that respects the tree's order. The
`mcts` explorer (ascent/rollout/tree_search.py) records each sample's stage (the number of revealed chunks of
the path) in `RolloutBatch.extras["stage"]`.
"""

from __future__ import annotations

import torch

from ascent import papers
from ascent.algorithms.advantages import ADVANTAGES, broadcast, group_moments
from ascent.algorithms.types import AdvantageInput

STAGE_KEY = "stage"
"""AdvantageInput.extras key: (N,) long, how many chunks of the group's tree path each sample's prefix reveals."""


def isotonic(values: list[float], weights: list[float]) -> list[float]:
    """The weighted least-squares non-decreasing fit of `values` (pool adjacent violators).

    >>> isotonic([1.0, 0.0, 0.5], [1.0, 1.0, 2.0]), isotonic([0.0, 1.0], [3.0, 1.0])
    ([0.5, 0.5, 0.5], [0.0, 1.0])
    """
    blocks: list[list[float]] = []  # [weighted sum, weight, members]
    for v, w in zip(values, weights):
        blocks.append([v * w, w, 1])
        while len(blocks) > 1 and blocks[-2][0] / blocks[-2][1] > blocks[-1][0] / blocks[-1][1]:
            s, w2, n = blocks.pop()
            blocks[-1] = [blocks[-1][0] + s, blocks[-1][1] + w2, blocks[-1][2] + n]
    return [b[0] / b[1] for b in blocks for _ in range(int(b[2]))]


def stage_baselines(rewards: torch.Tensor, valid: torch.Tensor, group_index: torch.Tensor, stage: torch.Tensor):
    """(N,) each sample's baseline: its stage's mean valid reward within its group, projected (`isotonic`, weights
    the sample counts) so that deeper stages of the group's path never have a lower baseline; 0 where invalid."""
    out = torch.zeros_like(rewards)
    for g in group_index.unique().tolist():
        rows = (group_index == g) & valid
        depths = sorted(set(stage[rows].tolist()))
        means = [float(rewards[rows & (stage == d)].mean()) for d in depths]
        counts = [float((rows & (stage == d)).sum()) for d in depths]
        for d, b in zip(depths, isotonic(means, counts)):
            out[rows & (stage == d)] = b
    return out


@ADVANTAGES.register(
    "staged",
    paper=papers.TREE_OPO,
    fidelity="reduced",
    departures=(
        (
            "the chain (one path) case only, with an isotonic (pool-adjacent-violators) projection in place of the "
            "paper's QP"
        ),
        (
            "stages come from the online `mcts` explorer of the current policy, not a teacher's offline tree; the "
            "non-decreasing direction is ascent's reading"
        ),
    ),
)
def staged(inp: AdvantageInput, cfg) -> torch.Tensor:
    """Staged advantages (Tree-OPO's SAE, Huang et al. 2025, arXiv:2509.09284), heuristic projection.

    A_i = (r_i − b_{g, s_i}) / (std_g r + eps), s_i the sample's stage (extras["stage"], the `mcts` explorer's
    revealed depth), b_{g, s} the mean reward of group g's stage-s samples projected onto non-decreasing in s
    (pool adjacent violators, weighted by counts: `stage_baselines`): a deeper prefix of the search's best path is
    at least as easy as a shallower one (the reverse curriculum of the paper's tree), and pooling neighbouring
    stages keeps a one-sample stage from a zero advantage (the paper's "advantage saturation"). The std is the
    whole group's (a per-stage std would blow up on tiny stages: the "reward collapse" fix). The paper solves a
    quadratic program over the whole tree; this is the chain (one path) case with the isotonic projection as the
    QP. Without stages (every sample at stage 0) it is `grpo` (up to float rounding of the mean).
    """
    stage = inp.extras.get(STAGE_KEY)
    if stage is None:
        stage = torch.zeros_like(inp.group_index)
    _, _, std = group_moments(inp.rewards, inp.group_index, inp.valid)
    r = torch.where(inp.valid, inp.rewards, torch.zeros_like(inp.rewards))
    base = stage_baselines(r, inp.valid, inp.group_index, stage.long())
    adv = torch.where(std > 0, (r - base) / (std + cfg.std_eps), torch.zeros_like(r))
    return broadcast(adv, inp)
