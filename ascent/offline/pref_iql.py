"""The two-stage preference-based baseline: a Bradley-Terry reward model fitted to offline preferences, then IQL on
the dataset relabelled with it (`pref_iql`; the "MR + IQL" baseline of Kim et al. 2023, Preference Transformer,
arXiv:2303.00957, and of IPL, Hejna & Sadigh 2023, arXiv:2305.15363).

At construction, from the run's dataset (ascent/offline/preferences.py): `n_pairs` segment pairs labelled by the
scripted teacher, `eval_pairs` more with unflipped labels for reporting; the reward model r(s, a) fitted by
`reward_steps` Adam steps of the Bradley-Terry loss (the one hook `fit_reward`, which REED overrides); every
transition's reward replaced by r(s, a), scaled like IQL's locomotion rewards (1000 / (max - min) of the episodes'
learned returns); then IQL's gradient steps, unchanged. The dataset's own rewards enter only through the labels.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from torch import nn

from ascent.classic.base import CLASSIC, ClassicContext
from ascent.offline.base import return_scale
from ascent.offline.iql import IQL, IQLParams
from ascent.offline.preferences import (
    PreferenceFields,
    RewardMLP,
    SegmentPairs,
    episode_lengths,
    episode_sums,
    fit_bradley_terry,
    preference_accuracy,
    sample_pairs,
    segment_logits,
    segment_starts,
)
from ascent.registry import Paper

PREFERENCE_TRANSFORMER = Paper(
    "Preference Transformer",
    "Kim, Park, Shin, Lee, Abbeel & Lee",
    2023,
    "Preference Transformer: Modeling Human Preferences using Transformers for RL (ICLR 2023)",
    "arXiv:2303.00957",
    section="baselines",
)


@dataclass(frozen=True)
class PrefIQLParams(IQLParams, PreferenceFields):
    """A Bradley-Terry reward model from preferences, then IQL on its rewards (module docstring)."""

    reward_steps: int = 2000
    """Adam steps of the reward model on the preference pairs, >= 1."""
    reward_batch: int = 64
    """Segment pairs per reward-model step."""
    reward_lr: float = 3e-4
    """Adam learning rate of the reward model, > 0."""
    reward_hidden: list[int] = field(default_factory=lambda: [256, 256])
    """Hidden widths of the reward model (ReLU; tanh output)."""

    def __post_init__(self) -> None:
        IQLParams.__post_init__(self)
        self.check_preferences()
        if self.reward_steps < 1 or self.reward_batch < 1 or not self.reward_lr > 0 or not self.reward_hidden:
            raise ValueError(
                f"reward_steps, reward_batch, reward_lr must be > 0 and reward_hidden non-empty, got "
                f"{self.reward_steps}, {self.reward_batch}, {self.reward_lr}, {self.reward_hidden}"
            )


def make_preferences(algo: Any, p: PreferenceFields, rng: np.random.Generator) -> tuple[SegmentPairs, SegmentPairs]:
    """(training pairs, evaluation pairs) of the run's dataset, the teacher reading its true rewards."""
    lengths = episode_lengths(algo.ctx.dataset)
    starts = segment_starts(lengths, p.segment_len)
    train = sample_pairs(algo.data.rewards, starts, p.n_pairs, p.segment_len, p.flip_rate, rng)
    held = sample_pairs(algo.data.rewards, starts, max(p.eval_pairs, 1), p.segment_len, 0.0, rng)
    return train, held


class PrefIQL(IQL):
    """IQL on the rewards of a Bradley-Terry model fitted to the dataset's synthetic preferences."""

    name = "pref_iql"

    def __init__(self, ctx: ClassicContext, params: PrefIQLParams) -> None:
        super().__init__(ctx, params)
        p = params
        rng = np.random.default_rng([ctx.seed, 1])
        self.pairs, held = make_preferences(self, p, rng)
        with torch.random.fork_rng():
            torch.manual_seed(ctx.seed + 1)
            self.reward_model = self.fit_reward(self.pairs, rng)
        with torch.no_grad():
            learned = self.reward_model(self.t_obs, self.t_actions).cpu().numpy()  # (N,)
            acc = preference_accuracy(segment_logits(self.reward_model, self.t_obs, self.t_actions,
                                                     torch.from_numpy(held.idx)), held.returns)  # fmt: skip
        lengths = episode_lengths(ctx.dataset)
        scale = return_scale(episode_sums(learned, lengths)) if p.reward_scale == "return" else 1.0
        self.reward_scale = scale
        self.t_rewards = torch.from_numpy((learned * scale).astype(np.float32)).to(ctx.device)
        corr = float(np.corrcoef(learned, self.data.rewards)[0, 1]) if learned.std() > 0 else float("nan")
        self.report = {"reward_model/heldout_accuracy": acc, "reward_model/reward_corr": corr}

    def fit_reward(self, pairs: SegmentPairs, rng: np.random.Generator) -> nn.Module:
        """The reward model r(s, a) fitted to `pairs` (the hook REED overrides)."""
        p = self.p
        model = RewardMLP(self.obs_dim, self.action_dim, p.reward_hidden).to(self.ctx.device)
        fit_bradley_terry(model, self.t_obs, self.t_actions, pairs, p.reward_steps, p.reward_batch, p.reward_lr, rng)
        return model

    def iteration(self, want_metrics: bool) -> dict[str, float]:
        metrics = super().iteration(want_metrics)
        return {**metrics, **self.report} if want_metrics else metrics


@CLASSIC.register(
    "pref_iql",
    params=PrefIQLParams,
    paper=PREFERENCE_TRANSFORMER,
    fidelity="ascent",
    departures=(
        "the Markovian reward model ('MR') baseline of Preference Transformer / IPL, not the transformer",
        "synthetic preferences from a scripted teacher on the dataset's true returns (optionally flipped), made at "
        "construction from the run's dataset, instead of the human-labelled D4RL queries of Kim et al.",
        "one reward model (no ensemble), tanh output as in B-Pref; learned rewards scaled like IQL's locomotion "
        "rewards, by 1000 / (max - min) of the episodes' learned returns",
    ),
)
def pref_iql(ctx: ClassicContext, params: PrefIQLParams = PrefIQLParams()) -> PrefIQL:
    """Bradley-Terry reward model from synthetic segment preferences, then IQL on its rewards (arXiv:2303.00957's
    MR baseline). r: -mean [y log sigma(sum r1 - sum r2) + (1 - y) log sigma(sum r2 - sum r1)]; then IQL."""
    return PrefIQL(ctx, params)


pref_iql.action_spaces = frozenset({"continuous"})
