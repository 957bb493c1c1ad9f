"""On-policy distillation: per-token reverse KL to a teacher on the student's own samples (the `opd` loss's
parameters and its two estimators), and EDGE's self-distillation towards the experience-conditioned policy
(the `edge` loss's parameters and state). The losses themselves are registered in `ascent.algorithms.losses`;
`opd`'s frozen teacher is distil's state (`ascent.algorithms.distil.DistilState`), shared, not copied.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, Optional

import torch

from ascent.algorithms.state import PieceState

ESTIMATORS = ("full", "sampled")


@dataclass(frozen=True)
class OpdParams:
    """On-policy distillation from a frozen teacher."""

    teacher: Optional[str] = None
    """Teacher model: a checkpoint folder or a run directory (its latest checkpoint); same tokenizer as the policy."""
    coef: float = 1.0
    """Weight of the reverse-KL term; >= 0."""
    rl: bool = False
    """Add the PPO-clip policy loss (with the run's advantages) to the distillation term; False: distillation alone."""
    only_failed: bool = False
    """Distil on failed rollouts only (reward < `threshold`), as HyperEyes does; successes get the RL term only
    with rl=true, and no gradient at all with rl=false."""
    threshold: float = 1.0
    """A rollout failed when its reward is below this (`only_failed`)."""
    estimator: Literal["full", "sampled"] = "full"
    """full: the exact reverse KL over the vocabulary at every position, differentiated directly (GKD);
    sampled: the one-sample estimate log pi/pi_T(y_t) of the sampled token, used as a negative per-token
    advantage (the on-policy distillation of Lu & Thinking Machines, 2025)."""

    def __post_init__(self) -> None:
        if not self.teacher:
            raise ValueError(
                "needs a teacher: write opd(teacher=PATH), a checkpoint folder or a run directory of a model "
                "with the same tokenizer"
            )
        if self.coef < 0:
            raise ValueError(f"coef must be >= 0, got {self.coef}")
        if self.estimator not in ESTIMATORS:
            raise ValueError(f"estimator must be one of {', '.join(ESTIMATORS)}, got {self.estimator!r}")


def reverse_kl_full(logits: torch.Tensor, teacher_logprobs: torch.Tensor) -> torch.Tensor:
    """(N, T) exact KL(pi || pi_T) = sum_v pi(v) (log pi(v) - log pi_T(v)) per position, with grad through
    the student's full log-softmax `logits` (N, T, V).

    >>> s = torch.log(torch.tensor([[[0.5, 0.5]]])); t = torch.log(torch.tensor([[[0.25, 0.75]]]))
    >>> round(float(reverse_kl_full(s, t)), 6)  # 0.5 ln 2 + 0.5 ln(2/3)
    0.143841
    """
    return (logits.exp() * (logits - teacher_logprobs)).sum(-1)


def reverse_kl_sampled(
    logprobs: torch.Tensor, old_logprobs: torch.Tensor, teacher_token_logprobs: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """The sampled-token estimator: per-token loss (N, T) and its value k1 = log pi(y_t) - log pi_T(y_t) (N, T).

    The loss is sg(k1) * rho_t with rho_t = pi/pi_old(y_t): its gradient, sg(k1) * grad log pi(y_t) at
    pi = pi_old, is the REINFORCE gradient of E_pi[log pi - log pi_T] per token with reward -k1 (the score
    term E_pi[grad log pi] vanishes), i.e. policy gradient with advantage log pi_T - log pi.
    """
    k1 = (logprobs - teacher_token_logprobs).detach()  # (N, T)
    ratio = torch.exp((logprobs - old_logprobs).clamp(-20.0, 20.0))
    return k1 * ratio, k1


def failed_rows(rewards: torch.Tensor, threshold: float) -> torch.Tensor:
    """(N,) float: 1 where the rollout failed (reward < threshold).

    >>> failed_rows(torch.tensor([1.0, 0.0, 0.5]), 1.0).tolist()
    [0.0, 1.0, 1.0]
    """
    return (rewards < threshold).float()


# EDGE: experience-conditioned self-distillation.


@dataclass(frozen=True)
class EdgeParams:
    """EDGE's loss: the RL part plus reverse KL towards the experience-conditioned policy."""

    coef: float = 1.0
    """Weight of the reverse-KL term; >= 0."""
    rl: bool = True
    """Add the PPO-clip policy loss (with the run's advantages); False: distillation alone."""

    def __post_init__(self) -> None:
        if self.coef < 0:
            raise ValueError(f"coef must be >= 0, got {self.coef}")


EDGE_TEACHER = "edge_teacher_logprobs"
"""RolloutBatch.extras key: (N, T) log pi(y_t | experience, x) of the sampled tokens of distilling rows, else 0."""
EDGE_CONDITIONED = "edge_conditioned"
"""RolloutBatch.extras key: (N,) bool, the sample saw an experience in its prompt (cut out of the batch's prompt)."""
EDGE_DISTIL = "edge_distil"
"""RolloutBatch.extras key: (N,) float, 1 on experience-free rows of admitted groups (those that distil)."""


class EdgeState(PieceState):
    """Hands the `edge` explorer's teacher log-probs (`RolloutBatch.extras`) to the loss as per-sequence inputs."""

    def sequence_inputs(self, batch: Any) -> dict[str, torch.Tensor]:
        if EDGE_TEACHER not in batch.extras:
            raise ValueError(
                "loss 'edge' needs the experience-conditioned log-probs of the 'edge' explorer: "
                "set rollout.explorer=edge as well"
            )
        teacher = torch.nan_to_num(batch.extras[EDGE_TEACHER], nan=0.0)  # concat_batches pads extras with NaN
        return {"teacher_token_logprobs": teacher, "distil_rows": torch.nan_to_num(batch.extras[EDGE_DISTIL], nan=0.0)}
