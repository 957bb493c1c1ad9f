"""Mixed precision for the learner: `train.precision` = fp32 | bf16 | auto.

**bf16** runs the learner's forwards (and so their backwards) under `torch.autocast(dtype=bfloat16)`: the
matrix products of the transformer blocks take bf16 inputs, while the weights, their gradients and AdamW's
state stay fp32 (the master copy *is* the model), the residual stream and the norms stay fp32 (a block's
bf16 output added to the fp32 residual promotes back to fp32), and the output layer runs in fp32
(`fp32_output_layer`). Autocast rather than bf16 weights with fp32 master copies: it needs no second copy
of the weights, no copy-back after each optimizer step, no special case for LoRA adapters or tied
embeddings, and checkpoints stay fp32; its cost, casting each weight to bf16 once per forward, is
O(parameters) against the O(parameters x tokens) of the products it speeds up.

The output layer stays fp32 because the policy-gradient ratio is made of log-probabilities: logits rounded
to bf16 (8 bits of mantissa: 0.125 at a logit of 20) move a token's log-prob by up to ~0.1 nats, which is a
10% ratio error before any learning. MiniMax-M1 (MiniMax 2025, arXiv:2506.13585) traced its
training/inference probability mismatch to the LM head's precision and fixed it by computing the head in
fp32, as here.

**auto** picks per machine: fp32 on a CPU without native bf16 (no AVX512-BF16 / AMX-BF16 / Arm BF16:
bf16 products are emulated there and slower than fp32); on a CPU with it and on CUDA, `probe` times one
forward + backward of a synthetic batch on the actual model both ways and checks parity, and bf16 is
chosen only when it is at least `MIN_SPEEDUP` faster and within `TOLERANCE`. The run prints the choice and
its reason.
"""

from __future__ import annotations

import contextlib
import statistics
import time
from dataclasses import dataclass, field
from typing import Callable

import torch

from ascent.kernels import machine

TOLERANCE = {"logprob_max_abs": 0.1, "logprob_mean_abs": 0.01, "grad_cosine": 0.99}
"""bf16 parity with fp32 on one batch: the largest and the mean |difference| of the token log-probs (nats),
and the cosine between the two gradients (all trainable parameters as one vector)."""
MIN_SPEEDUP = 1.1
"""`auto` picks bf16 only when its forward + backward is at least this much faster than fp32's."""
PRECISIONS = ("fp32", "bf16", "auto")


@dataclass(frozen=True)
class Precision:
    """The learner's resolved precision: `dtype` None is fp32; `reason` says why (printed by the run)."""

    setting: str
    dtype: torch.dtype | None
    reason: str
    probe: dict[str, float] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return "bf16" if self.dtype == torch.bfloat16 else "fp32"

    def autocast(self, device: torch.device) -> contextlib.AbstractContextManager:
        """The context the learner's forwards run in."""
        if self.dtype is None:
            return contextlib.nullcontext()
        return torch.autocast(device_type=torch.device(device).type, dtype=self.dtype)


class Fp32Linear(torch.nn.Linear):
    """An `nn.Linear` that computes in fp32 under autocast (the output layer of a bf16 learner)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        with torch.autocast(device_type=x.device.type, enabled=False):
            return torch.nn.functional.linear(
                x.float(), self.weight.float(), None if self.bias is None else self.bias.float()
            )


def output_layer(model: torch.nn.Module) -> torch.nn.Module | None:
    """The model's output layer (peft-wrapped models too), or None."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    get = getattr(base, "get_output_embeddings", None)
    return get() if callable(get) else None


def fp32_output_layer(model: torch.nn.Module) -> bool:
    """Make the output layer compute in fp32 under autocast, in place (its class becomes `Fp32Linear`: same
    parameters, so tying, state dicts and checkpoints are unchanged). False when it is not a plain Linear."""
    head = output_layer(model)
    if head is None or type(head) not in (torch.nn.Linear, Fp32Linear):
        return False
    head.__class__ = Fp32Linear
    return True


def cuda_bf16(device: torch.device) -> bool:
    return device.type == "cuda" and torch.cuda.is_available() and torch.cuda.is_bf16_supported()


def resolve(setting: str, model: torch.nn.Module, device: torch.device | str, vocab_size: int) -> Precision:
    """`train.precision` for this model on this machine (see the module docstring)."""
    device = torch.device(device)
    if setting not in PRECISIONS:
        raise ValueError(f"train.precision must be one of {PRECISIONS}, got {setting!r}")
    if setting == "fp32":
        return Precision(setting, None, "train.precision=fp32")
    native = cuda_bf16(device) if device.type == "cuda" else bool(machine.native_bf16())
    if setting == "bf16":
        fp32_output_layer(model)
        why = "train.precision=bf16" + ("" if native else " (this device has no native bf16: emulated, likely slower)")
        return Precision(setting, torch.bfloat16, why)
    if not native:
        where = "this CPU has no AVX512-BF16/AMX-BF16/BF16 flag" if device.type == "cpu" else "the GPU lacks bf16"
        return Precision(setting, None, f"auto -> fp32: {where}, so bf16 products would be emulated and slower")
    result = probe(model, device, vocab_size)
    ok, failed = within_tolerance(result)
    speedup = result["speedup"]
    if ok and speedup >= MIN_SPEEDUP:
        fp32_output_layer(model)
        return Precision(
            setting, torch.bfloat16, f"auto -> bf16: {speedup:.2f}x faster than fp32, within parity", result
        )
    why = f"bf16 only {speedup:.2f}x faster" if ok else f"bf16 outside parity ({failed})"
    return Precision(setting, None, f"auto -> fp32: {why}", result)


def within_tolerance(result: dict[str, float]) -> tuple[bool, str]:
    """Whether a `parity` result meets `TOLERANCE`, and the first measure that does not."""
    for key, bound in TOLERANCE.items():
        value = result[key]
        if (value < bound) if key == "grad_cosine" else (value > bound):
            return False, f"{key} {value:.4g} vs {bound}"
    return True, ""


def parity(
    model: torch.nn.Module, logprob_fn: Callable[[], torch.Tensor], device: torch.device, dtype=torch.bfloat16
) -> dict[str, float]:
    """Compare one forward + backward in fp32 and under autocast(`dtype`) (with the output layer in fp32):
    `logprob_fn()` returns (n, T) token log-probs of a fixed batch with the current model; its masked sum is
    the loss. Gradients are left cleared. Returns the `TOLERANCE` measures plus the loss of each side."""
    params = [p for p in model.parameters() if p.requires_grad]
    head = output_layer(model)
    head_class = type(head) if head is not None else None
    out = {}
    runs = {}
    for name, ctx in (("fp32", contextlib.nullcontext()), ("bf16", torch.autocast(device.type, dtype=dtype))):
        if name == "bf16":
            fp32_output_layer(model)
        model.zero_grad(set_to_none=True)
        with ctx:
            lp = logprob_fn()
        loss = lp.sum()
        loss.backward()
        grads = torch.cat([p.grad.reshape(-1).float() for p in params])
        runs[name] = (lp.detach().float(), grads, float(loss.detach()))
    if head is not None and head_class is not None:
        head.__class__ = head_class
    model.zero_grad(set_to_none=True)
    (lp32, g32, l32), (lp16, g16, l16) = runs["fp32"], runs["bf16"]
    diff = (lp32 - lp16).abs()
    out["logprob_max_abs"] = float(diff.max())
    out["logprob_mean_abs"] = float(diff.mean())
    out["grad_cosine"] = float(torch.nn.functional.cosine_similarity(g32, g16, dim=0))
    out["loss_fp32"], out["loss_bf16"] = l32, l16
    return out


def probe(
    model: torch.nn.Module, device: torch.device, vocab_size: int, rows: int = 8, length: int = 64, repeats: int = 3
) -> dict[str, float]:
    """Time one forward + backward of a synthetic batch (`rows` x `length` random tokens) in fp32 and in bf16
    (median of `repeats`, after one warm-up each) on the actual model, and measure their parity. Returns
    seconds per side, `speedup` (fp32 / bf16) and the `parity` measures."""
    from ascent.policy.model import token_logprobs

    g = torch.Generator().manual_seed(0)
    ids = torch.randint(0, vocab_size, (rows, length), generator=g).to(device)
    mask = torch.ones_like(ids)
    was_training = model.training
    model.train()
    fn = lambda: token_logprobs(model, ids, mask)  # noqa: E731
    result = parity(model, fn, device)
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    head = output_layer(model)
    head_class = type(head) if head is not None else None
    times: dict[str, list[float]] = {"fp32": [], "bf16": []}
    for i in range(repeats + 1):
        for name in ("fp32", "bf16") if i % 2 == 0 else ("bf16", "fp32"):  # alternating: drift hits both
            if head is not None:
                head.__class__ = Fp32Linear if name == "bf16" else head_class
            ctx = torch.autocast(device.type, dtype=torch.bfloat16) if name == "bf16" else contextlib.nullcontext()
            sync()
            t = time.perf_counter()
            with ctx:
                lp = fn()
            lp.sum().backward()
            sync()
            if i:  # the first round warms up
                times[name].append(time.perf_counter() - t)
    if head is not None and head_class is not None:
        head.__class__ = head_class
    model.zero_grad(set_to_none=True)
    model.train(was_training)
    result["fp32_s"], result["bf16_s"] = statistics.median(times["fp32"]), statistics.median(times["bf16"])
    result["speedup"] = result["fp32_s"] / result["bf16_s"]
    return result
