"""GAE: PPO's advantage estimator with a learned value function (Schulman et al. 2016, "High-dimensional
continuous control using generalized advantage estimation"), for outcome rewards on token sequences.

The reward is given at the last completion token (0 elsewhere; a KL penalty is the loss's `kl_coef`, not a
per-token reward), the state after the last token is terminal (value 0), and per token
    delta_t = r_t + gamma V_{t+1} - V_t,   A_t = sum_k (gamma lambda)^k delta_{t+k},   R_t = A_t + V_t,
the returns R_t being the critic's regression targets. The values come from `inp.extras["values"]`
(N, T), aligned like the log-probs (V at position t is the value of the state in which token t is chosen);
the trainer fills them from the learner's critic because `gae.requires` names them. Its knobs are
`GaeParams`, set in the spec: `algorithm.advantage=gae(lam=0.9, value_lr=1e-5)`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

import torch

from ascent import papers
from ascent.algorithms.advantages import ADVANTAGES
from ascent.algorithms.aggregate import aggregate
from ascent.algorithms.state import PieceState
from ascent.algorithms.types import AdvantageInput


def outcome_token_rewards(rewards: torch.Tensor, valid: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """(N, T): each valid sequence's reward on its last completion token, 0 elsewhere.

    >>> outcome_token_rewards(torch.tensor([2.0, float("nan")]), torch.tensor([True, False]),
    ...                       torch.tensor([[0., 1., 1., 0.], [0., 1., 0., 0.]]))
    tensor([[0., 0., 2., 0.],
            [0., 0., 0., 0.]])
    """
    T = mask.shape[1]
    last = T - 1 - torch.argmax(mask.flip(-1), dim=-1)  # (N,) last position where mask is 1
    has = valid & (mask.sum(-1) > 0)
    out = torch.zeros_like(mask)
    out[torch.arange(mask.shape[0], device=mask.device), last] = torch.where(
        has, rewards, torch.zeros_like(rewards)
    ).to(out.dtype)
    return out


def gae_recursion(
    rewards: torch.Tensor,
    values: torch.Tensor,
    next_values: torch.Tensor,
    next_nonterminal: torch.Tensor,
    gamma: float,
    lam: float,
) -> torch.Tensor:
    """GAE over a time-major sequence (T, ...): with c_t = next_nonterminal[t] (0 where the episode ends at t),
        delta_t = r_t + gamma c_t V'_t - V_t,   A_t = delta_t + gamma lambda c_t A_{t+1},   A_T = 0,
    V'_t = next_values[t] the value of the state after step t. The token sequences of `compute_gae` and the
    environment rollouts of `ascent.classic` (several episodes per environment, bootstrapped at the end) both
    call it.

    >>> gae_recursion(torch.tensor([1.0, 1.0]), torch.tensor([0.5, 0.5]), torch.tensor([0.5, 2.0]),
    ...               torch.tensor([1.0, 0.0]), gamma=0.5, lam=1.0).tolist()  # ends after step 1
    [1.0, 0.5]
    """
    adv = torch.empty_like(values)
    running = torch.zeros_like(values[0])
    delta = rewards + gamma * next_nonterminal * next_values - values  # (T, ...)
    for t in reversed(range(values.shape[0])):
        running = delta[t] + gamma * lam * next_nonterminal[t] * running
        adv[t] = running
    return adv


def compute_gae(
    values: torch.Tensor, token_rewards: torch.Tensor, mask: torch.Tensor, gamma: float, lam: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """(advantages, returns), each (N, T) and zero off `mask` (each row's completion tokens, contiguous).

    >>> v = torch.tensor([[0.0, 0.5, 0.25]]); r = torch.tensor([[0.0, 0.0, 1.0]]); m = torch.tensor([[0.0, 1.0, 1.0]])
    >>> adv, ret = compute_gae(v, r, m, gamma=1.0, lam=1.0)
    >>> adv.tolist(), ret.tolist()
    ([[0.0, 0.5, 0.75]], [[0.0, 1.0, 1.0]])
    """
    next_mask = torch.cat([mask[:, 1:], torch.zeros_like(mask[:, :1])], dim=1)  # (N, T): token t+1 is a completion one
    next_values = torch.cat([values[:, 1:], torch.zeros_like(values[:, :1])], dim=1)
    adv = gae_recursion(token_rewards.T, values.T, next_values.T, next_mask.T, gamma, lam).T * mask
    return adv, (adv + values) * mask


class CriticState(PieceState):
    """The critic of PPO with GAE: a value model (a copy of the policy's trunk with a scalar head), its own
    AdamW and schedule, and the clipped value loss; one regression step after each policy optimizer step.
    Its weights and optimizer state travel in the trainer state (resume)."""

    def __init__(self, params: Any, services: Any) -> None:
        super().__init__(params, services)
        self.model = services.value_model()
        self.optimizer, self.scheduler = services.optimizer(self.model, params.value_lr)
        self._values: Optional[tuple[Any, torch.Tensor]] = None  # (batch, its values (N, T)) of the current step
        self._targets: Optional[tuple[torch.Tensor, torch.Tensor]] = None  # (old values, GAE returns) (N, T) each

    @torch.no_grad()
    def values(self, batch: Any) -> torch.Tensor:
        """(N, T) values of every position of `batch`, in micro-batches, without grad."""
        self.model.eval()
        m = self.services.micro_batch_size
        return torch.cat(
            [self.model(batch.input_ids[i : i + m], batch.attention_mask[i : i + m]) for i in range(0, len(batch), m)]
        )

    def advantage_extras(self, batch: Any) -> dict[str, torch.Tensor]:
        values = self.values(batch)
        self._values = (batch, values)
        return {"values": values}

    def begin_update(
        self, batch: Any, rewards: Optional[torch.Tensor], valid: torch.Tensor, mask: torch.Tensor
    ) -> None:
        """Pre-update values (those the advantages were computed with) and the GAE returns, the targets."""
        if rewards is None:
            raise ValueError("the critic regresses on the rewards: pass rewards= to Learner.update")
        values = self._values[1] if self._values is not None and self._values[0] is batch else self.values(batch)
        token_rewards = outcome_token_rewards(rewards, valid, batch.completion_mask)
        returns = compute_gae(values, token_rewards, batch.completion_mask, self.params.gamma, self.params.lam)[1]
        self._targets, self._values = (values, returns), None

    def after_optimizer_step(self, batch: Any, rows: torch.Tensor, mask: torch.Tensor) -> dict[str, float]:
        """One optimizer step of the clipped value loss on rows `rows`, accumulated over micro-batches."""
        old_values, returns = self._targets
        self.model.train()
        num_tokens = float(mask[rows].sum())
        total, clipped, m = 0.0, 0.0, self.services.micro_batch_size
        for start in range(0, len(rows), m):
            sub = rows[start : start + m]
            width = int(batch.attention_mask[sub].sum(-1).max())
            new = self.model(batch.input_ids[sub, :width], batch.attention_mask[sub, :width])
            loss, frac = clipped_value_loss(
                new,
                old_values[sub, :width],
                returns[sub, :width],
                mask[sub, :width],
                self.params.value_clip,
                num_tokens,
            )
            if not torch.isfinite(loss):
                self.optimizer.zero_grad(set_to_none=True)
                return {"value/loss": float("nan"), "value/skipped": 1.0}
            loss.backward()
            total += float(loss.detach())
            clipped += frac * float(mask[sub].sum()) / max(num_tokens, 1.0)
        norm, stepped = self.services.clip_and_step(self.model, self.optimizer, self.scheduler)
        return {
            "value/loss": total,
            "value/clip_frac": clipped,
            "value/grad_norm": norm,
            "value/skipped": float(not stepped),
        }

    def state_dict(self) -> dict[str, Any]:
        return {
            "model": self.model.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "scheduler": self.scheduler.state_dict(),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if "model" not in state:
            raise ValueError(
                "the checkpoint has no critic state (it was written without the 'gae' advantage); "
                "resume with the advantage it was trained with"
            )
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.scheduler.load_state_dict(state["scheduler"])


@dataclass(frozen=True)
class GaeParams:
    """GAE (Schulman et al. 2016, arXiv:1506.02438) and its critic."""

    gamma: float = 1.0
    """Discount per token (GAE, Schulman et al. 2016, arXiv:1506.02438; 1.0: no discount, the usual choice for
    LLMs), in (0, 1]."""
    lam: float = 0.95
    """GAE lambda, the bias/variance trade-off (1: Monte Carlo returns minus the value), in [0, 1]."""
    whiten: bool = True
    """Normalise the advantages over the batch's valid tokens (mean 0, std 1)."""
    value_lr: Optional[float] = None
    """Critic learning rate (None: train.optim.lr); the critic has its own AdamW and schedule; > 0."""
    value_clip: Optional[float] = 0.2
    """Critic: clip new values to old +- value_clip in the value loss (None: unclipped); > 0."""

    def __post_init__(self) -> None:
        if not 0.0 < self.gamma <= 1.0:
            raise ValueError(f"gamma must be in (0, 1], got {self.gamma}")
        if not 0.0 <= self.lam <= 1.0:
            raise ValueError(f"lam must be in [0, 1], got {self.lam}")
        if self.value_lr is not None and not self.value_lr > 0:
            raise ValueError(f"value_lr must be > 0 (or None), got {self.value_lr}")
        if self.value_clip is not None and not self.value_clip > 0:
            raise ValueError(f"value_clip must be > 0 (or None), got {self.value_clip}")


@ADVANTAGES.register(
    "gae",
    params=GaeParams,
    state=CriticState,
    paper=papers.GAE,
    fidelity="faithful",
    departures=(
        (
            "outcome reward on the last completion token; a reference KL is the loss term `algorithm.kl_coef`, not a "
            "per-token reward"
        ),
    ),
)
def gae(inp: AdvantageInput, cfg, params: GaeParams = GaeParams()) -> torch.Tensor:
    """GAE(gamma, lambda) with a learned critic (PPO); outcome reward on the last completion token.

    Knobs (`GaeParams`): gamma, lam, whiten (normalise over the batch's valid tokens); value_lr and
    value_clip are the critic's (a value model trained by the learner with a clipped value loss), which
    supplies extras["values"]. Invalid samples get zero advantage.
    """
    if "values" not in inp.extras:
        raise ValueError(
            "advantage 'gae' needs extras['values'] (N, T) from a critic; "
            "RLTrainer fills it because gae.requires names 'values'"
        )
    values = inp.extras["values"].to(inp.mask.dtype)
    adv, _ = compute_gae(
        values, outcome_token_rewards(inp.rewards, inp.valid, inp.mask), inp.mask, params.gamma, params.lam
    )
    keep = inp.mask * inp.valid[:, None].to(inp.mask.dtype)  # (N, T)
    if params.whiten and keep.sum() > 1:
        mean = (adv * keep).sum() / keep.sum()
        var = ((adv - mean).pow(2) * keep).sum() / (keep.sum() - 1.0)
        adv = (adv - mean) / (var.sqrt() + cfg.std_eps)
    return adv * keep


gae.requires = frozenset({"values"})


def clipped_value_loss(
    new: torch.Tensor,
    old: torch.Tensor,
    returns: torch.Tensor,
    mask: torch.Tensor,
    clip: float | None,
    num_tokens: float,
) -> tuple[torch.Tensor, float]:
    """PPO's value loss 0.5 max((V - R)^2, (clip(V, V_old +- c) - R)^2), token mean through `aggregate`
    normalised by the mini-batch's `num_tokens`; also the share of tokens where the clipped term wins.

    >>> loss, frac = clipped_value_loss(torch.tensor([[1.0]]), torch.tensor([[0.0]]), torch.tensor([[2.0]]),
    ...                                 torch.ones(1, 1), 0.5, 1.0)
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
