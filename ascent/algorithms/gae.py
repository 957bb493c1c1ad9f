"""GAE: PPO's advantage estimator with a learned value function (Schulman et al. 2016, "High-dimensional
continuous control using generalized advantage estimation"), for outcome rewards on token sequences.

The reward is given at the last completion token (0 elsewhere; a KL penalty is the loss's `kl_coef`, not a
per-token reward), the state after the last token is terminal (value 0), and per token
    delta_t = r_t + gamma V_{t+1} - V_t,   A_t = sum_k (gamma lambda)^k delta_{t+k},   R_t = A_t + V_t,
the returns R_t being the critic's regression targets. The values come from `inp.extras["values"]`
(N, T), aligned like the log-probs (V at position t is the value of the state in which token t is chosen);
the trainer fills them from the learner's critic because `gae.requires` names them.
"""

from __future__ import annotations

import torch

from ascent.algorithms.advantages import ADVANTAGES
from ascent.algorithms.aggregate import aggregate
from ascent.algorithms.types import AdvantageInput


def outcome_token_rewards(rewards: torch.Tensor, valid: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """(N, T): each valid sequence's reward on its last completion token, 0 elsewhere.

    >>> outcome_token_rewards(torch.tensor([2.0, float("nan")]), torch.tensor([True, False]), torch.tensor([[0., 1., 1., 0.], [0., 1., 0., 0.]]))
    tensor([[0., 0., 2., 0.],
            [0., 0., 0., 0.]])
    """
    T = mask.shape[1]
    last = T - 1 - torch.argmax(mask.flip(-1), dim=-1)  # (N,) last position where mask is 1
    has = valid & (mask.sum(-1) > 0)
    out = torch.zeros_like(mask)
    out[torch.arange(mask.shape[0], device=mask.device), last] = torch.where(has, rewards, torch.zeros_like(rewards)).to(out.dtype)
    return out


def compute_gae(values: torch.Tensor, token_rewards: torch.Tensor, mask: torch.Tensor, gamma: float, lam: float) -> tuple[torch.Tensor, torch.Tensor]:
    """(advantages, returns), each (N, T) and zero off `mask` (each row's completion tokens, contiguous).

    >>> v = torch.tensor([[0.0, 0.5, 0.25]]); r = torch.tensor([[0.0, 0.0, 1.0]]); m = torch.tensor([[0.0, 1.0, 1.0]])
    >>> adv, ret = compute_gae(v, r, m, gamma=1.0, lam=1.0)
    >>> adv.tolist(), ret.tolist()
    ([[0.0, 0.5, 0.75]], [[0.0, 1.0, 1.0]])
    """
    T = values.shape[1]
    adv = torch.zeros_like(values)
    running = torch.zeros_like(values[:, 0])
    for t in reversed(range(T)):
        next_mask = mask[:, t + 1] if t + 1 < T else torch.zeros_like(running)
        next_value = values[:, t + 1] * next_mask if t + 1 < T else torch.zeros_like(running)
        delta = token_rewards[:, t] + gamma * next_value - values[:, t]
        running = delta + gamma * lam * next_mask * running
        adv[:, t] = running * mask[:, t]
    return adv, (adv + values) * mask


@ADVANTAGES.register("gae")
def gae(inp: AdvantageInput, cfg) -> torch.Tensor:
    """GAE(gamma, lambda) with a learned critic (PPO); outcome reward on the last completion token.

    Knobs: gae_gamma (1.0: no discount, the usual choice for LLMs), gae_lambda, gae_whiten (normalise over
    the batch's valid tokens). The critic (a value model trained by the learner with a clipped value loss,
    value_lr / value_clip) supplies extras["values"]. Invalid samples get zero advantage.
    """
    if "values" not in inp.extras:
        raise ValueError("advantage 'gae' needs extras['values'] (N, T) from a critic; RLTrainer fills it because gae.requires names 'values'")
    values = inp.extras["values"].to(inp.mask.dtype)
    adv, _ = compute_gae(values, outcome_token_rewards(inp.rewards, inp.valid, inp.mask), inp.mask, cfg.gae_gamma, cfg.gae_lambda)
    keep = inp.mask * inp.valid[:, None].to(inp.mask.dtype)  # (N, T)
    if cfg.gae_whiten and keep.sum() > 1:
        mean = (adv * keep).sum() / keep.sum()
        var = ((adv - mean).pow(2) * keep).sum() / (keep.sum() - 1.0)
        adv = (adv - mean) / (var.sqrt() + cfg.std_eps)
    return adv * keep


gae.requires = frozenset({"values"})


def clipped_value_loss(new: torch.Tensor, old: torch.Tensor, returns: torch.Tensor, mask: torch.Tensor, clip: float | None, num_tokens: float) -> tuple[torch.Tensor, float]:
    """PPO's value loss 0.5 max((V - R)^2, (clip(V, V_old +- c) - R)^2), token mean through `aggregate`
    normalised by the mini-batch's `num_tokens`; also the share of tokens where the clipped term wins.

    >>> loss, frac = clipped_value_loss(torch.tensor([[1.0]]), torch.tensor([[0.0]]), torch.tensor([[2.0]]), torch.ones(1, 1), 0.5, 1.0)
    >>> float(loss), frac  # clipped value 0.5: 0.5 * max(1, 2.25)
    (1.125, 1.0)
    """
    err = (new - returns).pow(2)  # (N, T)
    if clip is None:
        return 0.5 * aggregate(err, mask, "token-mean", num_tokens=num_tokens), 0.0
    clipped = old + (new - old).clamp(-clip, clip)
    err_clipped = (clipped - returns).pow(2)
    frac = float(((err_clipped > err).float() * mask).sum() / mask.sum().clamp(min=1.0))
    return 0.5 * aggregate(torch.maximum(err, err_clipped), mask, "token-mean", num_tokens=num_tokens), frac
