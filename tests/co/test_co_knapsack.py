"""The knapsack problem (ascent/co/knapsack.py): POMO's distribution, the environment against hand-computed packings,
HiGHS against brute force, the shipped test set, and a clear error for each malformed instance."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch

from ascent.co.knapsack import (
    KnapsackEnv,
    KnapsackError,
    KnapsackInstances,
    generate_knapsack,
    greedy_ratio,
    knapsack_test_set,
    load_knapsack,
    reference_values,
    save_knapsack,
    solve_knapsack,
)


def _brute(w: np.ndarray, v: np.ndarray, c: float) -> float:
    best = 0.0
    for bits in itertools.product([0, 1], repeat=len(w)):
        x = np.array(bits)
        if w @ x <= c + 1e-12:
            best = max(best, float(v @ x))
    return best


def test_generator_is_seeded_and_follows_pomo():
    a, b, c = generate_knapsack(50, 400, seed=1), generate_knapsack(50, 400, seed=1), generate_knapsack(50, 400, 2)
    assert torch.equal(a.weights, b.weights) and not torch.equal(a.weights, c.weights)
    assert 0 <= float(a.weights.min()) and float(a.values.max()) <= 1
    assert abs(float(a.weights.mean()) - 0.5) < 0.02 and abs(float(a.values.mean()) - 0.5) < 0.02
    assert (a.capacity == 12.5).all() and (generate_knapsack(100, 1, 0).capacity == 25).all()


def test_highs_matches_brute_force():
    inst = generate_knapsack(10, 6, seed=5)
    inst = KnapsackInstances(inst.weights, inst.values, torch.full((6,), 2.5))  # a binding capacity
    ref, packs = reference_values(inst)
    for i in range(6):
        w, v = inst.weights[i].double().numpy(), inst.values[i].double().numpy()
        assert float(ref[i]) == pytest.approx(_brute(w, v, 2.5), abs=1e-9)
        assert float(w @ packs[i].numpy()) <= 2.5 + 1e-9
    assert solve_knapsack(np.array([3.0, 4.0, 5.0]), np.array([4.0, 5.0, 6.0]), 8.0)[1].tolist() == [1, 0, 1]


def test_environment_packs_by_hand():
    inst = KnapsackInstances(torch.tensor([[3.0, 4.0, 5.0]]), torch.tensor([[4.0, 5.0, 6.0]]), torch.tensor([8.0]))
    env = KnapsackEnv(inst)
    s = env.reset(solutions=2)
    assert s.mask[0, 0].tolist() == [True, True, True, False]  # all fit; the no-op only when done
    step = env.step(s, torch.tensor([[0, 2]]))  # solution 0 packs item 0, solution 1 packs item 2
    assert step.reward.tolist() == [[4.0, 6.0]] and step.state.room.tolist() == [[5.0, 3.0]]
    assert step.state.mask[0, 0].tolist() == [False, True, True, False]  # 4 and 5 fit in 5
    assert step.state.mask[0, 1].tolist() == [True, False, False, False]  # only the 3 fits in 3
    step = env.step(step.state, torch.tensor([[2, 0]]))
    assert step.reward.tolist() == [[6.0, 4.0]] and step.done.tolist() == [[True, True]]
    assert step.state.value.tolist() == [[10.0, 10.0]] and step.state.mask[0, :, 3].all()
    last = env.step(step.state, torch.tensor([[3, 3]]))  # the no-op: nothing changes, reward 0
    assert last.reward.tolist() == [[0.0, 0.0]] and last.state.value.tolist() == [[10.0, 10.0]]
    with pytest.raises(ValueError, match="infeasible knapsack action"):
        env.step(s, torch.tensor([[3, 0]]))  # the no-op before the knapsack is full


def test_random_rollouts_are_feasible_and_below_the_optimum():
    inst = generate_knapsack(20, 16, seed=0)
    ref, _ = reference_values(inst)
    env, g = KnapsackEnv(inst), torch.Generator().manual_seed(0)
    s, total = env.reset(8), torch.zeros(16, 8)
    while not s.done.all():
        probs = s.mask.float()
        action = torch.multinomial(probs.view(-1, probs.shape[-1]), 1, generator=g).view(16, 8)
        step = env.step(s, action)
        s, total = step.state, total + step.reward
    packed_w = (s.packed.float() * inst.weights.unsqueeze(1)).sum(-1)
    assert (packed_w <= inst.capacity.unsqueeze(1) + 1e-6).all()
    assert torch.allclose(total, s.value) and (total.double() <= ref.unsqueeze(1) + 1e-6).all()
    greedy = greedy_ratio(inst).double()
    assert (greedy <= ref + 1e-5).all() and float((greedy / ref).mean()) > 0.9  # greedy is near-optimal here


def test_shipped_kp50_test_set():
    inst, ref = knapsack_test_set(50, 1000)
    assert inst.size == 1000 and torch.equal(inst.weights, generate_knapsack(50, 1000, 1234).weights)
    assert float(ref.mean()) == pytest.approx(20.12, abs=0.02)  # POMO's table 3: KP50 optimum 20.127
    with np.load("ascent/co/data/kp50_test.npz") as data:
        packing = torch.from_numpy(data["ref_packing"])
    assert torch.allclose((packing.float() * inst.values).sum(1).double(), ref, atol=1e-4)
    assert ((packing.float() * inst.weights).sum(1) <= inst.capacity + 1e-5).all()


@pytest.mark.parametrize(
    "weights, values, capacity, message",
    [
        ([[0.5, -0.1]], [[0.2, 0.3]], [1.0], r"instance 0: item 1 has a negative weight \(-0.1\)"),
        ([[0.5, 0.1]], [[-0.2, 0.3]], [1.0], "item 0 has a negative value"),
        ([[0.5, 0.1]], [[0.2, 0.3]], [0.0], "the capacity must be positive"),
        ([[0.5, float("nan")]], [[0.2, 0.3]], [1.0], "weights contain NaN"),
        ([[0.5, 0.1]], [[0.2, 0.3, 0.1]], [1.0], "knapsack shapes"),
    ],
)
def test_malformed_instances_get_clear_errors(weights, values, capacity, message):
    with pytest.raises(KnapsackError, match=message):
        KnapsackInstances(torch.tensor(weights), torch.tensor(values), torch.tensor(capacity))


def test_instance_files(tmp_path):
    inst = generate_knapsack(5, 3, seed=0)
    save_knapsack(inst, tmp_path / "k.npz")
    assert torch.equal(load_knapsack(tmp_path / "k.npz").values, inst.values)
    np.savez(tmp_path / "bad.npz", weights=np.array([[0.1, -2.0]]), values=np.ones((1, 2)), capacity=np.ones(1))
    with pytest.raises(KnapsackError, match="bad.npz: knapsack instance 0: item 1 has a negative weight"):
        load_knapsack(tmp_path / "bad.npz")
    np.savez(tmp_path / "partial.npz", weights=np.ones((1, 2)))
    with pytest.raises(KnapsackError, match="missing array.*capacity, values"):
        load_knapsack(tmp_path / "partial.npz")
    (tmp_path / "junk.npz").write_text("not a zip")
    with pytest.raises(KnapsackError, match="not a readable .npz"):
        load_knapsack(tmp_path / "junk.npz")
    with pytest.raises(KnapsackError, match="no such instance file"):
        load_knapsack(tmp_path / "none.npz")
