"""KL penalty estimators between the policy and a frozen reference (Schulman, "Approximating KL
divergence", 2020), per token, with r = log pi_ref - log pi:

- k1 = -r = log pi - log pi_ref (unbiased, high variance, can be negative)
- k2 = r^2 / 2 (biased, low variance)
- k3 = exp(r) - 1 - r (unbiased for KL(pi||ref), always >= 0; GRPO's choice)
"""

from __future__ import annotations

import torch

KL_ESTIMATORS = ("k1", "k2", "k3")


def kl_penalty(logprobs: torch.Tensor, ref_logprobs: torch.Tensor, estimator: str) -> torch.Tensor:
    """Per-token KL estimate (N, T) of KL(pi || pi_ref) from log-probs of the sampled tokens.

    >>> lp, ref = torch.tensor([0.0]), torch.tensor([-1.0])
    >>> [round(float(kl_penalty(lp, ref, k)), 4) for k in ("k1", "k2", "k3")]
    [1.0, 0.5, 0.3679]
    """
    log_ratio = ref_logprobs - logprobs  # r = log(pi_ref / pi), (N, T)
    if estimator == "k1":
        return -log_ratio
    if estimator == "k2":
        return 0.5 * log_ratio.pow(2)
    if estimator == "k3":
        log_ratio = log_ratio.clamp(-20.0, 20.0)
        return torch.exp(log_ratio) - 1.0 - log_ratio
    raise ValueError(f"unknown KL estimator {estimator!r}; valid: {', '.join(KL_ESTIMATORS)}")
