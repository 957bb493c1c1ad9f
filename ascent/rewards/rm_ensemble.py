"""A conservative ensemble of reward models: `reward='rm_ensemble(paths=[rms/a,rms/b,rms/c],aggregate=uwo)'`.

Reward-model ensembles against over-optimisation (Coste, Anwar, Kirk & Krueger 2024, "Reward Model Ensembles Help
Mitigate Overoptimization", ICLR 2024, arXiv:2310.02743; Eisenstein et al. 2023, arXiv:2312.09244). K reward
models trained by `ascent train-rm` (different seeds, pair draws or label flips) score each completion; their
errors are partly independent, so a completion the policy pushes into one model's blind spot is caught by the
others. For a completion y of prompt x with member scores r_1..r_K:

    z_k     = (r_k - μ_k) / σ_k             each member standardised (μ_k, σ_k: its scores on the first batch
                                            it scores, i.e. the starting policy's samples; frozen from then on)
    mean    R = (1/K) Σ_k z_k
    median  R = median_k z_k                (Eisenstein et al.; the lower middle one for even K)
    min     R = min_k z_k                   worst-case optimisation (WCO)
    uwo     R = (1/K) Σ_k z_k  -  λ · (1/K) Σ_k (z_k - z̄)²     uncertainty-weighted optimisation (UWO)

Coste et al. normalise each member before combining so that no member dominates the minimum or the variance
by its scale alone; the choice made here is to take each member's mean and standard deviation over the first
batch it scores and freeze them (a checkpoint keeps them, so a resumed run scores exactly as before), which
makes R a fixed function of (x, y) for the whole run — needed to read the proxy against the true reward on an
over-optimisation curve. The evaluator's copy shares these statistics with the training copy (whichever scores
first fixes them; `RewardRunner.share_frozen`), so held-out proxy rewards use the same function, also after a
resume. `normalize=false` combines the raw scores instead.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

import torch

from ascent import papers
from ascent.rewards.builtin import REWARDS
from ascent.rewards.reward_model import load_reward_model, read_meta, score
from ascent.typed import ConfigError, build

AGGREGATES = ("mean", "median", "min", "uwo")


@dataclass(frozen=True)
class RMEnsembleParams:
    """The `rm_ensemble` reward's knobs."""

    paths: list[str] = field(default_factory=list)
    """Reward-model folders written by `ascent train-rm` (at least two)."""
    aggregate: str = "uwo"
    """How member scores combine: `mean`, `median`, `min` (worst case, WCO) or `uwo` (mean - uwo_coef * variance)."""
    uwo_coef: float = 1.0
    """λ of UWO: the weight of the members' disagreement (variance of their standardised scores)."""
    normalize: bool = True
    """Standardise each member by its mean and std over the first batch it scores (frozen afterwards)."""
    micro_batch_size: Optional[int] = None
    """Sequences scored at once per member; None: the one each folder records."""
    device: Optional[str] = None
    """Device of the members; None: the learner's."""

    def __post_init__(self) -> None:
        if len(self.paths) < 2:
            raise ValueError(f"an ensemble needs at least two reward models in paths, got {list(self.paths)!r}")
        if self.aggregate not in AGGREGATES:
            raise ValueError(f"aggregate must be one of {', '.join(AGGREGATES)}, got {self.aggregate!r}")
        if self.uwo_coef < 0:
            raise ValueError(f"uwo_coef must be >= 0, got {self.uwo_coef}")
        if self.micro_batch_size is not None and self.micro_batch_size < 1:
            raise ValueError(f"micro_batch_size must be >= 1, got {self.micro_batch_size}")


def combine(scores: torch.Tensor, aggregate: str, uwo_coef: float = 1.0) -> torch.Tensor:
    """(N,) ensemble rewards of (K, N) member scores (already standardised when they should be).

    >>> s = torch.tensor([[1.0, 0.0], [3.0, 0.0]])
    >>> combine(s, "mean").tolist(), combine(s, "min").tolist(), combine(s, "uwo", 0.5).tolist()
    ([2.0, 0.0], [1.0, 0.0], [1.5, 0.0])
    >>> combine(torch.tensor([[1.0], [5.0], [2.0]]), "median").tolist()
    [2.0]
    """
    mean = scores.mean(0)
    if aggregate == "mean":
        return mean
    if aggregate == "median":
        return scores.median(0).values
    if aggregate == "min":
        return scores.min(0).values
    return mean - uwo_coef * scores.var(0, unbiased=False)


@REWARDS.register(
    "rm_ensemble",
    params=RMEnsembleParams,
    paper=(papers.RM_ENSEMBLES, papers.RM_ENSEMBLES_LIMITS),
    fidelity="faithful",
    departures=(
        (
            "member scores are standardised with statistics frozen on the first batch each member scores (ascent's "
            "choice of common scale)"
        ),
    ),
)
class RMEnsemble:
    """R(x, y) = mean, min or mean - λ·variance of K reward models' standardised scores (Coste et al. 2024,
    arXiv:2310.02743). See the module docstring."""

    def __init__(self, **params: Any) -> None:
        self.params = p = build(RMEnsembleParams, params, "rm_ensemble")
        self.members, self.metas = [], []
        for path in p.paths:
            if read_meta_kind(path) == "process":
                raise ConfigError(f"rm_ensemble: {path!r} is a process reward model; give outcome reward models")
            rm, tokenizer, meta = load_reward_model(path, p.device or "cpu")
            self.members.append((rm, tokenizer))
            self.metas.append(meta)
        self.stats: Optional[list[tuple[float, float]]] = None  # (μ_k, σ_k), fixed by the first batch
        self._metrics: dict[str, float] = {}
        self.__name__ = "rm_ensemble"

    def place(self, device: str) -> None:
        """Move the members to the learner's device, unless the spec fixed one."""
        if self.params.device is None:
            for rm, _ in self.members:
                rm.to(device)

    def metrics(self) -> dict[str, float]:
        """rm_ensemble/ metrics of the last call: the members' disagreement and each member's mean score."""
        return dict(self._metrics)

    def summary_fields(self) -> dict[str, Any]:
        """The members' held-out pair accuracies (`rm_pair_accuracy`: their mean; `rm_pair_accuracies`: each)."""
        accs = [m.get("pair_accuracy") for m in self.metas]
        known = [a for a in accs if a is not None]
        return {"rm_pair_accuracy": sum(known) / len(known) if known else None, "rm_pair_accuracies": accs}

    def state_dict(self) -> dict[str, Any]:
        """The frozen standardisation: a resumed run scores with the same μ_k, σ_k."""
        return {"stats": [list(s) for s in self.stats] if self.stats is not None else None}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        stats = state.get("stats")
        self.stats = [(float(m), float(s)) for m, s in stats] if stats is not None else None

    def adopt(self, other: Any) -> None:
        """Take `other`'s frozen standardisation when this copy has none yet (`RewardRunner.share_frozen`): the
        evaluator's copy then scores with the training copy's μ_k, σ_k, also after a resume."""
        if self.stats is None and getattr(other, "stats", None) is not None:
            self.stats = list(other.stats)

    def __call__(self, prompts: list[str], completions: list[str], **_: Any) -> list[float]:
        if not prompts:
            return []
        p = self.params
        raw = torch.tensor(
            [
                score(
                    rm,
                    tok,
                    prompts,
                    completions,
                    p.micro_batch_size or int(meta.get("micro_batch_size") or 64),
                    int(meta.get("max_length") or 1024),
                )
                for (rm, tok), meta in zip(self.members, self.metas)
            ],
            dtype=torch.float64,
        )  # (K, N)
        if p.normalize and self.stats is None:
            self.stats = [(float(r.mean()), max(float(r.std(unbiased=False)), 1e-6)) for r in raw]
        z = raw
        if p.normalize:
            mu = torch.tensor([m for m, _ in self.stats], dtype=torch.float64)[:, None]
            sd = torch.tensor([s for _, s in self.stats], dtype=torch.float64)[:, None]
            z = (raw - mu) / sd
        self._metrics = {
            "rm_ensemble/disagreement": float(z.std(0, unbiased=False).mean()),
            **{f"rm_ensemble/member{k}_mean": float(raw[k].mean()) for k in range(len(self.members))},
        }
        return combine(z, p.aggregate, p.uwo_coef).tolist()


def read_meta_kind(path: str) -> Optional[str]:
    """The `kind` recorded in a reward-model folder (None for an outcome model); ConfigError for a bad folder."""
    return read_meta(Path(path)).get("kind")
