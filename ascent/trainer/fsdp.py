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

Status: `learner.shard=fsdp2` (with `learner.world_size >= 2`) uses this in the RL learner
(`ascent.trainer.learner`): every rank trains a sharded copy made by `shard_model`, rank 0 also keeps its
unsharded model for what it runs alone (rollout, KL monitor, evaluation, weight sync), refreshed from the shards
after each update (`refresh`); checkpoints hold the one-process optimizer state (`gather_optimizer`,
`load_optimizer`). Tested in tests/trainer/test_fsdp.py (mechanics) and tests/trainer/test_fsdp_learner.py
(the learner, docs/runtime.md)."""

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
from torch.distributed.fsdp import FSDPModule, fully_shard
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


def is_sharded(model: torch.nn.Module) -> bool:
    """Whether `shard_model` has wrapped `model`."""
    return isinstance(model, FSDPModule)


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


def trainable_names(model: torch.nn.Module) -> list[str]:
    """Names of the trainable parameters in `make_optimizer`'s order: index i of a one-process optimizer's state
    dict is `trainable_names(model)[i]` (the same for a model and its sharded copy)."""
    return [n for n, p in model.named_parameters() if p.requires_grad]


def optimizer_state_bytes(optimizer: torch.optim.Optimizer) -> int:
    """Bytes of optimizer state (moments; not the scalar step counters) this rank stores."""
    total = 0
    for state in optimizer.state.values():
        for k, v in state.items():
            if k != "step" and isinstance(v, torch.Tensor):
                local = v.to_local() if isinstance(v, DTensor) else v
                total += local.numel() * local.element_size()
    return total


def load_optimizer(model: torch.nn.Module, optimizer: torch.optim.Optimizer, state: dict) -> None:
    """Load a one-process `optimizer.state_dict()` (parameters by index) into the optimizer of the sharded `model`;
    every rank passes the same dict and keeps its shard of the moments. An empty state (no step taken) loads
    nothing: the fresh optimizer is that state already."""
    if not state.get("state"):
        return
    names = trainable_names(model)
    named = {  # the step counters copied: the optimizer counts on in place, the caller's dict must not
        "state": {names[i]: {k: _own(v) for k, v in st.items()} for i, st in state["state"].items()},
        "param_groups": [{**g, "params": [names[i] for i in g["params"]]} for g in state["param_groups"]],
    }
    set_optimizer_state_dict(model, optimizer, named, options=StateDictOptions(full_state_dict=True))


def gather_optimizer(model: torch.nn.Module, optimizer: torch.optim.Optimizer) -> dict:
    """The sharded optimizer's state as a one-process `optimizer.state_dict()` (parameters by index) on rank 0, {} on
    the others; a collective. A checkpoint of it resumes with any number of ranks, sharded or not."""
    full = get_optimizer_state_dict(model, optimizer, options=FULL)
    if not full:
        return {}
    index = {n: i for i, n in enumerate(trainable_names(model))}
    # the moments come back as fresh gathered tensors, the step counters as the optimizer's own: copy those, or
    # the dict would count on with the optimizer's next steps
    own = {n: {k: _own(v) for k, v in st.items()} for n, st in full["state"].items()}
    return {
        "state": {index[n]: v for n, v in own.items()},
        "param_groups": [{**g, "params": [index[n] for n in g["params"]]} for g in full["param_groups"]],
    }


def _own(value: Any) -> Any:
    """A copy of a scalar tensor (an optimizer's step counter), anything else as it is."""
    return value.clone() if isinstance(value, torch.Tensor) and value.dim() == 0 else value


@torch.no_grad()
def refresh(sharded: torch.nn.Module, full: torch.nn.Module | None) -> None:
    """Copy the sharded model's trainable weights into `full` (rank 0's unsharded model; None on the other ranks),
    one parameter at a time (`DTensor.full_tensor`, a collective every rank joins): rank 0 never holds a second
    whole copy, only one gathered parameter at a time. In place, so whatever holds `full`'s parameters (the
    rollout engine) sees the new weights as after a one-process optimizer step."""
    target = dict(full.named_parameters()) if full is not None else {}
    for name, p in sharded.named_parameters():
        if not p.requires_grad:
            continue
        value = p.full_tensor() if isinstance(p, DTensor) else p
        if full is not None:
            target[name].copy_(value)
