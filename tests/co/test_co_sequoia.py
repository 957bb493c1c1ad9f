"""The coRMAB (ascent/co/rmab.py) and SEQUOIA (ascent/co/sequoia.py): the authors' distributions, hand-computed
expected rewards, the MILP argmax against brute force over every feasible action, the myopic MILP against brute
force, and SEQUOIA escaping the paper's stylised trap where the myopic policy stays stuck."""

from __future__ import annotations

import itertools

import pytest
import torch

from ascent.co.problems import InstanceError
from ascent.co.rmab import RMAB_POLICIES, CoRMAB, evaluate, feasible, generate_cormab, myopic, myopic_action
from ascent.co.sequoia import QNet, SequoiaParams, greedy_action, train_sequoia


def _feasible_actions(inst: CoRMAB) -> list[torch.Tensor]:
    """Every feasible action, by enumerating all assignments of arms to workers (or to none)."""
    out = set()
    for assign in itertools.product(range(inst.workers + 1), repeat=inst.arms):  # 0: not pulled, i + 1: worker i
        load = [0] * inst.workers
        for j, w in enumerate(assign):
            if w:
                load[w - 1] += int(inst.costs[j])
        if all(load[i] <= int(inst.capacity[i]) for i in range(inst.workers)):
            out.add(tuple(int(w > 0) for w in assign))
    return [torch.tensor(a, dtype=torch.float32) for a in sorted(out)]


def _trap(horizon: int = 10) -> CoRMAB:
    """The paper's stylised two-arm example where myopic fails (authors' `multistate_rmab` without arguments):
    arm 0 pays 0.2, 0.1, then 10 at its top state; arm 1 pays 0.1, 0.2, 1; acting moves an arm up for sure, not
    acting moves it down; one worker of capacity 1 pulls one arm a step; both arms start in state 0."""
    return CoRMAB(
        p_up=torch.tensor([[0.0, 1.0], [0.0, 1.0]]),
        reward=torch.tensor([[0.2, 0.1, 10.0], [0.1, 0.2, 1.0]]),
        costs=torch.tensor([1, 1]),
        capacity=torch.tensor([1]),
        horizon=horizon,
        start=torch.tensor([0, 0]),
    )


def test_generator_follows_the_authors():
    a, b = generate_cormab(10, 3, seed=4), generate_cormab(10, 3, seed=4)
    assert torch.equal(a.p_up, b.p_up) and not torch.equal(a.p_up, generate_cormab(10, 3, seed=5).p_up)
    assert float(a.p_up[:, 0].max()) <= 0.2 and 0.7 <= float(a.p_up[:, 1].min()) <= float(a.p_up[:, 1].max()) <= 0.9
    assert torch.allclose(a.reward[:3, :3], torch.tensor([0.2, 0.15, 0.1])) and (a.reward[:3, 3] >= 4).all()
    assert torch.allclose(a.reward[3:, :3], torch.tensor([0.1, 0.15, 0.2])) and (a.reward[3:, 3] <= 3).all()
    assert 2 <= int(a.costs.min()) and int(a.costs.max()) <= 6 and 2 <= int(a.capacity.min()) <= 7


@pytest.mark.parametrize(
    "change, message",
    [
        ({"costs": torch.tensor([1, -2])}, "every arm cost must be positive"),
        ({"p_up": torch.tensor([[0.0, 1.5], [0.0, 1.0]])}, r"probabilities in \[0, 1\]"),
        ({"capacity": torch.tensor([1.0])}, "must be integers"),
        ({"reward": torch.ones(3, 3)}, "reward must be"),
    ],
)
def test_malformed_instances_get_clear_errors(change, message):
    t = _trap()
    fields = {"p_up": t.p_up, "reward": t.reward, "costs": t.costs, "capacity": t.capacity, **change}
    with pytest.raises(InstanceError, match=message):
        CoRMAB(**fields)


def test_expected_reward_and_step_by_hand():
    inst = generate_cormab(3, 1, seed=0)
    s, a = torch.tensor([0, 3, 1]), torch.tensor([1.0, 0.0, 1.0])
    want = 0.0
    for j, (up, down) in enumerate([(1, 0), (3, 2), (2, 0)]):
        p = float(inst.p_up[j, int(a[j])])
        want += p * float(inst.reward[j, up]) + (1 - p) * float(inst.reward[j, down])
    assert float(inst.expected_reward(s, a)) == pytest.approx(want, abs=1e-6)
    nxt, r = inst.step(s, a, torch.tensor([0.0, 0.99, 0.99]))  # up, down, down
    assert nxt.tolist() == [1, 2, 0] and r == pytest.approx(float(inst.reward[[0, 1, 2], [1, 2, 0]].sum()))


@pytest.mark.parametrize("hidden", [(16,), (6, 4)])
def test_milp_argmax_equals_brute_force(hidden):
    inst = generate_cormab(5, 2, seed=1)
    actions = _feasible_actions(inst)
    torch.manual_seed(0)
    net = QNet(inst.arms, hidden)
    g = torch.Generator().manual_seed(0)
    for _ in range(4):
        s = torch.randint(0, 4, (5,), generator=g)
        a, value = greedy_action(net, inst, s)
        with torch.no_grad():
            q = torch.stack([net(x, s) for x in actions])
        assert value == pytest.approx(float(q.max()), abs=1e-5)  # the MILP's optimum is the network's maximum
        assert float(net(a, s)) == pytest.approx(float(q.max()), abs=1e-5) and feasible(inst, a)


def test_myopic_is_the_best_one_step_action_and_random_actions_are_feasible():
    inst = generate_cormab(5, 2, seed=2)
    actions = _feasible_actions(inst)
    g = torch.Generator().manual_seed(0)
    for _ in range(4):
        s = torch.randint(0, 4, (5,), generator=g)
        best = max(float(inst.expected_reward(s, x)) for x in actions)
        assert float(inst.expected_reward(s, myopic_action(inst, s))) == pytest.approx(best, abs=1e-6)
        r = inst.random_action(g)
        assert any(torch.equal(r, x) for x in actions)
    assert not feasible(inst, torch.ones(5))  # every arm at once exceeds the capacities here
    assert sum(int(inst.costs[j]) for j in range(5)) > int(inst.capacity.sum())


def test_sequoia_escapes_the_myopic_trap():
    inst = _trap()
    params = SequoiaParams(episodes=12, pretrain_samples=300, pretrain_epochs=20, target_every=20, eps_decay=40)
    net, info = train_sequoia(inst, 0, params)
    sequoia_return = sum(evaluate(inst, lambda s: greedy_action(net, inst, s)[0], 4, seed=0)) / 4
    myopic_return = sum(evaluate(inst, myopic(inst), 4, seed=0)) / 4
    assert myopic_return == pytest.approx(0.4 + 9 * 1.2)  # it pulls arm 1 (0.4 now, then 1.2) and never climbs arm 0
    assert sequoia_return > 90.0  # climbs arm 0 through 0.1 to its top state, 10, and keeps it there (optimum 91.1)
    assert info["milp_solves_target"] > 0 and info["milp_solves_policy"] > 0
    assert RMAB_POLICIES.entry("sequoia").provenance.fidelity == "reduced"
