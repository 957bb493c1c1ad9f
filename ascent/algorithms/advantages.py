"""Advantage estimators. ONE signature: `fn(inp: AdvantageInput, cfg: AlgorithmConfig[, params]) -> (N, T) tensor`.

An estimator with technique knobs declares them in a frozen params dataclass next to it (`TacoParams`, ...),
registered with `params=`, ranges checked once in its `__post_init__`; a run sets them in the estimator's
spec, `algorithm.advantage=taco(alpha=0.05)`, and `ADVANTAGES.resolve(spec)` binds them (called without
`params` an estimator uses the defaults). Generic knobs (`cfg.std_eps`) stay on the AlgorithmConfig.

Outcome estimators compute one scalar per sequence and broadcast it over the sequence's completion
tokens. Samples whose reward failed (`inp.valid` false) are left out of every group statistic and get
zero advantage.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from ascent import papers
from ascent.algorithms.groups import group_min_max
from ascent.algorithms.state import PieceState
from ascent.algorithms.types import AdvantageInput
from ascent.registry import Registry

ADVANTAGES: Registry = Registry("advantage estimator")


def group_moments(
    values: torch.Tensor, group_index: torch.Tensor, valid: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Per-sample (count, mean, unbiased std) of its group's valid values; each (N,).

    Groups with one valid sample get std 0, and so do groups whose valid values are all equal: their
    mean is set to that value exactly, so r - mean is exactly 0 (float32 rounding of e.g. 0.7 would
    otherwise leave a 1e-8 std that the GRPO division blows up).
    """
    groups = int(group_index.max()) + 1 if group_index.numel() else 0
    w = valid.to(values.dtype)  # (N,)
    v = torch.where(valid, values, torch.zeros_like(values))  # (N,) NaN-free
    count = torch.zeros(groups, dtype=values.dtype).index_add_(0, group_index, w)  # (G,)
    total = torch.zeros(groups, dtype=values.dtype).index_add_(0, group_index, v)
    mean = total / count.clamp(min=1.0)
    dev = (v - mean[group_index]) * w
    sq = torch.zeros(groups, dtype=values.dtype).index_add_(0, group_index, dev * dev)
    std = torch.sqrt(sq / (count - 1.0).clamp(min=1.0))
    lo, hi = group_min_max(values, valid, group_index, groups)  # (G,) each
    flat = (lo == hi) & (count > 0)
    mean = torch.where(flat, lo, mean)
    std = torch.where((count > 1) & ~flat, std, torch.zeros_like(std))
    return count[group_index], mean[group_index], std[group_index]


def broadcast(seq_adv: torch.Tensor, inp: AdvantageInput) -> torch.Tensor:
    """(N,) sequence advantages -> (N, T) on completion tokens; zero for invalid samples."""
    seq_adv = torch.where(inp.valid, seq_adv, torch.zeros_like(seq_adv))
    return seq_adv[:, None] * inp.mask


@ADVANTAGES.register("grpo", paper=papers.GRPO, fidelity="faithful")
def grpo(inp: AdvantageInput, cfg) -> torch.Tensor:
    """GRPO: A_i = (r_i - mean_g r) / (std_g r + eps), std unbiased (Shao et al. 2024, DeepSeekMath)."""
    _, mean, std = group_moments(inp.rewards, inp.group_index, inp.valid)
    return broadcast((inp.rewards - mean) / (std + cfg.std_eps), inp)


@ADVANTAGES.register(
    "dr_grpo",
    paper=papers.DR_GRPO,
    fidelity="faithful",
    departures=(
        "advantage half only: the paper's removal of the 1/|o_i| length normalisation is the separate "
        "`algorithm.loss_agg=seq-mean-token-sum-norm` (the default stays token-mean)",
    ),
)
def dr_grpo(inp: AdvantageInput, cfg) -> torch.Tensor:
    """Dr. GRPO: A_i = r_i - mean_g r, no std division (Liu et al. 2025, "Understanding R1-Zero-like training").
    The paper's other half, no 1/|o_i| length normalisation, is `algorithm.loss_agg=seq-mean-token-sum-norm`."""
    _, mean, _ = group_moments(inp.rewards, inp.group_index, inp.valid)
    return broadcast(inp.rewards - mean, inp)


@ADVANTAGES.register("rloo", paper=papers.RLOO, fidelity="faithful")
def rloo(inp: AdvantageInput, cfg) -> torch.Tensor:
    """RLOO: A_i = r_i - mean_{j != i} r_j = n/(n-1) (r_i - mean_g r) (Ahmadian et al. 2024)."""
    count, mean, _ = group_moments(inp.rewards, inp.group_index, inp.valid)
    scale = count / (count - 1.0).clamp(min=1.0)
    adv = torch.where(count > 1, scale * (inp.rewards - mean), torch.zeros_like(mean))
    return broadcast(adv, inp)


@dataclass(frozen=True)
class RftParams:
    """Rejection-sampling fine-tuning as an advantage (with the `pg` loss)."""

    threshold: float = 1.0
    """A sample is kept (imitated) when its reward is >= this."""


@ADVANTAGES.register(
    "rft",
    params=RftParams,
    paper=(papers.RAFT, papers.REST_EM, papers.STAR),
    fidelity="reduced",
    departures=(
        (
            "online: each step fine-tunes on the current policy's kept samples (ReST-EM refits the base model on each "
            "iteration's dataset)"
        ),
        "keeps every sample with reward >= threshold, not RAFT's top-ranked samples of each prompt",
        "no STaR rationalisation (re-generating failed answers with the gold answer as a hint)",
    ),
)
def rft(inp: AdvantageInput, cfg, params: RftParams = RftParams()) -> torch.Tensor:
    """Rejection-sampling fine-tuning (RAFT, Dong et al. 2023, arXiv:2304.06767; STaR, Zelikman et al. 2022,
    arXiv:2203.14465; ReST-EM, Singh et al. 2023, arXiv:2312.06585): A_i = c for the kept samples (reward >=
    threshold), 0 for the rest, with c = (valid tokens) / (kept tokens), so that the `pg` loss with token-mean
    aggregation is exactly the mean negative log-likelihood of the kept samples' tokens. All correct samples
    count, also in groups where every sample is correct (no baseline): the supervised control RL is judged
    against, not a policy-gradient estimator.

    >>> inp = AdvantageInput(torch.tensor([1.0, 0.0, 1.0, 0.0]), torch.ones(4, dtype=torch.bool),
    ...                      torch.tensor([0, 0, 1, 1]), torch.tensor([[1.0, 1.0], [1.0, 0.0], [1.0, 0.0], [1.0, 1.0]]))
    >>> rft(inp, None)[:, 0].tolist()  # 6 valid tokens, 3 kept
    [2.0, 0.0, 2.0, 0.0]
    """
    keep = (inp.rewards >= params.threshold) & inp.valid
    lengths = inp.mask.sum(-1)
    kept = float((lengths * keep).sum())
    scale = float((lengths * inp.valid).sum()) / kept if kept > 0 else 0.0
    return broadcast(keep.float() * scale, inp)


def batch_moments(values: torch.Tensor, valid: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(mean, unbiased std) of the valid values of the whole batch (std 0 when fewer than two or all equal)."""
    v = values[valid]
    if v.numel() < 2 or bool((v == v[0]).all()):
        return (v.mean() if v.numel() else torch.tensor(0.0)), torch.tensor(0.0)
    return v.mean(), v.std()


@ADVANTAGES.register(
    "lite_ppo",
    paper=papers.LITE_PPO,
    fidelity="faithful",
    departures=(
        "advantage half of Lite PPO; its token-level loss aggregation is `algorithm.loss_agg=token-mean` (the default)",
    ),
)
def lite_ppo(inp: AdvantageInput, cfg) -> torch.Tensor:
    """Lite PPO: A_i = (r_i - mean_g r) / (std_batch r + eps): group mean, batch std ("Tricks or Traps?",
    Liu et al., 2025, arXiv:2508.08221)."""
    _, mean, _ = group_moments(inp.rewards, inp.group_index, inp.valid)
    _, std = batch_moments(inp.rewards, inp.valid)
    return broadcast((inp.rewards - mean) / (std + cfg.std_eps), inp)


@dataclass(frozen=True)
class ReinforcePPParams:
    """REINFORCE++ (Hu 2025, arXiv:2501.03262)."""

    kl_coef: float = 0.0
    """beta of the per-token KL-penalised return A_t = r - beta sum_{i >= t} KL_i (k1 estimator against the
    frozen reference, in the advantage, not the loss); 0: no reference forward (the paper's runs use a small
    positive beta). Do not also set algorithm.kl_coef, which would count the KL twice; >= 0."""

    def __post_init__(self) -> None:
        if not self.kl_coef >= 0:
            raise ValueError(f"kl_coef must be >= 0, got {self.kl_coef}")


class ReinforcePPState(PieceState):
    """The reference log-probs of the sampled tokens, for REINFORCE++'s KL-penalised return (kl_coef > 0)."""

    @torch.no_grad()
    def advantage_extras(self, batch) -> dict[str, torch.Tensor]:
        if self.params.kl_coef == 0:
            return {}
        ref, size = self.services.reference(), max(1, self.services.micro_batch_size)
        dev = next(ref.parameters()).device
        parts = [
            self.services.token_logprobs(
                ref, batch.input_ids[s : s + size].to(dev), batch.attention_mask[s : s + size].to(dev)
            )
            for s in range(0, len(batch.input_ids), size)
        ]
        return {"ref_logprobs": torch.cat(parts).float().cpu()}  # (N, T)


@ADVANTAGES.register(
    "reinforce_pp",
    params=ReinforcePPParams,
    state=ReinforcePPState,
    paper=papers.REINFORCE_PP,
    fidelity="faithful",
    departures=(
        "beta (kl_coef) defaults to 0, so no reference forward runs unless asked; the paper's runs use a small "
        "positive beta",
        "the 'w/ baseline' variant (group mean first) is not a mode of this piece (lite_ppo is the closest)",
    ),
)
def reinforce_pp(inp: AdvantageInput, cfg, params: ReinforcePPParams = ReinforcePPParams()) -> torch.Tensor:
    """REINFORCE++ (Hu 2025, arXiv:2501.03262): a critic-free per-token return with the KL penalty folded in,
    normalised over every token of the batch.

    A_t = r - beta sum_{i >= t} KL_i, KL_i = log pi_old(y_i) - log pi_ref(y_i) (k1; extras logprobs, the
    sampled log-probs, and ref_logprobs from `ReinforcePPState`), then A_t <- (A_t - mean) / (std + eps) with
    the mean and unbiased std over all completion tokens of the batch's valid rows (a long response weighs
    more, as in the paper). beta = params.kl_coef (0: A_t = r, token-weighted global normalisation). Invalid
    rows get 0. The "w/ baseline" variant (group mean subtracted first) is not built: use lite_ppo for it.
    """
    mask = inp.mask.double() * inp.valid[:, None].double()  # (N, T)
    ret = inp.rewards.double()[:, None].expand(mask.shape).clone()  # (N, T)
    if params.kl_coef > 0:
        kl = _extra(inp, "logprobs", "reinforce_pp").double() - _extra(inp, "ref_logprobs", "reinforce_pp").double()
        kl = kl * mask
        ret = ret - params.kl_coef * torch.flip(torch.cumsum(torch.flip(kl, [1]), 1), [1])
    on = mask > 0
    vals = ret[on]
    if vals.numel() < 2 or bool((vals == vals[0]).all()):
        mean, std = (vals.mean() if vals.numel() else torch.tensor(0.0, dtype=ret.dtype)), torch.tensor(0.0)
    else:
        mean, std = vals.mean(), vals.std()
    return ((ret - mean) / (std + cfg.std_eps) * mask).to(torch.float32)


# ---------------------------------------------------------------------------------------------------------
# Estimators from recent papers (TACO, GUI-Libra, RAPO, MaxRL, SA-MRPO, TMN, AEM, ExPPO: docs/references.md).
# Each builds on the shared helpers above; every "reading" of a detail the abstracts leave open is stated
# in the estimator's docstring and in docs/algorithms.md.
# ---------------------------------------------------------------------------------------------------------
def _extra(inp: AdvantageInput, key: str, name: str) -> torch.Tensor:
    """inp.extras[key], or a ValueError naming the estimator that needs it."""
    value = inp.extras.get(key)
    if value is None:
        raise ValueError(
            f"advantage estimator {name!r} needs inp.extras[{key!r}] (the trainer fills it); "
            f"got extras {sorted(inp.extras)}"
        )
    return value


def _check(name: str, ok: bool, what: str) -> None:
    if not ok:
        raise ValueError(f"advantage estimator {name!r}: {what}")


def _group_sum(values: torch.Tensor, group_index: torch.Tensor) -> torch.Tensor:
    """(N,) the sum of `values` over each sample's group (callers zero what must not count)."""
    groups = int(group_index.max()) + 1 if group_index.numel() else 0
    return torch.zeros(groups, dtype=values.dtype).index_add_(0, group_index, values)[group_index]


def _grpo_seq(inp: AdvantageInput, cfg) -> torch.Tensor:
    """(N,) GRPO sequence advantages, exactly zero for invalid samples."""
    _, mean, std = group_moments(inp.rewards, inp.group_index, inp.valid)
    adv = (inp.rewards - mean) / (std + cfg.std_eps)
    return torch.where(inp.valid, adv, torch.zeros_like(adv))


def _surprisal(inp: AdvantageInput, name: str) -> torch.Tensor:
    """(N,) length-normalised response surprisal: mean over completion tokens of -log p(sampled token)."""
    logprobs = _extra(inp, "logprobs", name)
    _check(
        name,
        tuple(logprobs.shape) == tuple(inp.mask.shape),
        f"extras['logprobs'] has shape {tuple(logprobs.shape)}, mask {tuple(inp.mask.shape)}",
    )
    m = inp.mask.to(logprobs.dtype)
    s = torch.where(m > 0, (-logprobs).clamp(max=1e4), torch.zeros_like(logprobs))  # finite even for -inf
    return s.sum(-1) / m.sum(-1).clamp(min=1.0)


def _group_z(values: torch.Tensor, inp: AdvantageInput, eps: float) -> torch.Tensor:
    """(N,) (v - mean_g v) / (std_g v + eps) over valid samples; 0 for invalid samples and flat groups."""
    _, mean, std = group_moments(values, inp.group_index, inp.valid)
    z = (values - mean) / (std + eps)
    return torch.where(inp.valid, z, torch.zeros_like(z))


def _success_rate(inp: AdvantageInput, threshold: float) -> torch.Tensor:
    """(N,) share of the group's valid samples with reward >= threshold."""
    ok = (inp.valid & (torch.nan_to_num(inp.rewards, nan=-math.inf) >= threshold)).to(inp.rewards.dtype)
    _, rate, _ = group_moments(ok, inp.group_index, inp.valid)
    return rate


@dataclass(frozen=True)
class TacoParams:
    """TACO (Lou et al. 2026, arXiv:2607.07976): tail-aware credit calibration."""

    alpha: float = 0.01
    """Tail-risk strictness (TACO, Lou et al. 2026, arXiv:2607.07976): a token is risky when
    -log p > local entropy + log(1/alpha); larger flags more tokens; > 0."""
    floor: float = 0.1
    """Smallest factor on a risky token's positive advantage (1 - the paper's lambda), in (0, 1]."""
    window: int = 16
    """Preceding completion tokens whose mean surprisal estimates the local entropy; >= 1."""

    def __post_init__(self) -> None:
        if not self.alpha > 0:
            raise ValueError(f"alpha must be > 0, got {self.alpha}")
        if not 0.0 < self.floor <= 1.0:
            raise ValueError(f"floor must be in (0, 1], got {self.floor}")
        if self.window < 1:
            raise ValueError(f"window must be >= 1, got {self.window}")


@ADVANTAGES.register(
    "taco",
    params=TacoParams,
    paper=papers.TACO,
    fidelity="reduced",
    departures=(
        (
            "the entropy H_t at the token's own position is replaced by the mean surprisal of the <= window preceding "
            "completion tokens, from the rollout's recorded log-probs (no full-vocabulary entropy at rollout time)"
        ),
    ),
)
def taco(inp: AdvantageInput, cfg, params: TacoParams = TacoParams()) -> torch.Tensor:
    """TACO (Lou et al., 2026, arXiv:2607.07976): GRPO with positive credit of tail-risky tokens scaled down
    to a factor in [floor, 1].

    Tail-risk score of completion token t (the paper's r = -log p - H + log alpha, from the authors' code):
    r_t = s_t - H_t + log(alpha), with s_t = -log p(sampled token) and H_t the LOCAL entropy. The
    trainer does not keep full distributions, so H_t is replaced by a context proxy, the mean surprisal of the
    up to `window` preceding completion tokens (observation tokens of multi-turn rows do not count; surprisal
    is unbiased for the entropy at its own position, so this is a different quantity, not an estimate of the
    paper's H_t); a token with no preceding completion token has H_t = s_t (no context, no evidence of risk).
    A rare token in a confident (low-entropy) context is risky; the same token in an uncertain context is
    exploration.
    Weight w_t = 1 if r_t <= 0, else 1 - (1 - floor)(1 - exp(-r_t)), so w_t in (floor, 1]: never
    zero, so rare patterns that keep recurring in successes still accumulate credit. Only tokens whose
    advantage is positive are reweighted; negative advantages are untouched. Needs extras['logprobs'].
    """
    name = "taco"
    logprobs = _extra(inp, "logprobs", name)
    _check(
        name,
        tuple(logprobs.shape) == tuple(inp.mask.shape),
        f"extras['logprobs'] has shape {tuple(logprobs.shape)}, mask {tuple(inp.mask.shape)}",
    )
    m = inp.mask.to(logprobs.dtype)
    s = torch.where(
        m > 0, (-logprobs).clamp(max=1e4), torch.zeros_like(logprobs)
    )  # (N, T) surprisal on completion tokens
    # the window counts completion tokens, not positions: observation tokens of multi-turn rows are skipped
    k = (torch.cumsum(m, dim=-1) - m).long()  # (N, T) completion tokens before position t
    packed = torch.zeros_like(s).scatter_add_(1, k.clamp(max=s.shape[-1] - 1), s)  # (N, T) s of the k-th token
    before = torch.cumsum(packed, dim=-1) - packed  # (N, T) sum over the first k completion tokens
    w = params.window
    prefix_s = before.gather(1, k)  # (N, T) sum over all preceding completion tokens
    lag_s = before.gather(1, (k - w).clamp(min=0))  # sum over those more than w tokens back
    count = k.clamp(max=w).to(s.dtype)  # completion tokens in the window
    local_h = torch.where(count > 0, (prefix_s - lag_s) / count.clamp(min=1.0), s)
    risk = s - local_h + math.log(params.alpha)
    weight = torch.where(
        risk > 0, 1.0 - (1.0 - params.floor) * (1.0 - torch.exp(-risk.clamp(min=0.0))), torch.ones_like(risk)
    )
    adv = broadcast(_grpo_seq(inp, cfg), inp)
    return torch.where(adv > 0, adv * weight.to(adv.dtype), adv)


@dataclass(frozen=True)
class ExppoParams:
    """ExPPO (Exploration-Preserving Policy Optimization, 2026)."""

    strength: float = 0.5
    """Bound of the surprisal shaping (ExPPO, Exploration-Preserving Policy Optimization, 2026): weights in
    [1 - s, 1 + s] times the pass rate; in [0, 1)."""
    threshold: float = 1.0
    """A response passes (counts in the prompt's pass rate) when its reward is >= this."""

    def __post_init__(self) -> None:
        if not 0.0 <= self.strength < 1.0:
            raise ValueError(f"strength must be in [0, 1), got {self.strength}")


@ADVANTAGES.register(
    "exppo",
    params=ExppoParams,
    paper=papers.EXPPO,
    fidelity="reduced",
    departures=(
        (
            "the shaping form (tanh of the group z-score of mean surprisal, times the pass rate and the advantage's "
            "sign) is ascent's reading; the paper (arXiv id not found) was not read"
        ),
        "restores the group's positive and negative |A| masses exactly, where the paper keeps them approximately",
    ),
)
def exppo(inp: AdvantageInput, cfg, params: ExppoParams = ExppoParams()) -> torch.Tensor:
    """ExPPO (Exploration-Preserving Policy Optimization; arXiv preprint, id not found: docs/references.md):
    GRPO credit redistributed by prompt-relative response surprisal and pass rate, mass kept.

    u_i = mean token surprisal of response i (length-normalised); z_i = (u_i - mean_g u) / (std_g u + eps)
    is its prompt-relative surprisal. q_g = the prompt's pass rate (reward >= threshold). Bounded
    shaping: w_i = 1 + strength * q_g * sign(A_i) * tanh(z_i), in [1 - strength, 1 + strength]
    (strength < 1 keeps w_i > 0): among correct responses the rarer (more surprising) ones get more credit,
    among wrong ones the frequent wrong mode gets more blame, so credit stops following mode frequency;
    the pass rate sets how much is redistributed (a prompt already solved often is where the dominant mode
    crowds out the others; a rarely solved prompt keeps near-GRPO credit). Shared normalisation: one factor
    for all positive samples of a group and one for all negative ones rescales w_i A_i so that each group's
    positive and negative absolute masses equal GRPO's, hence every sample keeps the verifier's sign and
    the group's total |A| (and GRPO's zero group sum) is preserved exactly. Needs extras['logprobs'].
    """
    name = "exppo"
    base = _grpo_seq(inp, cfg)
    z = _group_z(_surprisal(inp, name), inp, cfg.std_eps)
    q = _success_rate(inp, params.threshold)
    shaped = base * (1.0 + params.strength * q * torch.sign(base) * torch.tanh(z))
    pos, neg = (base > 0).to(base.dtype), (base < 0).to(base.dtype)
    factor = torch.zeros_like(base)
    for part in (pos, neg):
        want = _group_sum(base.abs() * part, inp.group_index)
        have = _group_sum(shaped.abs() * part, inp.group_index)
        factor = factor + part * want / have.clamp(min=torch.finfo(base.dtype).tiny)
    return broadcast(shaped * factor, inp)


@dataclass(frozen=True)
class AemParams:
    """AEM (Zhao et al. 2026, arXiv:2605.00425): adaptive entropy modulation."""

    strength: float = 0.5
    """Bound of the advantage x relative-surprisal rescaling (AEM, Zhao et al. 2026, arXiv:2605.00425): factors
    in [1 - s, 1 + s]; in [0, 1)."""

    def __post_init__(self) -> None:
        if not 0.0 <= self.strength < 1.0:
            raise ValueError(f"strength must be in [0, 1), got {self.strength}")


@ADVANTAGES.register(
    "aem",
    params=AemParams,
    paper=papers.AEM,
    fidelity="reduced",
    departures=(
        (
            "the response-level proxy (tanh of the advantage times the group z-score of length-normalised surprisal, "
            "scaled by the batch's failure/success balance) is ascent's reading of the abstract; the paper's method "
            "section was not checked"
        ),
    ),
)
def aem(inp: AdvantageInput, cfg, params: AemParams = AemParams()) -> torch.Tensor:
    """AEM (Zhao et al., 2026, arXiv:2605.00425): GRPO advantages rescaled by a response-level advantage x
    relative-surprisal proxy. Reading: the proxy's exact form (z-score, tanh, batch-level rho) is ours; the
    abstract does not give it.

    Entropy drift under a natural-gradient step is governed by A_i * s_i, s_i the response's relative
    surprisal: rewarding a surprising response or penalising a typical one raises entropy (explore), the
    opposite lowers it (exploit). Proxy: s_i = the group z-score of the length-normalised response
    surprisal; factor w_i = 1 + strength * rho * tanh(A_i s_i), with the batch balance
    rho = (n_neg - n_pos) / (n_neg + n_pos) over valid samples with negative/positive advantage. While
    failures dominate (rho > 0) entropy-raising updates are amplified and entropy-lowering ones damped;
    as successes take over (rho < 0) the reverse, so training moves from exploration to exploitation by
    itself. strength < 1 keeps every sign. Needs extras['logprobs'].
    """
    name = "aem"
    base = _grpo_seq(inp, cfg)
    s = _group_z(_surprisal(inp, name), inp, cfg.std_eps)
    n_pos, n_neg = float((base > 0).sum()), float((base < 0).sum())
    rho = (n_neg - n_pos) / (n_neg + n_pos) if n_neg + n_pos > 0 else 0.0
    return broadcast(base * (1.0 + params.strength * rho * torch.tanh(base * s)), inp)


@dataclass(frozen=True)
class SuccessAdaptiveParams:
    """GUI-Libra success-adaptive scaling (Yang et al. 2026, arXiv:2602.22190)."""

    threshold: float = 1.0
    """A sample succeeds when its reward is >= this (GUI-Libra success-adaptive scaling, Yang et al. 2026,
    arXiv:2602.22190)."""
    strength: float = 1.0
    """Negative advantages are multiplied by 1 - strength x the group's success rate; in [0, 1] (0: GRPO)."""

    def __post_init__(self) -> None:
        if not 0.0 <= self.strength <= 1.0:
            raise ValueError(f"strength must be in [0, 1], got {self.strength}")


@ADVANTAGES.register(
    "success_adaptive",
    params=SuccessAdaptiveParams,
    paper=papers.GUI_LIBRA,
    fidelity="reduced",
    departures=(
        (
            "the scaling of negative advantages by 1 - strength x (the group's success share) is ascent's reading of "
            "'success-adaptive scaling' (form not in the abstract)"
        ),
        "the KL trust region is left to `algorithm.kl_coef`",
    ),
)
def success_adaptive(inp: AdvantageInput, cfg, params: SuccessAdaptiveParams = SuccessAdaptiveParams()) -> torch.Tensor:
    """GUI-Libra success-adaptive scaling (Yang et al., 2026, arXiv:2602.22190): GRPO with negative advantages
    scaled by 1 - strength * success rate (our reading of the abstract's scaling; the exact form is not in it).

    Success = reward >= threshold; the success rate q_g is the group's. Negative
    advantages become A_i * (1 - strength * q_g); positive ones are unchanged. Under
    partial verifiability a "failure" in a group that mostly succeeds is the likeliest false negative
    (an alternative valid action), and GRPO's std normalisation gives exactly those lone failures the
    largest negative advantages; the scaling damps them, and leaves groups that mostly fail (reliable
    negatives) near GRPO.
    """
    base = _grpo_seq(inp, cfg)
    scale = 1.0 - params.strength * _success_rate(inp, params.threshold)
    return broadcast(torch.where(base < 0, base * scale, base), inp)


@dataclass(frozen=True)
class SaMrpoParams:
    """SA-MRPO (Saturation Aware Advantage Reweighting for Multi-Reward Policy Optimization, 2026)."""

    power: float = 1.0
    """Each objective's discount is (1 - batch saturation) ** power (SA-MRPO, 2026; 0: no discount, equal
    weights); >= 0."""

    def __post_init__(self) -> None:
        if not self.power >= 0:
            raise ValueError(f"power must be >= 0, got {self.power}")


@ADVANTAGES.register(
    "sa_mrpo",
    params=SaMrpoParams,
    paper=papers.SA_MRPO,
    fidelity="reduced",
    departures=(
        (
            "the batch saturation estimate (mean - min)/(max - min) and the discount (1 - saturation)^power are "
            "ascent's reading (forms not in the abstract)"
        ),
        "an objective flat over the batch counts as saturated (weight 0) even when flat at its minimum",
    ),
)
def sa_mrpo(inp: AdvantageInput, cfg, params: SaMrpoParams = SaMrpoParams()) -> torch.Tensor:
    """SA-MRPO: each reward objective standardised in its group, weighted by 1 - batch saturation, summed.

    Paper: "Learn What's Left, Not What's Mastered: Saturation Aware Advantage Reweighting for Multi-Reward
    Policy Optimization" (2026 arXiv preprint; authors and id not found, see docs/references.md).

    Objective k = column k of extras['components'] (each reward before weighting; NaN = no opinion, left
    out of that objective's statistics and contributing 0). z_ik = group z-score of objective k. Saturation
    sat_k = (mean_k - min_k) / (max_k - min_k) over the batch's valid values (for a 0/1 verifier: its
    success rate; a batch-flat objective counts as saturated, sat_k = 1). Discount
    d_k = (1 - sat_k) ** power, normalised to weights d_k / sum_j d_j, and
    A_i = sum_k (d_k / sum_j d_j) z_ik. The weights replace the run's fixed reward_weights; the normalisation
    keeps the advantage's scale and makes K = 1 exactly GRPO on that objective. Scaling or shifting one
    objective leaves the result unchanged; unlike GRPO on the weighted sum, the discount can flip a sign.
    """
    name = "sa_mrpo"
    comps = _extra(inp, "components", name)
    _check(
        name,
        comps.dim() == 2 and comps.shape[0] == inp.rewards.shape[0],
        f"extras['components'] must be (N, K), got {tuple(comps.shape)}",
    )
    comps = comps.to(inp.rewards.dtype)
    zs, discounts = [], []
    for k in range(comps.shape[1]):
        c = comps[:, k]
        ok = inp.valid & torch.isfinite(c)
        _, mean, std = group_moments(torch.where(ok, c, torch.zeros_like(c)), inp.group_index, ok)
        zs.append(torch.where(ok, (c - mean) / (std + cfg.std_eps), torch.zeros_like(c)))
        vals = c[ok]
        lo, hi = (float(vals.min()), float(vals.max())) if vals.numel() else (0.0, 0.0)
        sat = (float(vals.mean()) - lo) / (hi - lo) if hi > lo else 1.0
        discounts.append(max(0.0, 1.0 - sat) ** params.power)
    total = sum(discounts)
    adv = torch.zeros_like(inp.rewards)
    if total > 0:
        for z, d in zip(zs, discounts):
            adv = adv + (d / total) * z
    return broadcast(adv, inp)


@dataclass(frozen=True)
class TmnParams:
    """TMN-Reweight (GoLongRL, Lv et al. 2026, arXiv:2605.19577)."""

    difficulty: float = 1.0
    """A group weighs 1 + this x (1 - its mean reward placed in its task's range) (TMN-Reweight, GoLongRL,
    Lv et al. 2026, arXiv:2605.19577; 0: no difficulty weighting); >= 0."""

    def __post_init__(self) -> None:
        if not self.difficulty >= 0:
            raise ValueError(f"difficulty must be >= 0, got {self.difficulty}")


@ADVANTAGES.register(
    "tmn",
    params=TmnParams,
    paper=papers.GOLONGRL,
    fidelity="reduced",
    departures=(
        (
            "the task-level mean normalisation and the difficulty weight 1 + d (1 - p) are ascent's reading (formulas "
            "not in the abstract)"
        ),
    ),
)
def tmn(inp: AdvantageInput, cfg, params: TmnParams = TmnParams()) -> torch.Tensor:
    """TMN-Reweight (GoLongRL, Lv et al., 2026, arXiv:2605.19577): group-centred rewards, task-level mean
    normalisation, difficulty-adaptive weights (the exact forms below are our reading of the abstract).

    Tasks come from extras['task_index'] (without it the batch is one task). dev_i = r_i - mean_g r.
    Informative samples I = valid samples of groups whose rewards differ. Difficulty weight
    h_g = 1 + difficulty * (1 - p_g), p_g = (mean_g r - min_task r) / (max_task r - min_task r) the
    group's mean reward placed in its task's batch range (0 = hardest). Then
    A_i = h_g dev_i / mean_{j in I, task(j) = task(i)} |h_g(j) dev_j|: every task's mean |A| over its
    informative samples is exactly 1, so tasks whose rewards live on different scales contribute equally
    (and A is invariant to scaling or shifting one task's rewards), while within a task harder groups weigh
    more than easy ones. Flat groups and invalid samples get 0.
    """
    name = "tmn"
    n = inp.rewards.shape[0]
    task = inp.extras.get("task_index")
    task = torch.zeros(n, dtype=torch.long) if task is None else task.long()
    _check(name, task.shape == (n,), f"extras['task_index'] must be (N,), got {tuple(task.shape)}")
    r = torch.where(inp.valid, inp.rewards, torch.zeros_like(inp.rewards))
    _, mean, std = group_moments(inp.rewards, inp.group_index, inp.valid)
    informative = inp.valid & (std > 0)
    tasks = int(task.max()) + 1 if n else 0
    lo, hi = group_min_max(r, inp.valid, task, tasks)  # (tasks,) each: the task's batch range
    lo, hi = lo[task], hi[task]
    spread = torch.where(informative, hi - lo, torch.ones_like(r))
    p = torch.where(informative, (mean - lo) / spread, torch.zeros_like(r))
    num = torch.where(informative, (1.0 + params.difficulty * (1.0 - p)) * (r - mean), torch.zeros_like(r))
    w = informative.to(r.dtype)
    mass = torch.zeros(tasks, dtype=r.dtype).index_add_(0, task, num.abs())[task]
    count = torch.zeros(tasks, dtype=r.dtype).index_add_(0, task, w)[task]
    den = (mass / count.clamp(min=1.0)).clamp(min=torch.finfo(r.dtype).tiny)
    return broadcast(torch.where(informative, num / den, torch.zeros_like(r)), inp)


@dataclass(frozen=True)
class RapoParams:
    """RAPO reward-aware scaling (Fathom-DeepResearch, Singh et al. 2025, arXiv:2509.24107)."""

    power: float = 1.0
    """GRPO advantages times (2 sqrt(p (1 - p))) ** -power, p the group mean reward (RAPO, Singh et al. 2025,
    arXiv:2509.24107; 0: GRPO); >= 0."""

    def __post_init__(self) -> None:
        if not self.power >= 0:
            raise ValueError(f"power must be >= 0, got {self.power}")


@ADVANTAGES.register(
    "rapo",
    params=RapoParams,
    paper=papers.RAPO,
    fidelity="reduced",
    departures=(
        (
            "the advantage part of RAPO only: curriculum pruning is sampler `rapo_prune`, the success replay buffer "
            "explorer `replay`"
        ),
        (
            "the per-group factor (2 sqrt(p (1 - p)))^-power is a reading of 'reward-aware advantage scaling'; the "
            "paper's factor may be batch-level (unverified)"
        ),
    ),
)
def rapo(inp: AdvantageInput, cfg, params: RapoParams = RapoParams()) -> torch.Tensor:
    """RAPO (Fathom-DeepResearch, Singh et al., 2025, arXiv:2509.24107) reward-aware scaling:
    GRPO x (2 sqrt(p_g (1 - p_g))) ** -power, p_g the group's mean reward.

    For 0/1 rewards GRPO's total |A| in a group of n with pass rate p is 2 n sqrt(p (1 - p)) sqrt((n-1)/n):
    it collapses as rewards get sparse (p -> 0) or saturated, exactly where multi-turn RLVR lives. The
    factor (power = 1) makes that mass the same for every informative group, preserving gradient
    magnitude under sparse rewards; power = 0 is GRPO. p_g = group mean reward clamped to
    [1/n, 1 - 1/n] (n = valid samples; the range a 0/1 group with signal can take), so the factor is at
    most n / (2 sqrt(n - 1)); rewards are taken to lie in [0, 1]. Only the advantage part of RAPO (not its
    pruning or replay buffer).
    """
    count, mean, _ = group_moments(inp.rewards, inp.group_index, inp.valid)
    edge = 1.0 / count.clamp(min=2.0)
    p = torch.minimum(torch.maximum(mean, edge), 1.0 - edge)
    scale = (2.0 * torch.sqrt(p * (1.0 - p))) ** (-params.power)
    return broadcast(_grpo_seq(inp, cfg) * scale, inp)


@dataclass(frozen=True)
class MaxrlParams:
    """MaxRL (Tajwar et al. 2026, arXiv:2602.02710): maximum likelihood RL."""

    threshold: float = 1.0
    """A sample is correct when its reward is >= this (MaxRL, Tajwar et al. 2026, arXiv:2602.02710)."""
    order: int = 0
    """Order T of the truncated log-likelihood, 1 = RL (pass rate) ... group size = maximum likelihood
    (0: group size); >= 0."""
    baseline: bool = True
    """Subtract the unbiased leave-one-out baseline (zeroes all-correct and all-failed groups)."""

    def __post_init__(self) -> None:
        if self.order < 0:
            raise ValueError(f"order must be >= 0 (0: the group size), got {self.order}")


@ADVANTAGES.register(
    "maxrl",
    params=MaxrlParams,
    paper=papers.MAXRL,
    fidelity="faithful",
    departures=(
        (
            "the default `baseline=true` subtracts ascent's own leave-one-out control variate, not the paper's (r - "
            "mean r)/mean r: both unbiased, per-sample values differ"
        ),
    ),
)
def maxrl(inp: AdvantageInput, cfg, params: MaxrlParams = MaxrlParams()) -> torch.Tensor:
    """MaxRL (Tajwar et al., 2026, arXiv:2602.02710): unbiased estimator of the order-T truncation of
    grad log P(correct), T = params.order.

    Correct = reward >= threshold; per group n valid samples, K correct, p = P(correct).
    log p = -sum_k (1-p)^k / k; the order-T objective J_T keeps k <= T, grad J_T = sum_{k<=T} (1-p)^(k-1) grad p.
    T = 1 is RL (grad p), T -> infinity maximum likelihood. With F_i = failures among the OTHER n-1 samples,
    S_T(F) = sum_{j<T} C(F, j) / C(n-1, j) is an unbiased estimate of sum_{k<=T} (1-p)^(k-1) that does not
    depend on sample i, so A_i = 1[correct_i] S_T(F_i) makes mean_i A_i grad log pi(y_i) (what the loss
    computes per group) unbiased for grad J_T. At T = n (order = 0, the default) A_i = (n/K)
    1[correct_i]: the mean of grad log pi over the K correct samples, whose expectation is
    (1 - (1-p)^n) grad log p. Baseline (params.baseline): subtract b_i = (K_{-i} / (n-1)) S_T(F_i), a function
    of the other samples only, hence still unbiased; it zeroes all-correct and all-failed groups and at T = 1
    gives RLOO. Orders above n are clamped to n. With the baseline a group of one valid sample gets 0 (as in
    every group estimator); without it, A = 1[correct] (REINFORCE).
    """
    dtype = torch.float64
    correct = (inp.valid & (torch.nan_to_num(inp.rewards, nan=-math.inf) >= params.threshold)).to(dtype)
    valid = inp.valid.to(dtype)
    n = _group_sum(valid, inp.group_index)  # (N,)
    k_others = _group_sum(correct, inp.group_index) - correct  # correct among the other samples
    f_others = (n - 1.0) - k_others  # failures among the other samples
    order = n if params.order == 0 else torch.minimum(n, torch.full_like(n, float(params.order)))
    total = torch.zeros_like(n)
    term = torch.ones_like(n)  # C(F, j) / C(n-1, j) at j = 0
    for j in range(int(order.max()) if n.numel() else 0):
        if j > 0:
            term = term * (f_others - (j - 1)) / (n - j).clamp(min=1.0)
        total = total + torch.where(j < order, term, torch.zeros_like(term))
    adv = correct * total
    if params.baseline:
        adv = torch.where(n > 1, adv - k_others / (n - 1.0).clamp(min=1.0) * total, torch.zeros_like(adv))
    adv = torch.where(inp.valid, adv, torch.zeros_like(adv))
    return broadcast(adv.to(inp.rewards.dtype), inp)
