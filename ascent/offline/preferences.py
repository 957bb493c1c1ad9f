"""Offline preference data and the Bradley-Terry reward model: what IPL, the two-stage baseline (`pref_iql`) and REED
share (docs/offline.md, "Preference-based offline RL").

Preferences are made from a dataset written by `ascent collect` by a *scripted teacher* (the convention of the
preference-based RL benchmarks, Lee et al. 2021 B-Pref, arXiv:2111.03026, and IPL's synthetic-label experiments):
pairs of segments of `segment_len` consecutive transitions, each inside one episode, drawn uniformly over all such
segments, labelled by which has the larger true (undiscounted) return, a label then flipped with probability
`flip_rate` (B-Pref's "mistake" teacher). The learner sees the labels, never the rewards.

    label y = P(sigma_1 > sigma_2) = 1 if R(sigma_1) > R(sigma_2), 0 if less, 1/2 on a tie; flipped w.p. flip_rate
    Bradley-Terry: P_theta(sigma_1 > sigma_2) = sigmoid(sum_t r_theta(s1_t, a1_t) - sum_t r_theta(s2_t, a2_t))
    loss = BCE(P_theta, y)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from ascent.classic.networks import adam, mlp
from ascent.offline.dataset import read_episodes


@dataclass(frozen=True)
class PreferenceFields:
    """The preference data of an offline preference-based algorithm (the scripted teacher, module docstring)."""

    n_pairs: int = 500
    """Labelled segment pairs (the preference budget), >= 1."""
    segment_len: int = 25
    """Transitions per segment, >= 1; every episode shorter than this is skipped."""
    flip_rate: float = 0.0
    """Probability that the teacher's label is flipped, in [0, 0.5)."""
    eval_pairs: int = 2000
    """Fresh pairs with unflipped labels on which the learned preference model's accuracy is reported (0: none)."""

    def check_preferences(self) -> None:
        if self.n_pairs < 1 or self.segment_len < 1 or self.eval_pairs < 0:
            raise ValueError(
                f"n_pairs and segment_len must be >= 1 and eval_pairs >= 0, got {self.n_pairs}, {self.segment_len}, "
                f"{self.eval_pairs}"
            )
        if not 0.0 <= self.flip_rate < 0.5:
            raise ValueError(f"flip_rate must be in [0, 0.5), got {self.flip_rate}")


@dataclass
class SegmentPairs:
    """K labelled pairs of segments of H transitions, as indices into the flattened dataset."""

    idx: np.ndarray
    """(K, 2, H) int64: transition indices of segment 1 and segment 2."""
    label: np.ndarray
    """(K,) float32: P(segment 1 preferred), the teacher's label (after flips)."""
    returns: np.ndarray
    """(K, 2) float64: each segment's true return (kept for reporting; never given to a learner)."""

    def __len__(self) -> int:
        return len(self.label)


def episode_lengths(path: str) -> np.ndarray:
    """(E,) the lengths of the dataset's episodes, in the order `load_transitions` flattens them."""
    episodes, _, _ = read_episodes(path)
    return np.array([len(ep) for ep in episodes], np.int64)


def segment_starts(lengths: np.ndarray, segment_len: int) -> np.ndarray:
    """Every flattened index at which a segment of `segment_len` transitions fits inside one episode.

    >>> segment_starts(np.array([3, 1, 4]), 2).tolist()  # episodes at 0..2, 3, 4..7
    [0, 1, 4, 5, 6]
    """
    offsets = np.concatenate([[0], np.cumsum(lengths)[:-1]])
    starts = [o + np.arange(n - segment_len + 1) for o, n in zip(offsets, lengths) if n >= segment_len]
    return np.concatenate(starts) if starts else np.zeros(0, np.int64)


def teacher_labels(returns: np.ndarray, flip_rate: float, rng: np.random.Generator) -> np.ndarray:
    """(K,) P(segment 1 preferred) from (K, 2) true returns: 1, 0 or 1/2 on a tie, flipped w.p. flip_rate.

    >>> teacher_labels(np.array([[1.0, 0.0], [0.0, 2.0], [3.0, 3.0]]), 0.0, np.random.default_rng(0)).tolist()
    [1.0, 0.0, 0.5]
    """
    label = np.where(returns[:, 0] > returns[:, 1], 1.0, np.where(returns[:, 0] < returns[:, 1], 0.0, 0.5))
    flip = rng.random(len(label)) < flip_rate
    return np.where(flip, 1.0 - label, label).astype(np.float32)


def sample_pairs(
    rewards: np.ndarray, starts: np.ndarray, n_pairs: int, segment_len: int, flip_rate: float, rng: np.random.Generator
) -> SegmentPairs:
    """`n_pairs` pairs of segments drawn uniformly over `starts`, labelled by the scripted teacher."""
    if len(starts) == 0:
        raise ValueError(f"no episode of the dataset has segment_len={segment_len} transitions; lower segment_len")
    first = starts[rng.integers(0, len(starts), size=(n_pairs, 2))]  # (K, 2)
    idx = first[..., None] + np.arange(segment_len)  # (K, 2, H)
    returns = rewards[idx].astype(np.float64).sum(-1)  # (K, 2)
    return SegmentPairs(idx.astype(np.int64), teacher_labels(returns, flip_rate, rng), returns)


def preference_loss(logits: torch.Tensor, label: torch.Tensor) -> torch.Tensor:
    """Bradley-Terry's loss: BCE(sigmoid(logits), label), logits = sum r(segment 1) - sum r(segment 2).

    >>> round(float(preference_loss(torch.tensor([0.0, float(np.log(3.0))]), torch.tensor([1.0, 1.0]))), 6)
    0.490415
    """
    return F.binary_cross_entropy_with_logits(logits, label)  # (log 2 + log 4/3) / 2 in the doctest


def preference_accuracy(logits: torch.Tensor, returns: np.ndarray) -> float:
    """Share of pairs with unequal true returns whose larger-return segment gets the positive logit."""
    keep = returns[:, 0] != returns[:, 1]
    if not keep.any():
        return float("nan")
    pred = logits.detach().cpu().numpy()[keep] > 0
    return float(np.mean(pred == (returns[keep, 0] > returns[keep, 1])))


class RewardMLP(nn.Module):
    """r(s, a) = tanh(f([s, a])), the Markovian reward model of the preference-based RL benchmarks (B-Pref's, with
    its tanh output)."""

    def __init__(self, obs_dim: int, action_dim: int, hidden: list[int]) -> None:
        super().__init__()
        self.net = mlp([obs_dim + action_dim, *hidden, 1], "relu")

    def forward(self, obs: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
        return torch.tanh(self.net(torch.cat([obs, actions], -1))).squeeze(-1)  # (...,)


def segment_logits(reward: Callable[[torch.Tensor, torch.Tensor], torch.Tensor], obs, actions, idx) -> torch.Tensor:
    """sum_t r(s1_t, a1_t) - sum_t r(s2_t, a2_t) for the pairs `idx` (K, 2, H) of (N, D) obs and (N, A) actions."""
    r = reward(obs[idx], actions[idx])  # (K, 2, H)
    return r[:, 0].sum(-1) - r[:, 1].sum(-1)


def fit_bradley_terry(
    reward: nn.Module,
    obs: torch.Tensor,
    actions: torch.Tensor,
    pairs: SegmentPairs,
    steps: int,
    batch_pairs: int,
    lr: float,
    rng: np.random.Generator,
    params: list[nn.Parameter] | None = None,
) -> list[float]:
    """`steps` Adam steps of the Bradley-Terry loss on mini-batches of `batch_pairs` pairs; the losses."""
    opt = adam(params if params is not None else list(reward.parameters()), lr)
    label, losses = torch.from_numpy(pairs.label), []
    for _ in range(steps):
        b = rng.integers(0, len(pairs), size=min(batch_pairs, len(pairs)))
        loss = preference_loss(segment_logits(reward, obs, actions, torch.from_numpy(pairs.idx[b])), label[b])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        losses.append(float(loss.detach()))
    return losses


def episode_sums(values: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """(E,) per-episode sums of the flattened (N,) `values`.

    >>> episode_sums(np.array([1.0, 2.0, 3.0, 4.0]), np.array([1, 3])).tolist()
    [1.0, 9.0]
    """
    return np.add.reduceat(values.astype(np.float64), np.concatenate([[0], np.cumsum(lengths)[:-1]]))
