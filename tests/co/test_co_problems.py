"""Instance generation (RL4CO's distributions), the instance file format and its errors."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from ascent.co.envs import tour_length
from ascent.co.problems import InstanceError, Instances, augment, generate, load_instances, save_instances


def test_generators_are_seeded_and_follow_kool_et_al():
    a, b, c = generate("cvrp", 20, 500, seed=3), generate("cvrp", 20, 500, seed=3), generate("cvrp", 20, 500, seed=4)
    assert torch.equal(a.locs, b.locs) and torch.equal(a.demand, b.demand) and not torch.equal(a.locs, c.locs)
    assert a.locs.shape == (500, 21, 2) and 0 <= float(a.locs.min()) and float(a.locs.max()) <= 1
    customers = a.demand[:, 1:]
    assert int(customers.min()) == 1 and int(customers.max()) == 9 and (a.demand[:, 0] == 0).all()
    assert abs(float(customers.float().mean()) - 5.0) < 0.1  # uniform on {1..9}
    assert (a.capacity == 30).all() and (generate("cvrp", 50, 1, seed=0).capacity == 40).all()
    t = generate("tsp", 20, 4, seed=0)
    assert t.locs.shape == (4, 20, 2) and t.demand is None


def test_instance_file_round_trip(tmp_path):
    inst = generate("cvrp", 10, 3, seed=0)
    save_instances(inst, tmp_path / "x.npz")
    back = load_instances(tmp_path / "x.npz", "cvrp")
    assert torch.equal(back.locs, inst.locs) and torch.equal(back.demand, inst.demand)


def test_bad_instances_get_clear_errors(tmp_path):
    locs = torch.rand(2, 4, 2)
    demand = torch.tensor([[0, 3, 4, 5], [0, 3, 12, 5]])
    with pytest.raises(InstanceError, match="instance 1: a demand of 12 exceeds the vehicle capacity 10"):
        Instances("cvrp", locs, demand, torch.tensor([10, 10]))
    with pytest.raises(InstanceError, match="depot and must have demand 0"):
        Instances("cvrp", locs, demand + 1, torch.tensor([20, 20]))
    with pytest.raises(InstanceError, match=r"locs must be \(B, N>=2, 2\)"):
        Instances("tsp", torch.rand(2, 4, 3))
    (tmp_path / "bad.npz").write_bytes(b"not a zip")
    with pytest.raises(InstanceError, match="not a readable .npz"):
        load_instances(tmp_path / "bad.npz", "tsp")
    np.savez(tmp_path / "nodemand.npz", locs=np.random.rand(2, 5, 2))
    with pytest.raises(InstanceError, match="missing array"):
        load_instances(tmp_path / "nodemand.npz", "cvrp")
    np.savez(
        tmp_path / "over.npz", locs=np.random.rand(1, 3, 2), demand=np.array([[0, 5, 40]]), capacity=np.array([30])
    )
    with pytest.raises(InstanceError, match="over.npz: CVRP instance 0: a demand of 40 exceeds"):
        load_instances(tmp_path / "over.npz", "cvrp")
    with pytest.raises(InstanceError, match="no such instance file"):
        load_instances(tmp_path / "absent.npz", "tsp")


def test_the_eight_symmetries_keep_tour_lengths():
    inst = generate("tsp", 9, 5, seed=1)
    tours = torch.stack([torch.randperm(9) for _ in range(5)])
    aug = augment(inst, 8)
    lengths = tour_length(aug, tours.repeat(8, 1)).view(8, 5)
    assert torch.allclose(lengths, lengths[:1].expand(8, 5), atol=1e-5)
    assert len({tuple(aug.locs[i * 5, 0].tolist()) for i in range(8)}) == 8  # eight distinct images of a point
