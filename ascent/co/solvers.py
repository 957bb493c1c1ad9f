"""Reference solutions from real solvers, and the fixed test sets they are cached with.

- TSP: LKH-3 (Helsgaun 2017) through `elkai` (`pip install 'ascent[co]'`); on 20-100 nodes its tours are optimal or
  within rounding of optimal (Kool et al. 2019, arXiv:1803.08475, table 1: LKH3 = Concorde = Gurobi on TSP20/50).
- CVRP: HGS-CVRP (Vidal 2022, arXiv:2012.10384) as PyVRP implements it (Wouda, Lan & Kool 2024, arXiv:2403.13795),
  `pyvrp`; near-optimal on 20-100 customers within the run's iteration budget.

Both solvers work on integer distances, so coordinates are scaled by `SCALE` and rounded for the search; the cost
reported is always the returned tour's exact Euclidean length (`ascent.co.envs.tour_length`), so a neural tour and a
reference tour are measured by the same function.

A test set is `generate(problem, n, size, seed=TEST_SEED)` plus its reference tours and costs, written once to
`ascent/co/data/{problem}{n}_test.npz` (shipped for TSP20 and CVRP20) or to `cache_dir` for other sizes.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import numpy as np
import torch

from ascent.co.envs import tour_length
from ascent.co.problems import InstanceError, Instances, generate, load_instances, save_instances

SCALE = 100_000
"""Coordinates are multiplied by this and distances rounded to integers for the solvers (error <= 1e-5 per edge)."""
TEST_SEED = 1234
"""The seed of every fixed test set (training draws from seeds below 2**31 that the trainer derives from its own)."""
SHIPPED = Path(__file__).parent / "data"
"""Where the shipped test sets live."""


@dataclass(frozen=True)
class EvalSet:
    """Fixed instances with a reference solver's tours."""

    instances: Instances
    ref_cost: torch.Tensor
    """(B,) float64 exact lengths of the reference tours."""
    ref_tours: torch.Tensor
    """(B, T) int64 the reference tours as action sequences (TSP: a permutation; CVRP: customers and depot visits,
    padded with 0 = depot), the environment's encoding."""
    solver: str
    """Which solver and budget produced them."""


def _import(name: str):
    try:
        return __import__(name)
    except ImportError:
        raise ImportError(f"the reference solver needs `{name}`: pip install 'ascent[co]'") from None


def solve_tsp(locs: np.ndarray, runs: int = 10) -> list[int]:
    """An LKH-3 tour (elkai) of one TSP instance `locs` (N, 2): a permutation of 0..N-1 starting at 0."""
    elkai = _import("elkai")
    d = np.rint(np.linalg.norm(locs[:, None] - locs[None], axis=-1) * SCALE).astype(int)
    tour = elkai.DistanceMatrix(d.tolist()).solve_tsp(runs=runs)
    tour = tour[:-1] if len(tour) == len(locs) + 1 else tour  # elkai closes the tour at node 0
    return [int(i) for i in tour]


def solve_cvrp(locs: np.ndarray, demand: np.ndarray, capacity: int, iterations: int = 1000, seed: int = 0) -> list[int]:
    """An HGS tour (PyVRP) of one CVRP instance: the routes joined as actions, each route ending with the depot 0."""
    pyvrp = _import("pyvrp")
    from pyvrp.stop import MaxIterations

    n = len(locs)
    m = pyvrp.Model()
    m.add_vehicle_type(num_available=n - 1, capacity=int(capacity))
    nodes = [m.add_depot(m.add_location(x=0, y=0))] + [
        m.add_client(m.add_location(x=0, y=0), delivery=int(demand[i])) for i in range(1, n)
    ]
    locations = m.locations
    d = np.rint(np.linalg.norm(locs[:, None] - locs[None], axis=-1) * SCALE).astype(int)
    for i in range(n):
        for j in range(n):
            if i != j:
                m.add_edge(locations[i], locations[j], distance=int(d[i, j]))
    del nodes
    result = m.solve(stop=MaxIterations(iterations), seed=seed, display=False)
    if not result.is_feasible():
        raise RuntimeError("PyVRP returned an infeasible CVRP solution")
    actions: list[int] = []
    for route in result.best.routes():
        actions += [int(a.idx) + 1 for a in route.schedule() if a.is_client()] + [0]  # client k is node k + 1
    return actions


def reference(inst: Instances, iterations: int = 1000, log_every: int = 0) -> tuple[torch.Tensor, torch.Tensor, str]:
    """(costs (B,), tours (B, T), solver description) of a reference solver on every instance of `inst`."""
    tours: list[list[int]] = []
    t0 = time.perf_counter()
    for i in range(inst.size):
        locs = inst.locs[i].double().numpy()
        if inst.problem == "tsp":
            tours.append(solve_tsp(locs))
        else:
            tours.append(solve_cvrp(locs, inst.demand[i].numpy(), int(inst.capacity[i]), iterations, seed=i))
        if log_every and (i + 1) % log_every == 0:
            print(f"{inst.problem}: {i + 1}/{inst.size} solved in {time.perf_counter() - t0:.0f}s", flush=True)
    width = max(len(t) for t in tours)
    padded = torch.tensor([t + [0] * (width - len(t)) for t in tours], dtype=torch.long)
    costs = tour_length(inst, padded, dtype=torch.float64)
    solver = "elkai (LKH-3), runs=10" if inst.problem == "tsp" else f"pyvrp (HGS), {iterations} iterations"
    return costs, padded, solver


def test_set_path(problem: str, n: int, cache_dir: Optional[Path] = None) -> Path:
    """Where the test set of `problem` size n is read from: the shipped file, else `cache_dir`."""
    shipped = SHIPPED / f"{problem}{n}_test.npz"
    if shipped.exists() or cache_dir is None:
        return shipped
    return Path(cache_dir) / f"{problem}{n}_test.npz"


def build_test_set(problem: str, n: int, size: int, path: Path, iterations: int = 1000, log_every: int = 0) -> EvalSet:
    """Generate the fixed test set (seed TEST_SEED), solve it with the reference solver, write it to `path`."""
    inst = generate(problem, n, size, seed=TEST_SEED)
    costs, tours, solver = reference(inst, iterations, log_every)
    save_instances(inst, path)
    with np.load(path) as data:
        arrays = {k: data[k] for k in data.files}
    np.savez_compressed(path, **arrays, ref_cost=costs.numpy(), ref_tours=tours.numpy(), solver=np.array(solver))
    return EvalSet(inst, costs, tours, solver)


def load_test_set(problem: str, n: int, cache_dir: Optional[Path] = None, size: Optional[int] = None) -> EvalSet:
    """The fixed test set of `problem` size n with its reference solutions (the first `size` instances if given)."""
    path = test_set_path(problem, n, cache_dir)
    if not path.exists():
        raise InstanceError(
            f"no test set for {problem}{n} at {path}: build it once with "
            f"`python -m ascent.co.solvers {problem} {n} --out {path}` (needs pip install 'ascent[co]')"
        )
    inst = load_instances(path, problem)
    with np.load(path, allow_pickle=False) as data:
        if "ref_cost" not in data.files:
            raise InstanceError(f"{path}: an instance file without reference solutions (ref_cost, ref_tours)")
        ref_cost, ref_tours, solver = data["ref_cost"], data["ref_tours"], str(data["solver"])
    ts = EvalSet(inst, torch.from_numpy(ref_cost), torch.from_numpy(ref_tours).long(), solver)
    if size is not None:
        ts = EvalSet(inst[:size], ts.ref_cost[:size], ts.ref_tours[:size], solver)
    return ts


def gap(costs: torch.Tensor, ref_cost: torch.Tensor) -> float:
    """Mean optimality gap in percent, 100 * mean(cost / ref - 1), the figure RL4CO and Kool et al. report."""
    return float(100.0 * (costs.double() / ref_cost.double() - 1.0).mean())


def main(argv: Optional[list[str]] = None) -> None:
    """`python -m ascent.co.solvers tsp 20 --size 1000 --out PATH`: build and write a test set."""
    import argparse

    ap = argparse.ArgumentParser(description=main.__doc__)
    ap.add_argument("problem", choices=["tsp", "cvrp"])
    ap.add_argument("n", type=int)
    ap.add_argument("--size", type=int, default=1000)
    ap.add_argument("--iterations", type=int, default=1000, help="PyVRP iterations per CVRP instance")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args(argv)
    out = args.out or SHIPPED / f"{args.problem}{args.n}_test.npz"
    ts = build_test_set(args.problem, args.n, args.size, out, args.iterations, log_every=50)
    print(f"{out}: {ts.instances.size} instances, mean reference cost {float(ts.ref_cost.mean()):.4f} ({ts.solver})")


if __name__ == "__main__":
    main()
