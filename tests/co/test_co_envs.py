"""The routing environments against hand-computed tours, masks and rewards."""

from __future__ import annotations

import math

import pytest
import torch

from ascent.co.envs import CVRPEnv, TSPEnv, check_solutions, solution_lengths, tour_length
from ascent.co.problems import Instances

SQUARE = torch.tensor([[[0.0, 0.0], [1.0, 0.0], [1.0, 1.0], [0.0, 1.0]]])  # (1, 4, 2)


def tsp_square() -> Instances:
    return Instances("tsp", SQUARE.clone())


def cvrp_two_routes() -> Instances:
    """Depot at the origin, customers at (1, 0) and (0, 1) with demand 2 each, capacity 3: two routes of length 2."""
    locs = torch.tensor([[[0.0, 0.0], [1.0, 0.0], [0.0, 1.0]]])
    return Instances("cvrp", locs, torch.tensor([[0, 2, 2]]), torch.tensor([3]))


def test_tsp_rewards_sum_to_minus_the_hand_computed_tour_length():
    env = TSPEnv(tsp_square())
    for tour, expected in [([0, 1, 2, 3], 4.0), ([0, 2, 1, 3], 2.0 + 2.0 * math.sqrt(2.0)), ([3, 2, 1, 0], 4.0)]:
        state, rewards = env.reset(1), []
        for a in tour:
            out = env.step(state, torch.tensor([[a]]))
            rewards.append(float(out.reward))
            state = out.state
        assert bool(state.done.all())
        assert sum(rewards) == pytest.approx(-expected, abs=1e-6)
        assert float(state.length) == pytest.approx(expected, abs=1e-6)
        assert float(tour_length(tsp_square(), torch.tensor([tour]))) == pytest.approx(expected, abs=1e-6)
    # the closing edge is paid on the last step: 0 -> 1 -> 2 -> 3 pays 1, 1, 1 + 1
    state = env.reset(1)
    rewards = []
    for a in [0, 1, 2, 3]:
        out = env.step(state, torch.tensor([[a]]))
        rewards.append(round(float(out.reward), 6))
        state = out.state
    assert rewards == [0.0, -1.0, -1.0, -2.0]


def test_tsp_mask_removes_visited_nodes_and_rejects_a_revisit():
    env = TSPEnv(tsp_square())
    state = env.step(env.reset(2), torch.tensor([[0, 2]])).state
    assert state.mask.tolist() == [[[False, True, True, True], [True, True, False, True]]]
    with pytest.raises(ValueError, match="outside the feasible mask"):
        env.step(state, torch.tensor([[0, 1]]))


def test_cvrp_capacity_forces_a_depot_return_and_the_length_is_hand_computed():
    inst = cvrp_two_routes()
    env = CVRPEnv(inst)
    state = env.reset(1)
    # at the depot at the start: both customers fit (2/3 <= 1), the depot is masked (customers remain)
    assert state.mask.tolist() == [[[False, True, True]]]
    state = env.step(state, torch.tensor([[1]])).state
    assert float(state.load) == pytest.approx(1 / 3)
    # customer 2 (2/3) no longer fits in 1/3: only the depot is allowed
    assert state.mask.tolist() == [[[True, False, False]]]
    state = env.step(state, torch.tensor([[0]])).state
    assert float(state.load) == 1.0 and state.mask.tolist() == [[[False, False, True]]]
    state = env.step(state, torch.tensor([[2]])).state
    assert not bool(state.done) and state.mask.tolist() == [[[True, False, False]]]
    out = env.step(state, torch.tensor([[0]]))
    assert bool(out.done) and float(out.state.length) == pytest.approx(4.0)
    # once done only the depot stays open (zero-length padding steps)
    assert out.state.mask.tolist() == [[[True, False, False]]]
    assert float(tour_length(inst, torch.tensor([[1, 0, 2, 0, 0]]))) == pytest.approx(4.0)


def test_check_solutions_rejects_a_repeat_and_an_overloaded_route():
    check_solutions(tsp_square(), torch.tensor([[2, 0, 1, 3]]))
    with pytest.raises(ValueError, match="permutation"):
        check_solutions(tsp_square(), torch.tensor([[0, 1, 1, 3]]))
    check_solutions(cvrp_two_routes(), torch.tensor([[1, 0, 2, 0]]))
    with pytest.raises(ValueError, match="capacity"):
        check_solutions(cvrp_two_routes(), torch.tensor([[1, 2, 0, 0]]))


def test_replaying_a_tour_through_the_env_gives_the_direct_length():
    torch.manual_seed(0)
    inst = Instances("tsp", torch.rand(3, 7, 2))
    tours = torch.stack([torch.randperm(7) for _ in range(3)]).unsqueeze(1)  # (3, 1, 7)
    assert torch.allclose(solution_lengths(inst, tours), tour_length(inst, tours), atol=1e-5)
