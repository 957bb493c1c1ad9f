"""The reference solvers reach brute-force optima on tiny instances; the shipped test sets are what the generator
makes and their reference tours are feasible and measured exactly."""

from __future__ import annotations

import itertools

import pytest
import torch

from ascent.co.envs import check_solutions, tour_length
from ascent.co.problems import InstanceError, Instances, generate
from ascent.co.solvers import TEST_SEED, gap, load_test_set, reference


def brute_force_tsp(inst: Instances) -> float:
    n = inst.num_nodes
    tours = torch.tensor([(0, *p) for p in itertools.permutations(range(1, n))])
    return float(tour_length(inst, tours.unsqueeze(0)).min())


def brute_force_cvrp(inst: Instances) -> float:
    """Every order of the customers with every choice of depot returns between them, the feasible ones' minimum."""
    customers, cap, best = range(1, inst.num_nodes), int(inst.capacity[0]), float("inf")
    for order in itertools.permutations(customers):
        for cuts in itertools.product([False, True], repeat=len(order) - 1):
            tour = [order[0]]
            for c, cut in zip(order[1:], cuts):
                tour += [0, c] if cut else [c]
            load, ok = 0, True
            for a in tour:
                load = 0 if a == 0 else load + int(inst.demand[0, a])
                ok &= load <= cap
            if ok:
                best = min(best, float(tour_length(inst, torch.tensor([tour]))))
    return best


def test_lkh_and_hgs_find_the_brute_force_optimum():
    for seed in range(3):
        tsp = generate("tsp", 7, 1, seed=seed)
        cost, tours, _ = reference(tsp)
        assert float(cost) == pytest.approx(brute_force_tsp(tsp), abs=1e-4)
        cvrp = generate("cvrp", 5, 1, seed=seed)
        cvrp = Instances("cvrp", cvrp.locs, cvrp.demand, torch.tensor([12]))  # tight: several routes
        cost, tours, _ = reference(cvrp, iterations=200)
        check_solutions(cvrp, tours)
        assert float(cost) == pytest.approx(brute_force_cvrp(cvrp), abs=1e-4)


@pytest.mark.parametrize(("problem", "mean_ref"), [("tsp", 3.83), ("cvrp", 6.1)])
def test_shipped_test_sets_are_the_generator_and_their_tours_check_out(problem, mean_ref):
    ts = load_test_set(problem, 20)
    assert ts.instances.size == 1000
    again = generate(problem, 20, 1000, seed=TEST_SEED)
    assert torch.equal(ts.instances.locs, again.locs)
    check_solutions(ts.instances[:100], ts.ref_tours[:100])
    assert torch.allclose(tour_length(ts.instances, ts.ref_tours, dtype=torch.float64), ts.ref_cost, atol=1e-9)
    # the published means on 10,000 instances: TSP20 3.83 (Concorde), CVRP20 6.10-6.13 (LKH/HGS)
    assert float(ts.ref_cost.mean()) == pytest.approx(mean_ref, abs=0.06)
    assert gap(ts.ref_cost, ts.ref_cost) == 0.0


def test_a_missing_test_set_says_how_to_build_it(tmp_path):
    with pytest.raises(InstanceError, match="python -m ascent.co.solvers tsp 13"):
        load_test_set("tsp", 13, cache_dir=tmp_path)
