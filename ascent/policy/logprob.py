"""The log-probability of chosen tokens from logits, chunked, with a backward computed in place.

`log_softmax(logits / T)[target]` written with torch's ops costs, per (tokens, vocabulary) logit tensor, a
division by the temperature, a logsumexp (itself a max, a subtraction, an exp and a sum, each a full pass
and some a full-size temporary) and, in the backward, `exp(x - lse)` and a multiply into more full-size
temporaries. With SmolLM2's 49,152-entry vocabulary a micro-batch of 16 completions x 64 tokens has 50M
logits (200 MB): the profile of one SmolLM2+LoRA update on the TRL-comparison workload showed these
passes, their temporaries and the page faults of allocating them at ~13% of the update.

`TokenLogprob` walks the logits in chunks of rows that fit in the last-level cache (`CHUNK_BYTES`): the
forward keeps one float per row (its logsumexp) and no temporary larger than a chunk; the backward writes
`g / T * (onehot(target) - softmax(x / T))` chunk by chunk into one gradient buffer, each chunk's
exp/multiply/scatter done in place while it is in cache. Targets < 0 mark positions to skip (0 out, no
gradient). Same values and gradients as the torch formula to float rounding (tests).

The idea of never materialising the full-vocabulary log-softmax is the same as in Liger Kernel's fused
linear cross-entropy (Hsu et al. 2024, arXiv:2410.10989) and TRL's `selective_log_softmax`; this one
keeps the logits (the output layer is the model's own) and chunks only the softmax.
"""

from __future__ import annotations

import torch

CHUNK_BYTES = 8 << 20
"""Bytes of logits per chunk (rows x vocabulary x 4): a chunk's passes stay in a last-level cache."""


def _step(vocab: int) -> int:
    """Rows per chunk."""
    return max(1, CHUNK_BYTES // (4 * max(1, vocab)))


class TokenLogprob(torch.autograd.Function):
    """out[i] = log softmax(logits[i] / temperature)[targets[i]] over rows i of (R, V) logits (0 where
    targets < 0)."""

    @staticmethod
    def forward(ctx, logits: torch.Tensor, targets: torch.Tensor, temperature: float) -> torch.Tensor:
        rows, v = logits.shape
        out = torch.empty(rows, dtype=torch.float32, device=logits.device)
        lse = torch.empty(rows, dtype=torch.float32, device=logits.device)
        valid = targets >= 0
        safe = targets.clamp(min=0)
        step = _step(v)
        with torch.no_grad():
            for s in range(0, rows, step):
                x = logits[s : s + step]
                if temperature != 1.0:
                    x = x / temperature
                lse_c = torch.logsumexp(x, dim=-1)
                lse[s : s + step] = lse_c
                out[s : s + step] = x.gather(-1, safe[s : s + step, None]).squeeze(-1) - lse_c
        out.masked_fill_(~valid, 0.0)
        ctx.save_for_backward(logits, safe, valid, lse)
        ctx.temperature = temperature
        return out

    @staticmethod
    def backward(ctx, g: torch.Tensor):
        logits, safe, valid, lse = ctx.saved_tensors
        temperature = ctx.temperature
        rows, v = logits.shape
        grad = torch.empty_like(logits)
        w_all = (g * valid) / temperature  # (R,): the chain rule through the division by T
        step = _step(v)
        for s in range(0, rows, step):
            x, gc, w = logits[s : s + step], grad[s : s + step], w_all[s : s + step, None]
            if temperature != 1.0:
                torch.mul(x, 1.0 / temperature, out=gc)
                gc.sub_(lse[s : s + step, None])
            else:
                torch.sub(x, lse[s : s + step, None], out=gc)
            gc.exp_().mul_(-w)  # -g/T * softmax
            gc.scatter_add_(-1, safe[s : s + step, None], w)  # + g/T at the target
        return grad, None, None


def token_logprob(logits: torch.Tensor, targets: torch.Tensor, temperature: float = 1.0) -> torch.Tensor:
    """(...) log-probs of `targets` (...) under `logits` (..., V) / temperature; 0 where targets < 0.
    float32 out whatever the logits' dtype (bf16 logits are upcast first)."""
    if logits.dtype != torch.float32:
        logits = logits.float()
    if temperature in (0.0, 1.0):
        temperature = 1.0
    *lead, v = logits.shape
    flat = logits.reshape(-1, v)  # a view for the model's contiguous logits
    return TokenLogprob.apply(flat, targets.reshape(-1), float(temperature)).view(*lead)
