"""Policy losses. ONE signature: `fn(inp: LossInput, cfg: AlgorithmConfig[, params]) -> (loss, metrics)`;
a loss with parameters of its own declares their dataclass at registration and receives them as `params=`.

Each loss builds a (N, T) loss matrix and reduces it with `aggregate` (the only reduction), then adds the
optional KL penalty to the reference policy. Metrics use the `loss/` namespace.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Optional

import torch

from ascent import papers
from ascent.algorithms.a_star import AStarParams, AStarState
from ascent.algorithms.aggregate import aggregate, masked_mean
from ascent.algorithms.distil import DistilParams, DistilState
from ascent.algorithms.kl import kl_penalty
from ascent.algorithms.opd import (
    EdgeParams,
    EdgeState,
    OpdParams,
    failed_rows,
    reverse_kl_full,
    reverse_kl_sampled,
)
from ascent.algorithms.types import LossInput
from ascent.registry import Registry

LOSSES: Registry = Registry("policy loss")


def _reduce(loss_mat: torch.Tensor, inp: LossInput, cfg) -> torch.Tensor:
    return aggregate(loss_mat, inp.mask, cfg.loss_agg, inp.num_tokens, inp.num_seqs, inp.norm_length)


def tis_weight(inp: LossInput, cfg) -> torch.Tensor:
    """Truncated importance sampling (Yao et al. 2025, "Your efficient RL framework secretly brings you
    off-policy RL training"; the correction of PSN-RLVR, Bai et al., 2026, arXiv:2602.02555, and RAPID,
    Huang et al., 2025, arXiv:2510.03515): w_t = min(pi_old(t) / pi_sampler(t), C) with C = algorithm.tis_cap,
    correcting for the gap between the learner's and the rollout engine's log-probs. 1 when off."""
    if cfg.tis_cap is None or inp.sampled_logprobs is None:
        return torch.ones_like(inp.old_logprobs)
    gap = (inp.old_logprobs - inp.sampled_logprobs) * inp.mask  # (N, T)
    return torch.exp(gap.clamp(max=20.0)).clamp(max=cfg.tis_cap).detach()


def with_kl(
    loss: torch.Tensor, inp: LossInput, cfg, metrics: dict[str, float]
) -> tuple[torch.Tensor, dict[str, float]]:
    """Add kl_coef * aggregated KL(pi || pi_ref) when a reference is present."""
    if cfg.kl_coef > 0 and inp.ref_logprobs is not None:
        kl = kl_penalty(inp.logprobs, inp.ref_logprobs, cfg.kl_estimator)  # (N, T)
        kl_term = _reduce(kl, inp, cfg)
        metrics["loss/kl"] = float(masked_mean(kl.detach(), inp.mask))
        loss = loss + cfg.kl_coef * kl_term
    return loss, metrics


@LOSSES.register(
    "ppo_clip",
    paper=(papers.PPO, papers.DAPO),
    fidelity="faithful",
    departures=(
        (
            "critic-free by default: the advantage comes from the run's estimator (`gae` brings PPO's critic); the "
            "value and entropy terms are not in this loss (`entropy_bonus` adds the latter)"
        ),
    ),
)
def ppo_clip(inp: LossInput, cfg) -> tuple[torch.Tensor, dict[str, float]]:
    """PPO clipped surrogate (Schulman et al. 2017) with DAPO's decoupled clip and optional dual clip.

    rho = exp(log pi - log pi_old);  l = max(-A rho, -A clip(rho, 1 - eps_low, 1 + eps_high)).
    Dual clip (Ye et al. 2020), for A < 0: l = min(l, -A c).
    """
    log_ratio = (inp.logprobs - inp.old_logprobs).clamp(-20.0, 20.0)  # (N, T)
    ratio = torch.exp(log_ratio)
    adv = inp.advantages
    unclipped = -adv * ratio
    clipped = -adv * ratio.clamp(1.0 - cfg.clip_low, 1.0 + cfg.clip_high)
    loss_mat = torch.maximum(unclipped, clipped)  # (N, T)
    if cfg.dual_clip is not None:
        loss_mat = torch.where(adv < 0, torch.minimum(loss_mat, -adv * cfg.dual_clip), loss_mat)
    loss = _reduce(loss_mat * tis_weight(inp, cfg), inp, cfg)
    with torch.no_grad():
        metrics = {
            "loss/policy": float(loss),
            "loss/clip_frac": float(masked_mean((clipped > unclipped).float(), inp.mask)),
            "loss/ratio_mean": float(masked_mean(ratio, inp.mask)),
            "loss/approx_kl_old": float(masked_mean(0.5 * log_ratio.pow(2), inp.mask)),
        }
    return with_kl(loss, inp, cfg, metrics)


@LOSSES.register("pg", paper=papers.REINFORCE, fidelity="faithful")
def policy_gradient(inp: LossInput, cfg) -> tuple[torch.Tensor, dict[str, float]]:
    """Plain policy gradient (REINFORCE, Williams 1992): l = -A log pi(token); no ratio, no clipping."""
    loss = _reduce(-inp.advantages * inp.logprobs, inp, cfg)
    return with_kl(loss, inp, cfg, {"loss/policy": float(loss.detach())})


def sequence_log_ratio(inp: LossInput) -> torch.Tensor:
    """(N,) mean over each sequence's tokens of log pi - log pi_old (GSPO's length-normalised log ratio)."""
    diff = (inp.logprobs - inp.old_logprobs) * inp.mask  # (N, T)
    return diff.sum(-1) / inp.mask.sum(-1).clamp(min=1.0)


@LOSSES.register(
    "gspo",
    paper=papers.GSPO,
    fidelity="faithful",
    departures=(
        (
            "the paper's sequence-mean objective needs `algorithm.loss_agg=seq-mean-token-mean`; the default "
            "token-mean weights sequences by length"
        ),
    ),
)
def gspo(inp: LossInput, cfg) -> tuple[torch.Tensor, dict[str, float]]:
    """GSPO: sequence-level ratio s_i = exp(mean_t log pi/pi_old) clipped per sequence (Zheng et al. 2025).

    Token form (GSPO-token): s_it = sg(s_i) * pi_t / sg(pi_t), equal to s_i in value, so every token of a
    sequence shares the sequence's clip decision; l_it = max(-A s_it, -A clip(s_it, 1 - eps_low, 1 + eps_high)).
    With loss_agg=seq-mean-token-mean this is exactly the paper's objective (the gradient of s_i is
    s_i / |y_i| sum_t grad log pi_t). The paper uses much smaller clip ranges than PPO (e.g. 3e-4 / 4e-4).
    """
    seq = sequence_log_ratio(inp).clamp(-20.0, 20.0)  # (N,)
    ratio = torch.exp(seq.detach())[:, None] * torch.exp(inp.logprobs - inp.logprobs.detach())  # (N, T)
    adv = inp.advantages
    unclipped = -adv * ratio
    clipped = -adv * ratio.clamp(1.0 - cfg.clip_low, 1.0 + cfg.clip_high)
    loss = _reduce(torch.maximum(unclipped, clipped) * tis_weight(inp, cfg), inp, cfg)
    with torch.no_grad():
        metrics = {
            "loss/policy": float(loss),
            "loss/clip_frac": float(masked_mean((clipped > unclipped).float(), inp.mask)),
            "loss/seq_ratio_mean": float(torch.exp(seq).mean()),
        }
    return with_kl(loss, inp, cfg, metrics)


@LOSSES.register(
    "cispo",
    paper=papers.CISPO,
    fidelity="faithful",
    departures=(
        (
            "the default clip_low = 0.2 also clips the weight below; MiniMax-M1 clips only above (set clip_low large, "
            "e.g. 1.0)"
        ),
    ),
)
def cispo(inp: LossInput, cfg) -> tuple[torch.Tensor, dict[str, float]]:
    """CISPO: l_it = -sg(clip(rho_it, 1 - eps_low, 1 + eps_high)) * A_it * log pi_it (MiniMax-M1, 2025).

    The importance weight is clipped and DETACHED, then multiplies the log-prob (REINFORCE form), so no
    token's gradient is ever zeroed by clipping - unlike PPO, where a clipped token contributes nothing.
    (The other reading, clipped ratio times advantage without the log-prob, has zero gradient; it is not
    what the paper means.) MiniMax-M1 effectively clips only above: set clip_low large (e.g. 1.0) for that.
    """
    log_ratio = (inp.logprobs - inp.old_logprobs).clamp(-20.0, 20.0).detach()
    weight = torch.exp(log_ratio).clamp(1.0 - cfg.clip_low, 1.0 + cfg.clip_high)  # (N, T), no grad
    loss = _reduce(-weight * inp.advantages * inp.logprobs * tis_weight(inp, cfg), inp, cfg)
    with torch.no_grad():
        raw = torch.exp(log_ratio)
        metrics = {"loss/policy": float(loss), "loss/clip_frac": float(masked_mean((raw != weight).float(), inp.mask))}
    return with_kl(loss, inp, cfg, metrics)


for _loss in (ppo_clip, policy_gradient, gspo, cispo):
    _loss.zero_advantage_free = True
    """A row whose advantages are all 0 adds nothing to this loss or its gradient (each token's term is the
    advantage times something finite), so the learner may skip its forward and backward (`train.skip_zero_
    advantage`) when no KL penalty is added. The normalisers (num_tokens, num_seqs) still count it."""


# ---------------------------------------------------------------------------------------------------------
# Sequence-level regressions and distillation. A loss says what the learner must give it beyond the
# default fields with a `requires` attribute: "rewards", "groups" (whole groups per micro-batch, plus
# `group_index`), "ref" (a frozen reference), "v_star", "full_logits", "teacher".
# ---------------------------------------------------------------------------------------------------------


def requires(*needs: str):
    """Decorator: declare the inputs a loss needs beyond the default LossInput fields (`fn.requires`)."""

    def deco(fn):
        fn.requires = frozenset(needs)
        return fn

    return deco


def _need(inp: LossInput, loss: str, *fields: str) -> None:
    missing = [f for f in fields if getattr(inp, f) is None]
    if missing:
        raise ValueError(
            f"loss {loss!r} needs LossInput.{', '.join(missing)}; the learner fills them from the loss's `requires`"
        )


def sequence_mean(per_seq: torch.Tensor, inp: LossInput) -> torch.Tensor:
    """Sum of per-sequence losses (N,) over the mini-batch's sequence count, through the one reduction
    (`aggregate` in seq-mean-token-sum mode with each sequence's value on a single position)."""
    one = torch.zeros_like(inp.mask)
    one[:, 0] = 1.0
    return aggregate(per_seq[:, None] * one, one, "seq-mean-token-sum", num_seqs=inp.num_seqs)


def sequence_tis_gap(inp: LossInput) -> torch.Tensor:
    """(N,) sum over a sequence's tokens of log pi_old - log pi_sampler (0 without sampling-time log-probs)."""
    if inp.sampled_logprobs is None:
        return torch.zeros(inp.mask.shape[0], dtype=inp.old_logprobs.dtype, device=inp.mask.device)
    return ((inp.old_logprobs - inp.sampled_logprobs) * inp.mask).sum(-1).detach()


def truncated_weight(gap: torch.Tensor, cfg) -> torch.Tensor:
    """Sequence-level truncated importance weight min(exp(gap), tis_cap); 1 when tis_cap is None."""
    if cfg.tis_cap is None:
        return torch.ones_like(gap)
    return torch.exp(gap.clamp(max=20.0)).clamp(max=cfg.tis_cap)


def group_mean(x: torch.Tensor, group_index: torch.Tensor, ok: torch.Tensor) -> torch.Tensor:
    """(N,) mean of `x` over the rows of each row's group where `ok` (0 for groups without such rows)."""
    _, g = torch.unique(group_index, return_inverse=True)
    w = ok.to(x.dtype)
    total = torch.zeros(int(g.max()) + 1 if g.numel() else 0, dtype=x.dtype, device=x.device).index_add(
        0, g, torch.where(ok, x, torch.zeros_like(x))
    )
    count = torch.zeros_like(total).index_add(0, g, w)
    return (total / count.clamp(min=1.0))[g]


def group_pairs(group_index: torch.Tensor, ok: torch.Tensor, mode: str) -> tuple[torch.Tensor, torch.Tensor]:
    """Index pairs (i, j), i before j, of usable rows of the same group: every pair ("all") or disjoint
    neighbours ("adjacent": 1st with 2nd, 3rd with 4th, ...; an odd one out is left unpaired).

    >>> g = torch.tensor([0, 0, 0, 1, 1]); ok = torch.tensor([True, True, True, True, False])
    >>> [t.tolist() for t in group_pairs(g, ok, "all")], [t.tolist() for t in group_pairs(g, ok, "adjacent")]
    ([[0, 0, 1], [1, 2, 2]], [[0], [1]])
    """
    if mode not in ("all", "adjacent"):
        raise ValueError(f"unknown pairing {mode!r}; valid: all, adjacent")
    first, second = [], []
    for g in torch.unique(group_index[ok]).tolist():
        rows = ((group_index == g) & ok).nonzero().squeeze(-1)
        if mode == "all":
            pairs = torch.combinations(rows, 2)  # (P_g, 2)
            a, b = pairs[:, 0], pairs[:, 1]
        else:
            m = len(rows) // 2 * 2
            a, b = rows[0:m:2], rows[1:m:2]
        first.append(a)
        second.append(b)
    empty = torch.zeros(0, dtype=torch.long, device=group_index.device)
    return (torch.cat(first) if first else empty), (torch.cat(second) if second else empty)


def usable(inp: LossInput) -> torch.Tensor:
    """(N,) bool: the row has tokens in the loss (its reward is valid)."""
    return inp.mask.sum(-1) > 0


def sequence_log_ratio_sum(logprobs: torch.Tensor, other: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """(N,) sum over each sequence's tokens of logprobs - other: the sequence log ratio log pi/pi_other(y)."""
    return ((logprobs - other) * mask).sum(-1)


@dataclass(frozen=True)
class RebelParams:
    """REBEL's regression."""

    eta: float = 1.0
    """The regression predicts r(y) - r(y') by (1/eta) [log pi/pi_old(y) - log pi/pi_old(y')]."""
    pairs: Literal["all", "adjacent"] = "all"
    """Pairs within each group: every pair, or disjoint neighbours (0,1), (2,3), ... (the paper's two samples)."""

    def __post_init__(self) -> None:
        if self.eta <= 0:
            raise ValueError(f"eta must be > 0, got {self.eta}")


@LOSSES.register(
    "rebel",
    params=RebelParams,
    paper=papers.REBEL,
    fidelity="faithful",
    departures=(
        "the default pairs every two samples of a group (`pairs=all`); `pairs=adjacent` is the paper's two-sample form",
    ),
)
@requires("rewards", "groups")
def rebel(inp: LossInput, cfg, params: RebelParams = RebelParams()) -> tuple[torch.Tensor, dict[str, float]]:
    """REBEL (Gao et al., 2024, arXiv:2404.16767): regress reward differences with policy log-ratio differences.

    For pairs (y, y') of one prompt, l = ((1/eta) [log pi/pi_old(y) - log pi/pi_old(y')] - (r(y) - r(y')))^2,
    log-ratios summed over each sequence's tokens. Pairing (`pairs`): "all" uses every pair of the
    group (G(G-1)/2 regressions from G samples), "adjacent" the disjoint pairs (1st, 2nd), (3rd, 4th), ...
    i.e. the paper's two-samples-per-prompt form. Each sequence's loss is the mean of its pairs' losses;
    the mean over the mini-batch's sequences equals the mean over pairs when groups are full. Sequence-level,
    so `loss_agg` does not apply. At pi = pi_old the gradient is -(2/eta) sum_pairs (r - r')(grad log pi(y) -
    grad log pi(y')): a pairwise policy gradient (RLOO-like for "all"). With tis_cap each pair is weighted by
    min(pi_old(y) pi_old(y') / (pi_sampler(y) pi_sampler(y')), tis_cap) (sequence-level truncated IS).
    """
    _need(inp, "rebel", "rewards", "group_index")
    ok = usable(inp)
    seq = sequence_log_ratio_sum(inp.logprobs, inp.old_logprobs, inp.mask)  # (N,)
    i, j = group_pairs(inp.group_index, ok, params.pairs)
    pred = (seq[i] - seq[j]) / params.eta  # (P,)
    target = inp.rewards[i] - inp.rewards[j]
    gap = sequence_tis_gap(inp)
    sq = truncated_weight(gap[i] + gap[j], cfg) * (pred - target).pow(2)  # (P,)
    n = inp.mask.shape[0]
    zeros = torch.zeros(n, dtype=sq.dtype, device=sq.device)
    count = zeros.index_add(0, i, torch.ones_like(sq)).index_add(0, j, torch.ones_like(sq))  # pairs per sequence
    per_seq = zeros.index_add(0, i, sq).index_add(0, j, sq) / count.clamp(min=1.0)
    loss = sequence_mean(per_seq, inp)
    with torch.no_grad():
        metrics = {"loss/policy": float(loss), "loss/rebel_pred_abs": float(pred.abs().mean()) if len(i) else 0.0}
    return with_kl(loss, inp, cfg, metrics)


@dataclass(frozen=True)
class AgroParams:
    """AGRO's consistency loss."""

    beta: float = 0.1
    """Beta of the consistency r(y) - beta log pi/pi_ref(y) = const of the KL-regularised optimum."""
    score_coef: float = 0.0
    """Weight of the on-policy likelihood-ratio part of the consistency loss's gradient (0: pathwise part only)."""

    def __post_init__(self) -> None:
        if self.beta <= 0 or self.score_coef < 0:
            raise ValueError(f"beta must be > 0 and score_coef >= 0, got {self.beta}, {self.score_coef}")


@LOSSES.register(
    "agro",
    params=AgroParams,
    paper=papers.AGRO,
    fidelity="faithful",
    departures=(
        (
            "the gradient is the pathwise gradient of the squared consistency loss (ascent's reading); the "
            "likelihood-ratio term is optional (`score_coef`, 0)"
        ),
    ),
)
@requires("rewards", "groups", "ref")
def agro(inp: LossInput, cfg, params: AgroParams = AgroParams()) -> tuple[torch.Tensor, dict[str, float]]:
    """AGRO (Tang et al., 2025, arXiv:2503.19612): generation consistency of the KL-regularised optimum.

    pi* = pi_ref exp(r / beta) / Z satisfies c(y) = r(y) - beta log pi*/pi_ref(y) = beta log Z for EVERY
    generation y. The loss is the spread of the regularised reward c around its group mean b (the
    sample estimate of the constant, computed without grad):
        l_i = (c_i - b_g)^2 / (2 beta),  c_i = r_i - beta sum_t log pi/pi_ref(y_i,t).
    Its gradient,
        -(c_i - b_g) grad log pi(y_i) = -(r_i - b_g) grad log pi(y_i) + (beta / 2) grad (log pi/pi_ref(y_i))^2,
    is a policy-gradient term plus a squared log-ratio term; it vanishes at pi* whatever distribution the
    samples came from, which is what lets AGRO learn from on- and off-policy data alike. (Reading chosen:
    the paper's pathwise gradient. With samples drawn from pi itself, the consistency objective's gradient
    has a second, likelihood-ratio part sg(l_i - mean_g l) grad log pi(y_i); `score_coef` adds it with
    that weight, default 0.) A group with one usable sample carries no signal. Sequence-level, so
    `loss_agg` does not apply; no truncated IS (the objective does not assume on-policy samples).
    """
    _need(inp, "agro", "rewards", "group_index", "ref_logprobs")
    ok = usable(inp)
    beta = params.beta
    log_ratio = sequence_log_ratio_sum(inp.logprobs, inp.ref_logprobs, inp.mask)  # (N,)
    c = inp.rewards - beta * log_ratio  # (N,) regularised reward
    dev = c - group_mean(c.detach(), inp.group_index, ok)
    per_seq = dev.pow(2) / (2.0 * beta)
    if params.score_coef:
        f = per_seq.detach()
        per_seq = per_seq + params.score_coef * (f - group_mean(f, inp.group_index, ok)) * (
            inp.logprobs * inp.mask
        ).sum(-1)
    loss = sequence_mean(torch.where(ok, per_seq, torch.zeros_like(per_seq)), inp)
    with torch.no_grad():
        metrics = {
            "loss/policy": float(loss),
            "loss/agro_consistency": float((dev.pow(2) * ok).sum() / ok.sum().clamp(min=1)),
            "loss/seq_log_ratio_ref": float((log_ratio * ok).sum() / ok.sum().clamp(min=1)),
        }
    return with_kl(loss, inp, cfg, metrics)


@LOSSES.register(
    "a_star_po",
    params=AStarParams,
    state=AStarState,
    paper=papers.A_STAR_PO,
    fidelity="faithful",
    departures=("beta2 defaults to beta = 0.5, where the authors' scripts use 1e-3",),
)
@requires("rewards", "ref", "v_star")
def a_star_po(inp: LossInput, cfg, params: AStarParams = AStarParams()) -> tuple[torch.Tensor, dict[str, float]]:
    """A*-PO (Brantley et al., 2025, arXiv:2505.20686): regress the optimal advantage r(x, y) - V*(x).

    l = (beta2 sum_t log pi/pi_ref(y_t) - (r(x, y) - V*(x)))^2 per sequence, mean over sequences; V* comes
    from stage 1 (`ascent.algorithms.a_star.AStarState`: V*(x) = beta log mean_j exp(r_j / beta) over k samples of
    the reference policy). beta2, or beta when None: with one beta the loss is exactly
    zero at pi* = pi_ref exp(r / beta) / Z (given the exact V*); the authors' scripts decouple them (0.5 for
    V*, 1e-3 for the regression). The paper samples ONE completion per prompt (rollout.samples_per_prompt=1);
    more also works, each regressed on its own. Rows whose V* is unknown (all reference samples failed) are
    left out. With tis_cap each sequence is weighted by min(pi_old(y) / pi_sampler(y), tis_cap).
    """
    _need(inp, "a_star_po", "rewards", "ref_logprobs", "v_star")
    ok = usable(inp) & torch.isfinite(inp.v_star)
    beta2 = params.beta if params.beta2 is None else params.beta2
    log_ratio = sequence_log_ratio_sum(inp.logprobs, inp.ref_logprobs, inp.mask)  # (N,)
    target = torch.where(ok, inp.rewards - inp.v_star, torch.zeros_like(inp.rewards))  # estimated A*(x, y)
    per_seq = truncated_weight(sequence_tis_gap(inp), cfg) * (beta2 * log_ratio - target).pow(2)
    loss = sequence_mean(torch.where(ok, per_seq, torch.zeros_like(per_seq)), inp)
    with torch.no_grad():
        k = ok.sum().clamp(min=1)
        metrics = {
            "loss/policy": float(loss),
            "loss/a_star_adv_mean": float(target.sum() / k),
            "loss/seq_log_ratio_ref": float((log_ratio * ok).sum() / k),
        }
    return with_kl(loss, inp, cfg, metrics)


def future_disagreement(h: torch.Tensor, mask: torch.Tensor, groups: Optional[torch.Tensor], baseline: bool):
    """(N, T) G_t - b_t: G_t = sum_{t' > t} h_t' m_t' (the disagreement still to come after token t, `h`
    detached), minus b_t, the mean G at position t over the other rows of the group with a token there
    (0 when `baseline` is off, without groups, or with no such row)."""
    h = h.detach() * mask  # (N, T)
    future = torch.flip(torch.cumsum(torch.flip(h, [1]), 1), [1]) - h  # strictly later tokens
    if not baseline or groups is None:
        return future
    n_groups = int(groups.max()) + 1 if groups.numel() else 0
    total = torch.zeros((n_groups, h.shape[1]), dtype=h.dtype).index_add_(0, groups, future * mask)  # (G, T)
    count = torch.zeros((n_groups, h.shape[1]), dtype=h.dtype).index_add_(0, groups, mask.to(h.dtype))
    others = (count[groups] - mask).clamp(min=0)  # (N, T)
    base = torch.where(others > 0, (total[groups] - future * mask) / others.clamp(min=1), torch.zeros_like(h))
    return future - base


@LOSSES.register(
    "distil",
    params=DistilParams,
    state=DistilState,
    paper=papers.DISTIL,
    fidelity="reduced",
    departures=(
        "the future weight is the KL H - H(teacher) (the disagreement), not the cross-entropy: our reading",
        "the expert is a checkpoint with the same tokenizer, or the policy conditioned on the row's fields "
        "(`teacher=self`, `feedback`), placed before the sequence; the paper's black-box expert reading rich "
        "feedback (execution traces, corrections) is not reproduced",
    ),
)
@requires("full_logits", "teacher", "groups")
def distil(inp: LossInput, cfg, params: Optional[DistilParams] = None) -> tuple[torch.Tensor, dict[str, float]]:
    """DistIL (Agrawal et al., 2026, arXiv:2606.05152): distributional DAgger, the forward cross-entropy to a
    teacher summed over the student's own rollouts, with its sequence-level gradient.

    J = E_{y ~ pi}[sum_t H_t], H_t = H(pi_teacher(. | x_<t), pi(. | x_<t)) = -sum_v pi_teacher(v | x_<t)
    log pi(v | x_<t) over the full vocabulary at every sampled completion position. Its gradient has two
    terms: sum_t grad H_t at the visited states, and the score-function term sum_t grad log pi(y_t) G_t with
    G_t = sum_{t' > t} D_t', D = H - H(teacher) = KL(teacher || student), which carries later teacher-student
    disagreement back to the tokens that led there (DistIL's point against tokenwise distillation). Per token
        l_t = H_t + sg(G_t - b_t) (rho_t - sg(rho_t)),   rho_t = pi / pi_old (y_t)
    (value H_t; gradient grad H_t + (G_t - b_t) rho_t grad log pi(y_t)), reduced by `aggregate` with
    `loss_agg` (with seq-mean-token-sum its expectation is grad E[sum_t D_t] exactly); b_t is a leave-one-out
    group baseline (`baseline`). The future weight is the KL, not the cross-entropy, so that it measures
    disagreement only: with H the student would also be pushed toward states where the teacher is certain
    (our reading of "future expert-student disagreement"). `future=false` keeps the tokenwise term only.
    Minimised (gradient zero) exactly where the student equals the teacher; H - H(teacher) =
    KL(teacher || student) is reported. The teacher (`distil(teacher=PATH)`, or `teacher=self` with
    `feedback`, see ascent.algorithms.distil) must share the student's tokenizer. Rewards and advantages
    are not used (add kl_coef for a reference KL).
    """
    params = params or DistilParams(teacher="-")
    _need(inp, "distil", "logits", "teacher_logprobs")
    ce = -(inp.teacher_logprobs.exp() * inp.logits).sum(-1)  # (N, T)
    with torch.no_grad():
        teacher_entropy = -(inp.teacher_logprobs.exp() * inp.teacher_logprobs).sum(-1)  # (N, T)
    loss_mat, future = ce, torch.zeros_like(ce)
    if params.future:
        future = future_disagreement(ce - teacher_entropy, inp.mask, inp.group_index, params.baseline)
        ratio = torch.exp((inp.logprobs - inp.old_logprobs).clamp(-20.0, 20.0))  # (N, T)
        loss_mat = ce + future * (ratio - ratio.detach())  # value: the cross-entropy; gradient: + G rho grad log pi
    loss = _reduce(loss_mat, inp, cfg)
    with torch.no_grad():
        metrics = {
            "loss/policy": float(loss),
            "loss/distil_kl": float(masked_mean(ce - teacher_entropy, inp.mask)),
            "loss/distil_future": float(masked_mean(future.abs(), inp.mask)),
        }
    return with_kl(loss, inp, cfg, metrics)


def with_distillation(
    term: torch.Tensor, inp: LossInput, cfg, rl: bool, kl: torch.Tensor, rows: torch.Tensor, name: str
) -> tuple[torch.Tensor, dict[str, float]]:
    """`term` (the weighted distillation term), plus the PPO-clip loss when `rl` (else the reference KL
    penalty, if any); metrics: loss/{name}_kl (the reverse KL (N, T) `kl` over the distilled rows `rows` (N,))
    and loss/{name}_rows (their share)."""
    with torch.no_grad():
        on = inp.mask * rows[:, None]  # (N, T)
        metrics = {
            f"loss/{name}_kl": float(masked_mean(kl.detach(), on)),
            f"loss/{name}_rows": float((rows * (inp.mask.sum(-1) > 0)).sum() / max(inp.mask.shape[0], 1)),
            f"loss/{name}_term": float(term.detach()),
        }
    if not rl:
        metrics["loss/policy"] = float(term.detach())
        return with_kl(term, inp, cfg, metrics)
    loss, rl_metrics = ppo_clip(inp, cfg)
    return loss + term, {**rl_metrics, **metrics}


@LOSSES.register(
    "opd",
    params=OpdParams,
    state=DistilState,
    paper=(papers.GKD, papers.ON_POLICY_DISTILLATION, papers.HYPEREYES),
    fidelity="faithful",
    departures=(
        (
            "the defaults are plain on-policy reverse-KL distillation; HyperEyes' failed-rollout OPD is "
            "`only_failed=true, rl=true` (with rl=false successful rows get no gradient)"
        ),
    ),
)
@requires("full_logits", "teacher", "rewards")
def opd(inp: LossInput, cfg, params: Optional[OpdParams] = None) -> tuple[torch.Tensor, dict[str, float]]:
    """On-policy distillation: per-token reverse KL to a frozen teacher on the student's own samples.

    GKD (Agarwal et al., 2024, "On-Policy Distillation of Language Models", arXiv:2306.13649), with the reverse
    KL as divergence and no teacher-generated data; the on-policy distillation of Lu & Thinking Machines, 2025 (a
    blog post); on failed rollouts only as in HyperEyes (Li et al., 2026, arXiv:2605.07177).

    estimator "full" (default): l_t = KL(pi || pi_T)(. | x_<t) = sum_v pi(v|x_<t) (log pi(v|x_<t) - log pi_T(v|x_<t))
    over the full vocabulary, differentiated directly (zero gradient exactly where pi = pi_T).
    estimator "sampled": l_t = sg(log pi(y_t) - log pi_T(y_t)) * pi/pi_old(y_t): policy gradient with the
    per-token advantage log pi_T(y_t) - log pi(y_t) of the sampled token.
    With `only_failed`, only rows whose reward < `threshold` distil (HyperEyes); with `rl`, the PPO-clip loss on
    the run's advantages is added: l = ppo_clip + coef * aggregate(l_t), else l = coef * aggregate(l_t) (+ the
    reference KL penalty when kl_coef > 0). The teacher (`opd(teacher=PATH)`, distil's state `DistilState`)
    must share the student's tokenizer. `loss/opd_kl` is the exact per-token reverse KL on the distilled rows.
    """
    if params is None:
        raise ValueError("loss 'opd' needs its parameters: opd(teacher=PATH)")
    p = params
    _need(inp, "opd", "logits", "teacher_logprobs", "rewards")
    exact = reverse_kl_full(inp.logits, inp.teacher_logprobs)  # (N, T)
    if p.estimator == "full":
        kl_mat = exact
    else:
        _need(inp, "opd", "teacher_token_logprobs")
        kl_mat, _ = reverse_kl_sampled(inp.logprobs, inp.old_logprobs, inp.teacher_token_logprobs)
    rows = failed_rows(inp.rewards, p.threshold) if p.only_failed else torch.ones_like(inp.rewards)  # (N,)
    term = p.coef * _reduce(kl_mat * rows[:, None], inp, cfg)
    return with_distillation(term, inp, cfg, p.rl, exact, rows, "opd")


@LOSSES.register(
    "edge",
    params=EdgeParams,
    state=EdgeState,
    paper=papers.EDGE,
    fidelity="faithful",
    departures=(
        (
            "judged against the abstract and the authors' code (paper not found); the teacher is the same policy with "
            "the experience in context, log-probs from explorer `edge`"
        ),
    ),
)
@requires("edge")
def edge(inp: LossInput, cfg, params: EdgeParams = EdgeParams()) -> tuple[torch.Tensor, dict[str, float]]:
    """EDGE's loss: ppo_clip plus reverse KL towards the experience-conditioned policy (with explorer `edge`).

    EDGE (Experience-Distillation for Guided Exploration; arXiv id not found, code github.com/xvolcano02/EDGE): the
    RL loss on the whole group plus reverse KL from the experience-free policy to the experience-conditioned one, on the
    policy's own samples (its empirical support):

        l = ppo_clip + coef * aggregate(sg(log pi(y_t | x) - log pi(y_t | e, x)) * pi/pi_old(y_t | x))

    over the experience-free rows of the groups whose experience e had a positive marginal gain (the explorer
    decides and records, per row, `distil_rows` and the conditioned log-probs `teacher_token_logprobs`, taken
    without grad at sampling time). The sampled-token estimator of `opd`; the teacher is the policy itself with
    the experience in its context, so no second model is loaded. `rl=false` keeps the distillation term only.
    """
    _need(inp, "edge", "teacher_token_logprobs", "distil_rows")
    kl_mat, k1 = reverse_kl_sampled(inp.logprobs, inp.old_logprobs, inp.teacher_token_logprobs)
    rows = inp.distil_rows.to(kl_mat.dtype)  # (N,)
    term = params.coef * _reduce(kl_mat * rows[:, None], inp, cfg)
    return with_distillation(term, inp, cfg, params.rl, k1, rows, "edge")
