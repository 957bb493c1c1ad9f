"""Fused RMSNorm for the learner of Llama-family models on the CPU (`train.fused_norm`).

HF's RMSNorm (Llama, SmolLM2, Qwen2, Qwen3, Mistral) is `x.pow(2).mean(-1)`, `+ eps`, `rsqrt` and two
multiplies forward, and about a dozen element-wise passes backward, each over the whole (tokens, hidden)
activation; on the TRL-comparison workload (3.17M Qwen2, 128 x 71 tokens, fp32) one norm's forward +
backward took ~17 ms, nine of them ~10% of the update. `fuse_rms_norms(model)` swaps each such module for
`FusedRMSNorm` (same `weight` parameter, same state-dict keys), whose forward runs `RMSNormFunction`: the
C kernels of `ascent/kernels/rms_norm.c`, one pass forward (keeping one float per row, not the
intermediate tensors) and one pass backward, rows split across the torch threads. This is the fused
RMSNorm of Liger Kernel (Hsu et al. 2024, "Liger Kernel: Efficient Triton Kernels for LLM Training", arXiv:2410.10989),
written for CPU learners. Same values and gradients as HF's module to float rounding (tests).

Applies to fp32 tensors on the CPU; anything else (bf16, a GPU, double backward) goes through the HF
formula inside the same module, so a swapped model stays usable everywhere.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor

import torch

NORMS = ("LlamaRMSNorm", "Qwen2RMSNorm", "Qwen3RMSNorm", "MistralRMSNorm")
"""HF module classes computing weight * (x / sqrt(mean(x^2) + eps)) (Gemma's 1 + weight is not one)."""

MIN_ROWS = 256
"""Rows per thread below which one thread does the whole tensor."""

_pool: ThreadPoolExecutor | None = None


def _blocks(rows: int, min_rows: int = MIN_ROWS) -> int:
    """How many contiguous row blocks `_split` runs: one per torch thread, each at least `min_rows` rows."""
    return max(1, min(torch.get_num_threads(), rows // min_rows))


def _split(rows: int, fn, min_rows: int = MIN_ROWS) -> int:
    """Run fn(start, stop, part) over `_blocks(rows, min_rows)` contiguous row blocks, in parallel (the
    kernels release the GIL); returns the number of blocks."""
    global _pool
    k = _blocks(rows, min_rows)
    bounds = [rows * i // k for i in range(k + 1)]
    if k == 1:
        fn(0, rows, 0)
        return 1
    if _pool is None:
        _pool = ThreadPoolExecutor(max_workers=os.cpu_count() or 2, thread_name_prefix="ascent-norm")
    list(_pool.map(lambda i: fn(bounds[i], bounds[i + 1], i), range(k)))
    return k


class RMSNormFunction(torch.autograd.Function):
    """y = weight * (x / sqrt(mean(x^2, -1) + eps)) over the last dimension of an fp32 CPU tensor."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, weight: torch.Tensor, eps: float, native) -> torch.Tensor:
        h = x.shape[-1]
        x2 = x.detach().reshape(-1, h).contiguous()
        w = weight.detach().contiguous()
        rows = x2.shape[0]
        y, r = torch.empty_like(x2), torch.empty(rows, dtype=torch.float32)
        f = 4  # bytes per float
        _split(
            rows,
            lambda a, b, _: native.rms_forward(
                x2.data_ptr() + a * h * f, w.data_ptr(), y.data_ptr() + a * h * f, r.data_ptr() + a * f, b - a, h, eps
            ),
        )
        ctx.save_for_backward(x2, w, r)
        ctx.native, ctx.shape = native, x.shape
        return y.view(x.shape)

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad: torch.Tensor):
        x2, w, r = ctx.saved_tensors
        rows, h = x2.shape
        g = grad.reshape(rows, h).contiguous()
        dx = torch.empty_like(x2)
        dws = torch.zeros((_blocks(rows), h), dtype=torch.float32)  # one weight-gradient partial per block
        f = 4
        _split(
            rows,
            lambda a, b, i: ctx.native.rms_backward(
                x2.data_ptr() + a * h * f,
                w.data_ptr(),
                r.data_ptr() + a * f,
                g.data_ptr() + a * h * f,
                dx.data_ptr() + a * h * f,
                dws[i].data_ptr(),
                b - a,
                h,
            ),
        )
        return dx.view(ctx.shape), (dws.sum(0) if ctx.needs_input_grad[1] else None), None, None


class FusedRMSNorm(torch.nn.Module):
    """Drop-in for an HF RMSNorm module (shares its `weight`): the fused kernels for fp32 CPU tensors, the
    HF formula otherwise (and after unpickling where the kernels are unavailable)."""

    def __init__(self, weight: torch.nn.Parameter, eps: float, native) -> None:
        super().__init__()
        self.weight = weight
        self.variance_epsilon = eps
        self._native = native

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        w = self.weight
        if (
            self._native is not None
            and x.dtype == torch.float32
            and w.dtype == torch.float32
            and x.device.type == "cpu"
            and w.device.type == "cpu"
            and x.shape[-1] == w.shape[0]
        ):
            return RMSNormFunction.apply(x, w, float(self.variance_epsilon), self._native)
        dtype = x.dtype
        x = x.to(torch.float32)
        x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.variance_epsilon)
        return w * x.to(dtype)

    def extra_repr(self) -> str:
        return f"{tuple(self.weight.shape)}, eps={self.variance_epsilon}, fused"

    def __getstate__(self):  # the ctypes functions do not pickle; they are looked up again after loading
        state = self.__dict__.copy()
        state["_native"] = None
        return state

    def __setstate__(self, state):
        super().__setstate__(state)
        from ascent import kernels

        self._native = kernels.load()  # None where they are unavailable: the HF formula


def fuse_rms_norms(model: torch.nn.Module) -> int:
    """Swap every HF RMSNorm of `model` (peft-wrapped too) for `FusedRMSNorm`; returns how many. 0 when the
    native kernels are unavailable here (no C compiler, `ASCENT_NATIVE=0`): the model is left as it was."""
    from ascent import kernels

    native = kernels.load()
    if native is None:
        return 0
    swapped = 0
    for parent in list(model.modules()):
        for name, child in list(parent.named_children()):
            if (
                type(child).__name__ in NORMS
                and isinstance(getattr(child, "weight", None), torch.nn.Parameter)
                and hasattr(child, "variance_epsilon")
            ):
                setattr(parent, name, FusedRMSNorm(child.weight, child.variance_epsilon, native))
                swapped += 1
    return swapped
