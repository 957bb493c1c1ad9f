"""FSDP2 (`torch.distributed.fsdp.fully_shard`) for the learner's model: parameters, gradients and optimizer state
sharded over the ranks of a 1-D DeviceMesh (gloo on CPU, NCCL on GPU), with full state dicts in and out.

What a rank holds after `shard_model`: every parameter is a DTensor of which this rank stores 1/N (dim-0 shards);
forward and backward all-gather a block's parameters just in time and reduce-scatter its gradients, so an optimizer
built over `model.parameters()` keeps only its rank's shard of the moments (about 1/N of the one-process
optimizer state). FSDP2's reduce-scatter AVERAGES gradients over the ranks, while the learner's convention
(`Ranks.reduce_gradients`) is their SUM (each rank's loss is already divided by the whole step's row count), so a
rank backpropagates `loss * world_size` (`sum_scale`). The divide factor 1 that would give the sum directly
(`set_gradient_divide_factor(1.0)`) reduces with ReduceOp.PREMUL_SUM, which gloo refuses ("Cannot use
ReduceOp.PREMUL_SUM with Gloo", torch 2.13), hence the loss scale, which works on gloo and NCCL alike.
Checkpoints are full (unsharded) state dicts gathered on rank 0, so a checkpoint written with
N ranks loads with 1 and the other way round.

Status: the mechanics here are tested with 2 gloo processes (tests/trainer/test_fsdp.py); the RL learner does not
use it yet: it needs its driver-side forwards (rank 0 alone computing log-probs, the KL monitor,
weight sync) run on every rank in lockstep, which a sharded model needs (docs/runtime.md)."""

from __future__ import annotations

from typing import Any

import torch
from torch.distributed.checkpoint.state_dict import (
    StateDictOptions,
    get_model_state_dict,
    get_optimizer_state_dict,
    set_model_state_dict,
    set_optimizer_state_dict,
)
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard
from torch.distributed.tensor import DTensor


def blocks(model: torch.nn.Module) -> list[torch.nn.Module]:
    """The units sharded (and all-gathered) one at a time: every element of an `nn.ModuleList` holding parameters
    (a transformer's layers); what is left (embeddings, final norm, a tied head) is the root's unit."""
    out: list[torch.nn.Module] = []
    for module in model.modules():
        if isinstance(module, torch.nn.ModuleList):
            out.extend(m for m in module if any(True for _ in m.parameters()))
    return out


def shard_model(model: torch.nn.Module, world_size: int, device_type: str = "cpu") -> torch.nn.Module:
    """Wrap `model` in place with `fully_shard` on a 1-D mesh over `world_size` ranks (the process group must be
    initialized, every rank calling this with the same model): one FSDP unit per block, then the root. Returns
    the model (now also an `FSDPModule`)."""
    mesh = init_device_mesh(device_type, (world_size,))
    for block in blocks(model):
        fully_shard(block, mesh=mesh)
    fully_shard(model, mesh=mesh)
    return model


def sum_scale(world_size: int) -> float:
    """The factor on a rank's loss that turns FSDP2's averaged gradients into the sum over the ranks."""
    return float(world_size)


def local_numel(tensors: Any) -> int:
    """Elements this rank stores of `tensors` (a DTensor counts its local shard)."""
    total = 0
    for t in tensors:
        if isinstance(t, DTensor):
            total += t.to_local().numel()
        elif isinstance(t, torch.Tensor):
            total += t.numel()
    return total


def optimizer_state_numel(optimizer: torch.optim.Optimizer) -> int:
    """Elements of optimizer state (moments; not the scalar step counters) this rank stores."""
    return local_numel(v for state in optimizer.state.values() for k, v in state.items() if k != "step")


FULL = StateDictOptions(full_state_dict=True, cpu_offload=True)


def full_state(model: torch.nn.Module, optimizer: torch.optim.Optimizer) -> dict:
    """{'model', 'optimizer'}: full (unsharded) CPU state dicts on rank 0, empty dicts on the other ranks; a
    collective, so every rank calls it. The model's dict has the one-process keys and shapes."""
    return {
        "model": get_model_state_dict(model, options=FULL),
        "optimizer": get_optimizer_state_dict(model, optimizer, options=FULL),
    }


def load_full_state(model: torch.nn.Module, optimizer: torch.optim.Optimizer | None, state: dict) -> None:
    """Load a full state dict (from `full_state`, or a one-process `model.state_dict()` / optimizer
    `state_dict()` keyed by parameter names) into the sharded model and optimizer; every rank passes the same
    full dict (each keeps its shard)."""
    opts = StateDictOptions(full_state_dict=True)
    set_model_state_dict(model, state["model"], options=opts)
    if optimizer is not None and state.get("optimizer"):
        set_optimizer_state_dict(model, optimizer, state["optimizer"], options=opts)


def full_weights(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """The gathered full weights for the rollout workers' weight sync (rank 0; other ranks get {})."""
    return get_model_state_dict(model, options=FULL)
