"""Routing instances: the typed batch, seeded generators with RL4CO's distributions, and the instance file format.

Distributions (Kool, van Hoof & Welling 2019, "Attention, Learn to Solve Routing Problems!", arXiv:1803.08475,
section 5; the same in RL4CO, Berto et al. 2023, arXiv:2306.17100, `rl4co/envs/routing/*/generator.py`):

- TSP: n nodes uniform in [0, 1]^2.
- CVRP: a depot and n customers uniform in [0, 1]^2; integer demands uniform in {1, ..., 9}; one vehicle type of
  capacity 20 / 30 / 40 / 50 for n = 10 / 20 / 50 / 100 (RL4CO's table `CAPACITIES`, which extends Kool's by
  interpolation: used here for the other sizes, nearest size when n is not in it).

Node 0 is the depot of a CVRP instance; a TSP instance has no depot (node 0 is an ordinary node). Demands are kept as
integers with the capacity beside them, so files and reference solvers see the exact numbers; the environment
divides by the capacity.

An instance file is a NumPy `.npz` with `locs` (B, N, 2) float in [0, 1] and, for CVRP, `demand` (B, N) integers
(depot 0) and `capacity` (B,) integers; `load_instances` checks every array and says what is wrong.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal, Optional

import numpy as np
import torch

Problem = Literal["tsp", "cvrp"]
PROBLEMS: tuple[str, ...] = ("tsp", "cvrp")

CVRP_CAPACITIES = {10: 20, 15: 25, 20: 30, 30: 33, 40: 37, 50: 40, 60: 43, 75: 45, 100: 50, 125: 55, 150: 60, 200: 70}
"""Vehicle capacity by number of customers (Kool et al. 2019 for 10/20/50/100; RL4CO's table for the rest)."""
MIN_DEMAND, MAX_DEMAND = 1, 9
"""Customer demands are integers uniform in {MIN_DEMAND, ..., MAX_DEMAND} (Kool et al. 2019)."""


class InstanceError(ValueError):
    """A malformed instance batch or file; the message says what is wrong."""


@dataclass(frozen=True)
class Instances:
    """A batch of B routing instances of one problem and size."""

    problem: str
    """'tsp' or 'cvrp'."""
    locs: torch.Tensor
    """(B, N, 2) float32 coordinates in [0, 1]; CVRP: node 0 is the depot, N = customers + 1."""
    demand: Optional[torch.Tensor] = None
    """CVRP: (B, N) int64 demands, 0 at the depot; TSP: None."""
    capacity: Optional[torch.Tensor] = None
    """CVRP: (B,) int64 vehicle capacity; TSP: None."""

    def __post_init__(self) -> None:
        check_instances(self)

    @property
    def size(self) -> int:
        """B, the number of instances."""
        return self.locs.shape[0]

    @property
    def num_nodes(self) -> int:
        """N, the nodes of one instance (depot included)."""
        return self.locs.shape[1]

    @property
    def n(self) -> int:
        """The problem size as the literature writes it: nodes for TSP, customers for CVRP."""
        return self.num_nodes - (1 if self.problem == "cvrp" else 0)

    def __getitem__(self, index: slice | torch.Tensor) -> "Instances":
        """The instances at `index` (a slice or an index tensor)."""
        pick = lambda t: None if t is None else t[index]  # noqa: E731
        return Instances(self.problem, self.locs[index], pick(self.demand), pick(self.capacity))

    def with_locs(self, locs: torch.Tensor) -> "Instances":
        """The same instances with other coordinates (the demands follow their nodes)."""
        return Instances(self.problem, locs, self.demand, self.capacity)


def check_instances(inst: Instances) -> None:
    """Raise InstanceError naming the first thing wrong with `inst` (shapes, ranges, a demand over capacity)."""
    if inst.problem not in PROBLEMS:
        raise InstanceError(f"unknown problem {inst.problem!r}; valid: {', '.join(PROBLEMS)}")
    locs = inst.locs
    if locs.dim() != 3 or locs.shape[-1] != 2 or locs.shape[1] < 2:
        raise InstanceError(f"locs must be (B, N>=2, 2), got {tuple(locs.shape)}")
    if not torch.isfinite(locs).all():
        raise InstanceError("locs contain NaN or infinite coordinates")
    if inst.problem == "tsp":
        if inst.demand is not None or inst.capacity is not None:
            raise InstanceError("a TSP instance has no demand or capacity")
        return
    B, N = locs.shape[:2]
    if inst.demand is None or inst.capacity is None:
        raise InstanceError("a CVRP instance needs demand (B, N) and capacity (B,)")
    if tuple(inst.demand.shape) != (B, N) or tuple(inst.capacity.shape) != (B,):
        raise InstanceError(
            f"CVRP shapes: locs {tuple(locs.shape)} needs demand ({B}, {N}) and capacity ({B},); "
            f"got demand {tuple(inst.demand.shape)}, capacity {tuple(inst.capacity.shape)}"
        )
    if inst.demand.dtype.is_floating_point or inst.capacity.dtype.is_floating_point:
        raise InstanceError("CVRP demand and capacity must be integers (the environment normalises them)")
    if (inst.demand[:, 0] != 0).any():
        raise InstanceError("CVRP: node 0 is the depot and must have demand 0")
    if (inst.demand[:, 1:] <= 0).any():
        raise InstanceError("CVRP: every customer demand must be positive")
    over = inst.demand.max(dim=1).values > inst.capacity
    if over.any():
        i = int(over.nonzero()[0, 0])
        raise InstanceError(
            f"CVRP instance {i}: a demand of {int(inst.demand[i].max())} exceeds the vehicle capacity "
            f"{int(inst.capacity[i])}; no route can serve it"
        )


def cvrp_capacity(n: int) -> int:
    """The vehicle capacity for n customers (nearest size in `CVRP_CAPACITIES` when n is not in it).

    >>> cvrp_capacity(20), cvrp_capacity(50), cvrp_capacity(22)
    (30, 40, 30)
    """
    return CVRP_CAPACITIES[min(CVRP_CAPACITIES, key=lambda k: (abs(k - n), k))]


def generate(problem: str, n: int, size: int, seed: int | torch.Generator) -> Instances:
    """`size` instances of `problem` with n nodes (TSP) or n customers (CVRP), drawn from a generator seeded
    with `seed` (the same seed gives the same instances on every machine: torch's CPU generator).

    >>> a, b = generate("cvrp", 20, 3, seed=0), generate("cvrp", 20, 3, seed=0)
    >>> bool((a.locs == b.locs).all()), tuple(a.locs.shape), int(a.capacity[0])
    (True, (3, 21, 2), 30)
    """
    if problem not in PROBLEMS:
        raise InstanceError(f"unknown problem {problem!r}; valid: {', '.join(PROBLEMS)}")
    if n < 2:
        raise InstanceError(f"n must be at least 2, got {n}")
    g = seed if isinstance(seed, torch.Generator) else torch.Generator().manual_seed(int(seed))
    if problem == "tsp":
        return Instances("tsp", torch.rand(size, n, 2, generator=g))
    locs = torch.rand(size, n + 1, 2, generator=g)  # node 0: the depot, uniform like the customers
    demand = torch.randint(MIN_DEMAND, MAX_DEMAND + 1, (size, n), generator=g)
    demand = torch.cat([torch.zeros(size, 1, dtype=torch.long), demand], dim=1)
    capacity = torch.full((size,), cvrp_capacity(n), dtype=torch.long)
    return Instances("cvrp", locs, demand, capacity)


def save_instances(inst: Instances, path: Path) -> None:
    """Write `inst` as an instance file (`.npz`; see the module docstring)."""
    arrays = {"locs": inst.locs.numpy().astype(np.float32)}
    if inst.problem == "cvrp":
        arrays.update(demand=inst.demand.numpy(), capacity=inst.capacity.numpy())
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(path, **arrays)


def load_instances(path: Path, problem: str) -> Instances:
    """Read an instance file of `problem`; a missing, unreadable or malformed file raises InstanceError saying why."""
    path = Path(path)
    if not path.exists():
        raise InstanceError(f"{path}: no such instance file")
    try:
        with np.load(path, allow_pickle=False) as data:
            arrays = {k: data[k] for k in data.files}
    except (OSError, ValueError) as err:
        raise InstanceError(f"{path}: not a readable .npz instance file ({err})") from None
    need = {"locs"} | ({"demand", "capacity"} if problem == "cvrp" else set())
    missing = sorted(need - set(arrays))
    if missing:
        raise InstanceError(f"{path}: missing array(s) {', '.join(missing)} for a {problem} instance file")
    locs = arrays["locs"]
    if locs.dtype.kind != "f":
        raise InstanceError(f"{path}: locs must be floating point, got {locs.dtype}")
    try:
        if problem == "tsp":
            return Instances("tsp", torch.from_numpy(locs.astype(np.float32)))
        demand, capacity = arrays["demand"], arrays["capacity"]
        if demand.dtype.kind not in "iu" or capacity.dtype.kind not in "iu":
            raise InstanceError(f"{path}: demand and capacity must be integer arrays")
        return Instances(
            "cvrp",
            torch.from_numpy(locs.astype(np.float32)),
            torch.from_numpy(demand.astype(np.int64)),
            torch.from_numpy(capacity.astype(np.int64)),
        )
    except InstanceError as err:
        raise InstanceError(f"{path}: {err}") from None


def dihedral8(locs: torch.Tensor) -> torch.Tensor:
    """The 8 symmetries of the unit square applied to coordinates (B, N, 2) -> (8B, N, 2), identity first, each
    block of B in the order of POMO's instance augmentation (Kwon et al. 2020, arXiv:2010.16011, section 4.2):
    (x, y), (y, x), (x, 1-y), (y, 1-x), (1-x, y), (1-y, x), (1-x, 1-y), (1-y, 1-x). Tour lengths are invariant.
    """
    x, y = locs[..., :1], locs[..., 1:]
    variants = [(x, y), (y, x), (x, 1 - y), (y, 1 - x), (1 - x, y), (1 - y, x), (1 - x, 1 - y), (1 - y, 1 - x)]
    return torch.cat([torch.cat(v, dim=-1) for v in variants], dim=0)


def augment(inst: Instances, folds: int) -> Instances:
    """`folds` (1 or 8) copies of every instance under the square's symmetries, (folds * B) instances, fold-major."""
    if folds == 1:
        return inst
    if folds != 8:
        raise InstanceError(f"augmentation folds must be 1 or 8, got {folds}")
    rep = lambda t: None if t is None else t.repeat(8, *([1] * (t.dim() - 1)))  # noqa: E731
    return Instances(inst.problem, dihedral8(inst.locs), rep(inst.demand), rep(inst.capacity))
