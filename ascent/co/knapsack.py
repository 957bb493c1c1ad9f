"""The 0-1 knapsack problem: typed instances, a seeded generator with POMO's distribution, a batched tensor
environment, an exact reference solver (HiGHS MILP through scipy) and an instance file format with clear errors.

Distribution (Kwon et al. 2020, "POMO", arXiv:2010.16011, section 6.3 and its code `KnapsackProblemDef.py`): n items,
weights and values uniform in [0, 1]; capacity 12.5 for 50 items and 25 for 100 and 200. ascent extends the table
as `min(n / 4, 25)` (the same three values), documented in `knapsack_capacity`.

The environment follows POMO's knapsack MDP: a step packs one item that is not packed yet and fits the remaining
capacity; the reward is the item's value, so an episode's return is the packed value. When nothing fits the
solution is done and its only feasible action is the no-op `n` (reward 0), so a batch runs until its longest
solution ends (like the CVRP environment's depot step).

An instance file is a NumPy `.npz` with `weights` (B, n), `values` (B, n) float and `capacity` (B,) float;
`load_knapsack` checks every array and says what is wrong (a negative weight, an item heavier than the knapsack
is fine: it can never be packed).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from ascent import papers
from ascent.co.problems import InstanceError
from ascent.registry import Registry

CO_PROBLEMS: Registry = Registry("co problem")
"""Instance generators of the problems beyond routing (`fn(n, size, seed) -> instances`)."""


class KnapsackError(InstanceError):
    """A malformed knapsack instance batch or file; the message says what is wrong."""


@dataclass(frozen=True)
class KnapsackInstances:
    """A batch of B knapsack instances with n items each."""

    weights: torch.Tensor
    """(B, n) float item weights, >= 0."""
    values: torch.Tensor
    """(B, n) float item values, >= 0."""
    capacity: torch.Tensor
    """(B,) float knapsack capacity, > 0."""

    def __post_init__(self) -> None:
        check_knapsack(self)

    @property
    def size(self) -> int:
        """B, the number of instances."""
        return self.weights.shape[0]

    @property
    def n(self) -> int:
        """Items per instance."""
        return self.weights.shape[1]

    def __getitem__(self, index: slice | torch.Tensor) -> "KnapsackInstances":
        return KnapsackInstances(self.weights[index], self.values[index], self.capacity[index])


def check_knapsack(inst: KnapsackInstances) -> None:
    """Raise KnapsackError naming the first thing wrong with `inst` (shapes, dtypes, a negative or NaN number)."""
    w, v, c = inst.weights, inst.values, inst.capacity
    if w.dim() != 2 or w.shape[1] < 1:
        raise KnapsackError(f"weights must be (B, n>=1), got {tuple(w.shape)}")
    if tuple(v.shape) != tuple(w.shape) or tuple(c.shape) != (w.shape[0],):
        raise KnapsackError(
            f"knapsack shapes: weights {tuple(w.shape)} needs values {tuple(w.shape)} and capacity ({w.shape[0]},); "
            f"got values {tuple(v.shape)}, capacity {tuple(c.shape)}"
        )
    for name, t in (("weights", w), ("values", v), ("capacity", c)):
        if not t.dtype.is_floating_point:
            raise KnapsackError(f"{name} must be floating point, got {t.dtype}")
        if not torch.isfinite(t).all():
            raise KnapsackError(f"{name} contain NaN or infinite numbers")
    for name, t in (("weight", w), ("value", v)):
        if (t < 0).any():
            i, j = (int(k) for k in (t < 0).nonzero()[0])
            raise KnapsackError(f"knapsack instance {i}: item {j} has a negative {name} ({float(t[i, j]):g})")
    if (c <= 0).any():
        i = int((c <= 0).nonzero()[0, 0])
        raise KnapsackError(f"knapsack instance {i}: the capacity must be positive, got {float(c[i]):g}")


def knapsack_capacity(n: int) -> float:
    """POMO's capacity for n items: 12.5 (n = 50), 25 (n = 100, 200); `min(n / 4, 25)` for every n.

    >>> knapsack_capacity(50), knapsack_capacity(100), knapsack_capacity(200), knapsack_capacity(20)
    (12.5, 25.0, 25.0, 5.0)
    """
    return min(n / 4.0, 25.0)


@CO_PROBLEMS.register(
    "knapsack",
    paper=papers.POMO,
    fidelity="faithful",
    departures=("capacities for sizes other than 50/100/200 extend POMO's table as min(n/4, 25) (POMO has none)",),
)
def generate_knapsack(n: int, size: int, seed: int | torch.Generator) -> KnapsackInstances:
    """`size` instances of n items (POMO's distribution: weights and values uniform in [0, 1], capacity
    `knapsack_capacity(n)`), drawn from torch's CPU generator seeded with `seed` (the same on every machine).

    >>> a, b = generate_knapsack(20, 3, seed=0), generate_knapsack(20, 3, seed=0)
    >>> bool((a.weights == b.weights).all()), tuple(a.values.shape), float(a.capacity[0])
    (True, (3, 20), 5.0)
    """
    if n < 1 or size < 1:
        raise KnapsackError(f"n and size must be >= 1, got n={n}, size={size}")
    g = seed if isinstance(seed, torch.Generator) else torch.Generator().manual_seed(int(seed))
    weights = torch.rand(size, n, generator=g)
    values = torch.rand(size, n, generator=g)
    return KnapsackInstances(weights, values, torch.full((size,), knapsack_capacity(n)))


# ------------------------------------------------------------------------------------------------ environment


@dataclass(frozen=True)
class KnapsackState:
    """The state of S solutions of each of B instances."""

    packed: torch.Tensor
    """(B, S, n) bool items in the knapsack."""
    room: torch.Tensor
    """(B, S) float remaining capacity."""
    value: torch.Tensor
    """(B, S) float value packed so far."""
    done: torch.Tensor
    """(B, S) bool nothing more fits."""
    mask: torch.Tensor
    """(B, S, n + 1) bool feasible actions: items not packed that fit; the no-op n only when done."""
    steps: int = 0


@dataclass(frozen=True)
class KnapsackStep:
    """What one step returns."""

    state: KnapsackState
    reward: torch.Tensor
    """(B, S) float the value of the item packed (0 for the no-op)."""
    done: torch.Tensor
    """(B, S) bool done after this step."""


class KnapsackEnv:
    """POMO's knapsack MDP over B instances and S parallel solutions each (module docstring)."""

    def __init__(self, inst: KnapsackInstances) -> None:
        self.inst = inst

    def _finish(self, packed: torch.Tensor, room: torch.Tensor, value: torch.Tensor, steps: int) -> KnapsackState:
        fits = ~packed & (self.inst.weights.unsqueeze(1) <= room.unsqueeze(-1) + 1e-9)  # (B, S, n)
        done = ~fits.any(dim=-1)  # (B, S)
        mask = torch.cat([fits, done.unsqueeze(-1)], dim=-1)  # (B, S, n + 1)
        return KnapsackState(packed, room, value, done, mask, steps)

    def reset(self, solutions: int = 1) -> KnapsackState:
        """S = `solutions` empty knapsacks per instance."""
        B, n = self.inst.weights.shape
        packed = torch.zeros(B, solutions, n, dtype=torch.bool)
        room = self.inst.capacity.unsqueeze(1).expand(B, solutions).clone()
        return self._finish(packed, room, torch.zeros(B, solutions), 0)

    def step(self, state: KnapsackState, action: torch.Tensor) -> KnapsackStep:
        """Pack item `action` (B, S) (or the no-op n); an infeasible action raises ValueError."""
        B, S, n1 = state.mask.shape
        if action.shape != (B, S):
            raise ValueError(f"action must be ({B}, {S}), got {tuple(action.shape)}")
        if not state.mask.gather(-1, action.unsqueeze(-1)).all():
            raise ValueError("infeasible knapsack action: an item already packed, one that does not fit, or the no-op")
        item = action.clamp(max=n1 - 2)  # (B, S); the no-op's value is masked below
        real = action < n1 - 1
        w = self.inst.weights.gather(1, item) * real  # (B, S)
        v = self.inst.values.gather(1, item) * real
        packed = state.packed | (torch.nn.functional.one_hot(item, n1 - 1).bool() & real.unsqueeze(-1))
        nxt = self._finish(packed, state.room - w, state.value + v, state.steps + 1)
        return KnapsackStep(nxt, v, nxt.done)


def greedy_ratio(inst: KnapsackInstances) -> torch.Tensor:
    """The classic greedy heuristic's value (items by value/weight, each packed if it still fits), (B,): a baseline."""
    order = torch.argsort(inst.values / inst.weights.clamp(min=1e-12), dim=1, descending=True)  # (B, n)
    w, v = inst.weights.gather(1, order), inst.values.gather(1, order)
    room, value = inst.capacity.clone(), torch.zeros(inst.size)
    for k in range(inst.n):
        fits = w[:, k] <= room + 1e-9  # (B,)
        room = room - w[:, k] * fits
        value = value + v[:, k] * fits
    return value


# ------------------------------------------------------------------------------------------- reference solver


def solve_knapsack(weights: np.ndarray, values: np.ndarray, capacity: float, time_limit_s: float = 30.0):
    """The optimal packing of one instance by HiGHS's MILP solver (scipy.optimize.milp): (value, 0/1 array (n,)).
    The value is recomputed from the chosen items, so it is exactly the packed value; raises RuntimeError if
    HiGHS does not prove optimality within `time_limit_s`.

    >>> solve_knapsack(np.array([3.0, 4.0, 5.0]), np.array([4.0, 5.0, 6.0]), 8.0)[0]
    10.0
    """
    from scipy.optimize import Bounds, LinearConstraint, milp

    n = len(weights)
    res = milp(
        c=-np.asarray(values, dtype=np.float64),
        constraints=LinearConstraint(np.asarray(weights, dtype=np.float64)[None, :], -np.inf, float(capacity)),
        integrality=np.ones(n),
        bounds=Bounds(0, 1),
        options={"time_limit": float(time_limit_s), "mip_rel_gap": 0.0},
    )
    if res.status != 0 or res.x is None:
        raise RuntimeError(f"HiGHS did not solve the knapsack to optimality: {res.message}")
    x = np.round(res.x).astype(np.int64)
    if float(weights @ x) > capacity + 1e-9:  # a rounding of a fractional incumbent would overflow
        raise RuntimeError("HiGHS returned a packing over the capacity")
    return float(values @ x), x


def reference_values(inst: KnapsackInstances) -> tuple[torch.Tensor, torch.Tensor]:
    """Optimal values (B,) float64 and packings (B, n) bool of every instance (HiGHS)."""
    vals, packs = [], []
    w, v, c = inst.weights.double().numpy(), inst.values.double().numpy(), inst.capacity.double().numpy()
    for i in range(inst.size):
        value, x = solve_knapsack(w[i], v[i], float(c[i]))
        vals.append(value)
        packs.append(x.astype(bool))
    return torch.tensor(vals, dtype=torch.float64), torch.from_numpy(np.stack(packs))


# ------------------------------------------------------------------------------------------------ files


def save_knapsack(inst: KnapsackInstances, path: Path, **extra: np.ndarray) -> None:
    """Write `inst` (and `extra` arrays, e.g. reference values) as an instance file (`.npz`)."""
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(
        path,
        weights=inst.weights.numpy().astype(np.float32),
        values=inst.values.numpy().astype(np.float32),
        capacity=inst.capacity.numpy().astype(np.float32),
        **extra,
    )


def load_knapsack(path: Path) -> KnapsackInstances:
    """Read a knapsack instance file; a missing, unreadable or malformed file raises KnapsackError saying why."""
    path = Path(path)
    if not path.exists():
        raise KnapsackError(f"{path}: no such instance file")
    try:
        with np.load(path, allow_pickle=False) as data:
            arrays = {k: data[k] for k in data.files}
    except (OSError, ValueError) as err:
        raise KnapsackError(f"{path}: not a readable .npz instance file ({err})") from None
    missing = sorted({"weights", "values", "capacity"} - set(arrays))
    if missing:
        raise KnapsackError(f"{path}: missing array(s) {', '.join(missing)} for a knapsack instance file")
    for name in ("weights", "values", "capacity"):
        if arrays[name].dtype.kind not in "fiu":
            raise KnapsackError(f"{path}: {name} must be numbers, got {arrays[name].dtype}")
    try:
        return KnapsackInstances(
            *(torch.from_numpy(arrays[k].astype(np.float32)) for k in ("weights", "values", "capacity"))
        )
    except KnapsackError as err:
        raise KnapsackError(f"{path}: {err}") from None


def knapsack_test_set(n: int = 50, size: int = 1000, seed: int = 1234) -> tuple[KnapsackInstances, torch.Tensor]:
    """The fixed test set `generate_knapsack(n, size, seed)` with its optimal values: read from the shipped
    `ascent/co/data/kp{n}_test.npz` when it matches, else solved now (HiGHS, about a millisecond an instance)."""
    path = Path(__file__).parent / "data" / f"kp{n}_test.npz"
    inst = generate_knapsack(n, size, seed)
    if path.exists():
        shipped = load_knapsack(path)
        with np.load(path) as data:
            ref = torch.from_numpy(data["ref_value"])
        if shipped.size == size and torch.equal(shipped.weights, inst.weights):
            return shipped, ref
    return inst, reference_values(inst)[0]


if __name__ == "__main__":  # python -m ascent.co.knapsack: write the shipped KP50 test set
    inst = generate_knapsack(50, 1000, 1234)
    ref, packs = reference_values(inst)
    out = Path(__file__).parent / "data" / "kp50_test.npz"
    save_knapsack(inst, out, ref_value=ref.numpy(), ref_packing=packs.numpy())
    print(f"{out}: 1000 KP50 instances, mean optimal value {float(ref.mean()):.4f}")
