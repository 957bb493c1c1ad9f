"""The log-probability of chosen tokens from logits, chunked, with a backward computed in place.

`log_softmax(logits / T)[target]` written with torch's ops costs, per (tokens, vocabulary) logit tensor, a
division by the temperature, a logsumexp (itself a max, a subtraction, an exp and a sum, each a full pass
and some a full-size temporary) and, in the backward, `exp(x - lse)` and a multiply into more full-size
temporaries. With SmolLM2's 49,152-entry vocabulary a micro-batch of 16 completions x 64 tokens has 50M
logits (200 MB): the profile of one SmolLM2+LoRA update on the TRL-comparison workload showed these
passes, their temporaries and the page faults of allocating them at ~13% of the update.

`NativeTokenLogprob` (fp32 CPU logits, where ascent's kernels build) runs `ascent/kernels/token_logprob.c`
over the rows, split across the torch threads: two passes per row forward (max, then the sum of exps;
one float, the row's logsumexp, kept) and one backward, writing `g / T * (onehot(target) - softmax(x / T))`
straight into the gradient. Elsewhere (bf16 or GPU tensors, no compiler) `TokenLogprob` walks the logits
in chunks of rows that fit in the last-level cache (`CHUNK_BYTES`) with torch ops: no temporary larger
than a chunk, the backward's exp/multiply/scatter done in place per chunk. Targets < 0 mark positions to
skip (0 out, no gradient). Both give torch's log_softmax + gather values and gradients to float rounding
(tests).

The idea of never materialising the full-vocabulary log-softmax is the same as in Liger Kernel's fused
linear cross-entropy (Hsu et al. 2024, arXiv:2410.10989) and TRL's `selective_log_softmax`; this one
keeps the logits (the output layer is the model's own) and chunks only the softmax.
"""

from __future__ import annotations

import torch

from ascent.policy.fused import _split

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


class NativeTokenLogprob(torch.autograd.Function):
    """`TokenLogprob` through the native kernels: fp32 contiguous CPU logits (R, V), int64 targets (R,)."""

    @staticmethod
    def forward(ctx, logits: torch.Tensor, targets: torch.Tensor, temperature: float, native) -> torch.Tensor:
        rows, v = logits.shape
        x = logits.detach()
        t = targets.contiguous()
        out, lse = torch.empty(rows, dtype=torch.float32), torch.empty(rows, dtype=torch.float32)
        inv_t = 1.0 / temperature
        _split(
            rows,
            lambda a, b, _: native.logprob_forward(
                x.data_ptr() + 4 * a * v,
                t.data_ptr() + 8 * a,
                b - a,
                v,
                inv_t,
                out.data_ptr() + 4 * a,
                lse.data_ptr() + 4 * a,
            ),
            min_rows=MIN_ROWS,
        )
        ctx.save_for_backward(x, t, lse)
        ctx.native, ctx.inv_t = native, inv_t
        return out

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, g: torch.Tensor):
        x, t, lse = ctx.saved_tensors
        rows, v = x.shape
        w = (g * ctx.inv_t).contiguous().float()  # skipped rows: the kernel writes zeros
        dx = torch.empty_like(x)
        _split(
            rows,
            lambda a, b, _: ctx.native.logprob_backward(
                x.data_ptr() + 4 * a * v,
                t.data_ptr() + 8 * a,
                lse.data_ptr() + 4 * a,
                w.data_ptr() + 4 * a,
                b - a,
                v,
                ctx.inv_t,
                dx.data_ptr() + 4 * a * v,
            ),
            min_rows=MIN_ROWS,
        )
        return dx, None, None, None


MIN_ROWS = 4
"""Rows per thread below which one thread does all of a call's rows (one row is a whole vocabulary)."""


def _native():
    from ascent import kernels

    return kernels.load()


def token_logprob(logits: torch.Tensor, targets: torch.Tensor, temperature: float = 1.0) -> torch.Tensor:
    """(...) log-probs of `targets` (...) under `logits` (..., V) / temperature; 0 where targets < 0.
    float32 out whatever the logits' dtype (bf16 logits are upcast first)."""
    if logits.dtype != torch.float32:
        logits = logits.float()
    if temperature in (0.0, 1.0):
        temperature = 1.0
    *lead, v = logits.shape
    flat = logits.reshape(-1, v)  # a view for the model's contiguous logits
    flat_targets = targets.reshape(-1).long()
    native = _native() if flat.device.type == "cpu" and flat.is_contiguous() and v > 0 else None
    if native is not None:
        out = NativeTokenLogprob.apply(flat, flat_targets, float(temperature), native)
    else:
        out = TokenLogprob.apply(flat, flat_targets, float(temperature))
    return out.view(*lead)
