"""ReLaX: the Dynamic Spectral Dispersion of the policy's hidden-state dynamics as an advantage modifier.

ReLaX (Reasoning with Latent eXploration; Zhang, Chen, Shen, Ye & Wu, 2025, arXiv:2512.07558) linearises the
hidden-state dynamics of a completion with a Koopman operator, x_{t+1} ~ K x_t, and measures how heterogeneous
those dynamics are by the Dynamic Spectral Dispersion DSD(x) = Var(|lambda|), the variance of the moduli of K's
eigenvalues (K Phi = Phi Lambda). A high DSD marks a completion whose latent computation mixes many time scales
(exploratory), a low one a rigid, collapsed computation. The paper uses DSD to regulate exploration against
exploitation in the policy update.

Here (`relax`): K is the exact-DMD estimate (Schmid 2010; Tu et al. 2014, arXiv:1312.0041) on the identity
dictionary (the policy's last-layer hidden states, truncated to the top `rank` singular directions; the paper
learns a dictionary with a small network, ResKoopNet), and DSD enters the advantage as a bounded, group-relative
bonus in the form of the entropy-based advantage shaping of Cheng et al. 2025 (arXiv:2506.14758), so it can never
flip an advantage's sign nor create signal in a zero-advantage group. The way DSD enters the update is a reading
(the abstract says only that latent dynamics "regulate exploration and exploitation"); see `relax`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from ascent import papers
from ascent.algorithms.advantages import ADVANTAGES, broadcast, group_moments
from ascent.algorithms.state import PieceState
from ascent.algorithms.types import AdvantageInput

DSD_KEY = "dsd"
"""AdvantageInput.extras key of the (N,) DSD of each completion (filled by `DsdState`)."""


def dmd_eigenvalues(states: torch.Tensor, rank: int, tol: float = 1e-6) -> torch.Tensor:
    """(r,) complex eigenvalues of the exact-DMD operator fitted to a state sequence `states` (T, d).

    X = [x_0 .. x_{T-2}], Y = [x_1 .. x_{T-1}] (d, T-1); X = U S V^T truncated to the r = min(rank, #(S > tol S_0))
    leading singular directions; K~ = U^T Y V S^{-1} (r, r), whose eigenvalues are those of the linear map taking
    each state to the next, restricted to the span of the states. Fewer than two states: no eigenvalue.
    """
    if states.shape[0] < 2:
        return torch.zeros(0, dtype=torch.complex128)
    x = states.to(torch.float64)
    past, future = x[:-1].T, x[1:].T  # (d, T-1) each
    u, s, vh = torch.linalg.svd(past, full_matrices=False)
    r = min(rank, int((s > tol * s[0]).sum())) if s.numel() and s[0] > 0 else 0
    if r == 0:
        return torch.zeros(0, dtype=torch.complex128)
    k = u[:, :r].T @ future @ vh[:r].T / s[:r]  # (r, r): U^T Y V diag(1/S)
    return torch.linalg.eigvals(k)


def dynamic_spectral_dispersion(states: torch.Tensor, rank: int = 8) -> float:
    """DSD = Var(|lambda|), the population variance of the DMD eigenvalue moduli of `states` (T, d); 0 with
    fewer than two eigenvalues.

    >>> a = torch.diag(torch.tensor([0.9, 0.5, 0.2], dtype=torch.float64))
    >>> xs = [torch.ones(3, dtype=torch.float64)]
    >>> for _ in range(6): xs.append(a @ xs[-1])
    >>> round(dynamic_spectral_dispersion(torch.stack(xs)), 6)  # Var([0.9, 0.5, 0.2])
    0.082222
    """
    moduli = dmd_eigenvalues(states, rank).abs()
    return float(moduli.var(unbiased=False)) if moduli.numel() >= 2 else 0.0


@dataclass(frozen=True)
class RelaxParams:
    """ReLaX: DSD as a bounded group-relative advantage bonus."""

    beta: float = 0.2
    """Scale of the bonus beta * z_g(DSD); 0: plain GRPO."""
    kappa: float = 2.0
    """The bonus is clipped to [-|A|/kappa, |A|/kappa] (Cheng et al. 2025's bound), so it never flips A; > 0."""
    rank: int = 8
    """Truncation rank r of the DMD fit (the number of eigenvalues at most); >= 2."""
    layer: int = -1
    """Which hidden-state layer (index into the model's hidden_states; -1: the last)."""

    def __post_init__(self) -> None:
        if self.beta < 0:
            raise ValueError(f"beta must be >= 0, got {self.beta}")
        if self.kappa <= 0:
            raise ValueError(f"kappa must be > 0, got {self.kappa}")
        if self.rank < 2:
            raise ValueError(f"rank must be >= 2 (a variance needs two eigenvalues), got {self.rank}")


def completion_states(hidden: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """(L + 1, d) the hidden states of one sequence that choose its completion tokens, plus the state after the
    last: positions first − 1 .. last of the completion span (`mask` (T,) 1 on completion tokens); (0, d) if none.

    >>> completion_states(torch.arange(6.0)[:, None], torch.tensor([0, 0, 1, 1, 0, 0])).squeeze(-1).tolist()
    [1.0, 2.0, 3.0]
    """
    pos = (mask > 0).nonzero().squeeze(-1)
    if pos.numel() == 0:
        return hidden[:0]
    return hidden[max(int(pos[0]) - 1, 0) : int(pos[-1]) + 1]


class DsdState(PieceState):
    """Computes each completion's DSD from the current policy's hidden states (no grad) for `relax`; logs its
    batch mean as `relax/dsd_mean`."""

    @torch.no_grad()
    def advantage_extras(self, batch: Any) -> dict[str, torch.Tensor]:
        model, m = self.services.policy_model, self.services.micro_batch_size
        was_training = model.training
        model.eval()
        dev = next(model.parameters()).device
        out = torch.zeros(len(batch))
        for start in range(0, len(batch), m):
            ids = batch.input_ids[start : start + m].to(dev)
            att = batch.attention_mask[start : start + m].to(dev)
            hidden = model(input_ids=ids, attention_mask=att, output_hidden_states=True, use_cache=False)
            states = hidden.hidden_states[self.params.layer].float().cpu()  # (n, T, d)
            for j in range(states.shape[0]):
                seq = completion_states(states[j], batch.completion_mask[start + j])
                out[start + j] = dynamic_spectral_dispersion(seq, self.params.rank)
        model.train(was_training)
        valid = batch.completion_mask.sum(-1) > 0
        self.mean = float(out[valid].mean()) if bool(valid.any()) else 0.0
        return {DSD_KEY: out}

    def after_optimizer_step(self, batch: Any, rows: torch.Tensor, mask: torch.Tensor) -> dict[str, float]:
        """Logs `relax/dsd_mean`: the mean DSD of the batch's completions (before the update)."""
        return {"relax/dsd_mean": getattr(self, "mean", 0.0)}


@ADVANTAGES.register(
    "relax",
    params=RelaxParams,
    state=DsdState,
    paper=papers.RELAX,
    fidelity="reduced",
    departures=(
        "exact DMD with an identity dictionary instead of the paper's learned Koopman dictionary (ResKoopNet)",
        (
            "DSD enters as a group z-scored, clipped advantage bonus (the form of Cheng et al. 2025): ascent's "
            "reading of how it regulates exploration"
        ),
    ),
)
def relax(inp: AdvantageInput, cfg, params: RelaxParams = RelaxParams()) -> torch.Tensor:
    """ReLaX (Zhang et al. 2025, arXiv:2512.07558): GRPO plus a bounded bonus for latent-dynamics dispersion.

    A_i = A_i^GRPO + clip(beta * z_i, -|A_i^GRPO| / kappa, |A_i^GRPO| / kappa),
    z_i = (D_i - mean_g D) / (std_g D + eps), D_i = DSD(h_i) = Var(|eig(K_i)|) of completion i's hidden states
    (`dynamic_spectral_dispersion`: exact DMD on the last layer, rank `rank`; `DsdState` computes it with the
    current policy before the update). Among a group's samples with the same sign of advantage, the one whose latent
    dynamics are more heterogeneous gets a larger push up (if right) or a smaller push down (if wrong): exploration
    is rewarded inside the exploitation signal, never instead of it. Readings (not in the abstract): the identity
    Koopman dictionary (the paper learns one), the group z-score, and the Cheng et al. 2025 clip as the
    "regulation"; a flat group (no signal) stays at zero advantage.
    """
    _, mean, std = group_moments(inp.rewards, inp.group_index, inp.valid)
    base = torch.where(inp.valid, (inp.rewards - mean) / (std + cfg.std_eps), torch.zeros_like(mean))  # (N,)
    dsd = inp.extras.get(DSD_KEY)
    if dsd is None:
        raise ValueError(f"advantage 'relax' needs inp.extras[{DSD_KEY!r}] (its DsdState fills it)")
    dsd = dsd.to(base.dtype)
    _, d_mean, d_std = group_moments(dsd, inp.group_index, inp.valid)
    z = torch.where(d_std > 0, (dsd - d_mean) / (d_std + cfg.std_eps), torch.zeros_like(dsd))
    bound = base.abs() / params.kappa
    bonus = torch.maximum(torch.minimum(params.beta * z, bound), -bound)
    return broadcast(base + bonus, inp)
