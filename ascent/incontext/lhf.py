"""Learning history filtering (LHF; Chen, Zhang, Subramanian & Paternain 2025, "Filtering Learning Histories
Enhances In-Context Reinforcement Learning", arXiv:2505.15143).

Algorithm Distillation imitates every learning history of its dataset alike, so a source run that learned badly
(noisy, unstable, never improving) is copied as faithfully as a good one. LHF preprocesses the dataset: each history
D gets a score U(D) = Improvement(D) + lambda * Stability(D), and the model is trained by a weighted empirical risk
in which history D is drawn with a probability that grows with U(D) (histories with the lowest scores are
filtered out). The backbone (here ascent's AD transformer, ascent.incontext.model) and its training are unchanged.

The scores, as read here (the exact normalisation is this module's reading of the paper's definition):
the E episode returns of a history are averaged in B consecutive blocks, m_1 .. m_B (Bernoulli rewards are noisy
per episode; blocks smooth them), and with c the range of all block means of the dataset (so lambda is
scale-free)

    Improvement(D) = (m_B - m_1) / c
    Stability(D)   = -(1 / (B - 1)) sum_b max(0, m_b - m_{b+1}) / c     (how much the history ever falls back)
    w(D)           = (U(D) - min U) / (max U - min U)                   (the worst history gets weight 0)

and histories below the `keep` quantile of U get weight 0 as well (`keep` = 1: reweighting only). Windows of the
AD training are then cut from history D with probability w(D) / sum w.

The experiment (`run_lhf`): a dataset mixing a learning source with a non-learning one (the paper's "noisy data"
setting: part of the histories are uninformative), AD trained on it uniformly and AD+LHF trained on the same
histories weighted, from the same initial weights, for the same steps; both evaluated in context on the same
held-out tasks with frozen weights.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

import numpy as np
import torch

from ascent.incontext.histories import History, cached_history
from ascent.incontext.methods import META_METHODS, PAIRS
from ascent.incontext.model import InContextTransformer, TransformerParams
from ascent.incontext.tasks import make_family
from ascent.incontext.train import TrainParams, evaluate_in_context, train_model
from ascent.registry import Paper

LHF = Paper(
    "LHF",
    "Chen, Zhang, Subramanian & Paternain",
    2025,
    "Filtering Learning Histories Enhances In-Context Reinforcement Learning",
    "arXiv:2505.15143",
)


def block_means(returns: np.ndarray, blocks: int) -> np.ndarray:
    """(N, B) mean return of B consecutive, equal blocks of episodes (the last E mod B episodes are dropped).

    >>> block_means(np.array([[0.0, 1.0, 2.0, 3.0, 9.0]]), 2).tolist()
    [[0.5, 2.5]]
    """
    n, e = returns.shape
    if not 2 <= blocks <= e:
        raise ValueError(f"blocks must be in [2, episodes={e}], got {blocks}")
    k = e // blocks
    return returns[:, : k * blocks].reshape(n, blocks, k).mean(-1)


def lhf_scores(returns: np.ndarray, lam: float, blocks: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(improvement, stability, U) per history from its (N, E) episode returns (see the module docstring).

    >>> imp, stab, u = lhf_scores(np.array([[0.0, 1.0, 2.0, 3.0], [2.0, 0.0, 2.0, 0.0]]), lam=1.0, blocks=4)
    >>> imp.tolist(), stab.tolist(), u.tolist()
    ([1.0, -0.6666666666666666], [0.0, -0.4444444444444444], [1.0, -1.1111111111111112])
    """
    m = block_means(np.asarray(returns, dtype=np.float64), blocks)  # (N, B)
    scale = max(float(m.max() - m.min()), 1e-12)
    improvement = (m[:, -1] - m[:, 0]) / scale
    stability = 0.0 - np.maximum(0.0, m[:, :-1] - m[:, 1:]).mean(1) / scale
    return improvement, stability, improvement + lam * stability


def lhf_weights(u: np.ndarray, keep: float = 1.0) -> np.ndarray:
    """Sampling weights in [0, 1] from scores U: min-max scaled, those below the (1 - keep) quantile set to 0.

    >>> lhf_weights(np.array([1.0, 3.0, 2.0, 5.0])).tolist()
    [0.0, 0.5, 0.25, 1.0]
    >>> lhf_weights(np.array([1.0, 3.0, 2.0, 5.0]), keep=0.5).tolist()
    [0.0, 0.5, 0.0, 1.0]
    """
    if not 0 < keep <= 1:
        raise ValueError(f"keep must be in (0, 1], got {keep}")
    span = float(u.max() - u.min())
    w = (u - u.min()) / span if span > 0 else np.ones_like(u, dtype=np.float64)
    if keep < 1:
        w = np.where(u >= np.quantile(u, 1 - keep), w, 0.0)
    if w.sum() <= 0:  # every history scored the same: uniform
        w = np.ones_like(w)
    return w


@dataclass(frozen=True)
class LHFParams:
    family: str = "bandit(arms=5)"
    """Task family (`ascent list incontext_families`)."""
    sources: list[str] = field(default_factory=lambda: ["ucb", "noisy_expert(eps_start=1.0,eps_end=1.0)"])
    """Source specs mixed in equal shares into one dataset (default: UCB learning histories and uniform-random
    ones that never improve)."""
    histories: int = 256
    """Training histories in all (split evenly over `sources`)."""
    episodes: int = 100
    """Episodes per history."""
    lam: float = 1.0
    """lambda, the weight of stability in U = improvement + lambda * stability."""
    blocks: int = 10
    """Blocks of episodes the returns are averaged over before scoring."""
    keep: float = 1.0
    """Quantile of the scores kept (1: weight every history by its score, the worst at 0)."""
    eval_tasks: int = 100
    """Held-out tasks."""
    eval_episodes: int = 60
    """In-context episodes on each."""
    model: TransformerParams = field(default_factory=lambda: TransformerParams(num_layers=2, hidden_size=64))
    """The AD transformer."""
    train: TrainParams = field(default_factory=lambda: TrainParams(context=60, steps=800, warmup=50))
    """Its training (the same for AD and AD+LHF)."""
    cache_dir: Optional[str] = "runs/incontext/cache"
    """History cache (null: none)."""

    def __post_init__(self) -> None:
        if not self.sources or self.histories < len(self.sources) or self.lam < 0 or not 0 < self.keep <= 1:
            raise ValueError("lhf needs sources, histories >= len(sources), lam >= 0 and keep in (0, 1]")
        if self.blocks < 2 or self.blocks > self.episodes or self.eval_episodes < 10:
            raise ValueError("lhf needs 2 <= blocks <= episodes and eval_episodes >= 10")


def mixed_history(p: LHFParams, seed: int) -> History:
    """The sources' histories on the family's training tasks, concatenated row-wise (equal shares)."""
    family = make_family(p.family)
    tasks = family.tasks("train", p.histories, seed)
    parts = np.array_split(np.arange(p.histories), len(p.sources))
    cache = Path(p.cache_dir) if p.cache_dir else None
    hs = [cached_history(family, p.family, tasks[ix], s, p.episodes, seed, cache) for ix, s in zip(parts, p.sources)]
    cat = lambda name: np.concatenate([getattr(h, name) for h in hs])  # noqa: E731
    return History(
        family.name, "+".join(p.sources), hs[0].horizon, cat("tasks"), cat("obs"), cat("actions"), cat("rewards")
    )


@META_METHODS.register(
    "lhf",
    params=LHFParams,
    paper=LHF,
    fidelity="reduced",
    departures=(
        "improvement and stability are read as block-mean end-to-end gain and mean fall-back, scaled by the range",
        "one backbone (AD) and bandits / Dark Room only; the paper also runs DPT, DICP and Meta-World",
        "noisy data is a share of whole uniform-random histories, not noise injected into every history",
    ),
)
def run_lhf(seed: int, params: LHFParams = LHFParams()) -> dict:
    """AD vs AD+LHF on the same mixed histories, same initial weights and steps; in-context returns on held-out
    tasks (first 5, last 5, all episodes) and the share of LHF's sampling mass on the first source's histories."""
    p = params
    family = make_family(p.family)
    hist = mixed_history(p, seed)
    _, _, u = lhf_scores(hist.episode_returns(), p.lam, p.blocks)
    w = lhf_weights(u, p.keep)
    test_tasks = family.tasks("test", p.eval_tasks, 0)
    grid = int(np.sqrt(family.num_obs)) if family.name != "bandit" else 0
    out: dict = {}
    for arm, weights in (("ad", None), ("lhf", w)):
        torch.manual_seed(seed)
        model = InContextTransformer(family.num_obs, family.num_actions, family.horizon, p.train.context, p.model, grid)
        losses = train_model(model, hist, p.train, seed, history_weights=weights)
        ret = evaluate_in_context(model, family, test_tasks, p.eval_episodes, seed + 1000)  # (tasks, E)
        out[f"first5_{arm}"] = float(ret[:, :5].mean())
        out[f"last5_{arm}"] = float(ret[:, -5:].mean())
        out[f"mean_{arm}"] = float(ret.mean())
        out[f"loss_{arm}"] = float(np.mean(losses[-50:]))
        out[f"curve_{arm}"] = ret.mean(0).tolist()
    first = len(np.array_split(np.arange(p.histories), len(p.sources))[0])
    out["lhf_mass_first_source"] = float(w[:first].sum() / w.sum())
    return out


PAIRS["lhf"] = [("last5_lhf", "last5_ad"), ("mean_lhf", "mean_ad")]
