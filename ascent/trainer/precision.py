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
bf16 products are emulated there and slower than fp32); on a CPU with it and on CUDA, the learner's first
update `probe`s fp32 against bf16 on (up to 8 rows of) its first micro-batch — real sampled completions
on the actual model, forward + backward both ways, alternating, twice each — and bf16 is chosen only when
it is at least `MIN_SPEEDUP` faster and within `TOLERANCE` (random tokens would not do: far out of
distribution, their log-probs differ in bf16 several times more than real completions'). The run prints
the choice and its reason.
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass, field
from typing import Callable

import torch

from ascent.kernels import machine

TOLERANCE = {"logprob_mean_abs": 0.02, "logprob_p99_abs": 0.1, "grad_cosine": 0.99}
"""bf16 parity with fp32 on one batch: the mean and the 99th percentile of |difference| of the token
log-probs (nats; 0.1 nats is a 10% policy-ratio error, half of PPO's usual clip range), and the cosine
between the two gradients (all trainable parameters as one vector)."""
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
    pending: bool = False
    """`auto` not settled yet: the learner probes its first micro-batch (`decide`)."""

    @property
    def name(self) -> str:
        return "bf16" if self.dtype == torch.bfloat16 else "fp32"

    def autocast(self, device: torch.device) -> contextlib.AbstractContextManager:
        """The context the learner's forwards run in."""
        if self.dtype is None:
            return contextlib.nullcontext()
        return torch.autocast(device_type=torch.device(device).type, dtype=self.dtype)


class Fp32Linear(torch.nn.Linear):
    """An `nn.Linear` that computes in fp32 under autocast (the output layer of a bf16 learner). `plain_linear`
    tells the rollout decoder (`ascent.rollout.decoder.plain_linear`) that it is still x W^T + b: without it a
    bf16 learner's policy fell back to the slower cached engine (1.6x slower rollouts, SmolLM2 on the gsm8k
    recipe)."""

    plain_linear = True

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


def resolve(setting: str, model: torch.nn.Module, device: torch.device | str) -> Precision:
    """`train.precision` for this model on this machine (see the module docstring). `auto` where bf16 is
    native returns a `pending` Precision: the learner settles it with `decide` on its first micro-batch."""
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
    return Precision(setting, None, "auto: bf16 is native here; probed on the first update's micro-batch", pending=True)


def decide(
    model: torch.nn.Module, logprob_fn: Callable[[], torch.Tensor], mask: torch.Tensor, device: torch.device
) -> Precision:
    """Settle `train.precision=auto` on real data: `probe` fp32 against bf16 on the batch `logprob_fn`
    computes, and take bf16 when it is at least `MIN_SPEEDUP` faster and within `TOLERANCE`."""
    result = probe(model, logprob_fn, mask, device)
    ok, failed = within_tolerance(result)
    speedup = result["speedup"]
    if ok and speedup >= MIN_SPEEDUP:
        fp32_output_layer(model)
        why = f"auto -> bf16: {speedup:.2f}x faster than fp32 on the first micro-batch, within parity"
        return Precision("auto", torch.bfloat16, why, result)
    why = f"bf16 only {speedup:.2f}x faster" if ok else f"bf16 outside parity ({failed})"
    return Precision("auto", None, f"auto -> fp32: {why}", result)


def settled(model: torch.nn.Module, bf16: bool, reason: str, probe: dict[str, float]) -> Precision:
    """An `auto` verdict restored from a checkpoint (the output layer made fp32 again for bf16)."""
    if bf16:
        fp32_output_layer(model)
    return Precision("auto", torch.bfloat16 if bf16 else None, reason + " (restored)", dict(probe))


def within_tolerance(result: dict[str, float]) -> tuple[bool, str]:
    """Whether a `parity` result meets `TOLERANCE`, and the first measure that does not."""
    for key, bound in TOLERANCE.items():
        value = result[key]
        if (value < bound) if key == "grad_cosine" else (value > bound):
            return False, f"{key} {value:.4g} vs {bound}"
    return True, ""


def _run(model, logprob_fn, dtype, device, params):
    """One forward + backward of sum(log-probs) under `dtype` autocast (None: fp32): log-probs, gradient, seconds."""
    head = output_layer(model)
    head_class = type(head) if head is not None else None
    if dtype is not None:
        fp32_output_layer(model)
    ctx = torch.autocast(device.type, dtype=dtype) if dtype is not None else contextlib.nullcontext()
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    model.zero_grad(set_to_none=True)
    sync()
    t = time.perf_counter()
    with ctx:
        lp = logprob_fn()
    lp.sum().backward()
    sync()
    seconds = time.perf_counter() - t
    grads = torch.cat([p.grad.reshape(-1).double() for p in params if p.grad is not None])
    if head is not None:
        head.__class__ = head_class
    model.zero_grad(set_to_none=True)
    return lp.detach().float(), grads, seconds


def parity_measures(lp32, lp16, g32, g16, mask) -> dict[str, float]:
    """The `TOLERANCE` measures between an fp32 and a bf16 pass (log-probs on `mask`, gradients)."""
    diff = (lp32 - lp16).abs()[mask > 0]
    if diff.numel() == 0:
        diff = torch.zeros(1)
    cos = float((g32 @ g16) / (g32.norm() * g16.norm()).clamp(min=1e-300)) if g32.numel() else 1.0
    return {
        "logprob_mean_abs": float(diff.mean()),
        "logprob_p99_abs": float(torch.quantile(diff.double(), 0.99)),
        "logprob_max_abs": float(diff.max()),
        "grad_cosine": cos,
    }


def probe(
    model: torch.nn.Module,
    logprob_fn: Callable[[], torch.Tensor],
    mask: torch.Tensor,
    device: torch.device,
    repeats: int = 2,
) -> dict[str, float]:
    """Time forward + backward of `logprob_fn` (a fixed batch's (n, T) token log-probs with the current
    model; `mask` marks the positions that count) in fp32 and under bf16 autocast, alternating, `repeats`
    times each (the fastest counts: the first calls also pay one-time costs), and measure their parity.
    Gradients are left cleared and the model as it was. Returns seconds per side, `speedup` (fp32 / bf16)
    and the `parity_measures`."""
    params = [p for p in model.parameters() if p.requires_grad]
    times: dict[str, list[float]] = {"fp32": [], "bf16": []}
    last = {}
    for i in range(repeats):
        for name in ("bf16", "fp32") if i % 2 == 0 else ("fp32", "bf16"):
            lp, g, seconds = _run(model, logprob_fn, torch.bfloat16 if name == "bf16" else None, device, params)
            times[name].append(seconds)
            last[name] = (lp, g)
    result = parity_measures(last["fp32"][0], last["bf16"][0], last["fp32"][1], last["bf16"][1], mask)
    result["fp32_s"], result["bf16_s"] = min(times["fp32"]), min(times["bf16"])
    result["speedup"] = result["fp32_s"] / result["bf16_s"]
    return result
