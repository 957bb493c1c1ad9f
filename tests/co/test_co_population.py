"""Poppy: the population objective against hand-computed values, and the population model against its single agent."""

from __future__ import annotations

import pytest
import torch

from ascent.co.decoding import Solutions, evaluate, rollout
from ascent.co.envs import check_solutions
from ascent.co.losses import CO_LOSSES
from ascent.co.model import CO_POLICIES
from ascent.co.population import clone
from ascent.co.problems import generate

TINY = "attention_model(embed_dim=32, layers=2, heads=4, ff_hidden=64)"


def solutions(reward: list, ll: torch.Tensor, agents: int) -> Solutions:
    r = torch.tensor(reward)
    return Solutions(torch.zeros(*r.shape, 1, dtype=torch.long), ll, r, torch.zeros_like(r), agents)


def test_only_the_best_agent_per_start_gets_the_gradient_with_the_second_best_as_baseline():
    # one instance, K=2 agents x M=2 starts, agent-major: agent 0 (-1, -5), agent 1 (-2, -3)
    ll = torch.tensor([[-0.1, -0.2, -0.3, -0.4]], requires_grad=True)
    loss, metrics = CO_LOSSES.resolve("poppy")(solutions([[-1.0, -5.0, -2.0, -3.0]], ll, 2))
    # start 0: agent 0 wins by 1 over agent 1; start 1: agent 1 wins by 2 over agent 0
    assert float(loss.detach()) == pytest.approx(-(1.0 * -0.1 + 2.0 * -0.4) / 2)
    loss.backward()
    assert torch.allclose(ll.grad, torch.tensor([[-0.5, 0.0, 0.0, -1.0]]))
    assert metrics["train/win_share_max"] == 0.5 and metrics["train/best_reward"] == -1.0


def test_poppy_with_the_pomo_baseline_uses_the_winners_own_starts():
    ll = torch.tensor([[-0.1, -0.2, -0.3, -0.4]], requires_grad=True)
    loss, _ = CO_LOSSES.resolve("poppy(baseline=pomo)")(solutions([[-1.0, -5.0, -2.0, -3.0]], ll, 2))
    # agent 0's mean -3: start 0 advantage +2; agent 1's mean -2.5: start 1 advantage -0.5
    assert float(loss.detach()) == pytest.approx(-(2.0 * -0.1 + -0.5 * -0.4) / 2)


def test_pomo_on_a_population_is_k_independent_pomo_baselines():
    ll = torch.zeros(1, 4, requires_grad=True)
    loss, _ = CO_LOSSES.resolve("pomo")(solutions([[-1.0, -5.0, -2.0, -3.0]], ll, 2))
    loss.backward()  # agent 0: mean -3 -> (2, -2); agent 1: mean -2.5 -> (0.5, -0.5)
    assert torch.allclose(ll.grad, -torch.tensor([[2.0, -2.0, 0.5, -0.5]]) / 4)
    with pytest.raises(ValueError, match="at least 2 agents"):
        CO_LOSSES.resolve("poppy")(solutions([[-1.0, -2.0]], torch.zeros(1, 2), 1))


@pytest.mark.parametrize("problem", ["tsp", "cvrp"])
def test_a_cloned_population_decodes_like_its_agent_and_stays_feasible(problem):
    torch.manual_seed(0)
    single = CO_POLICIES.resolve(TINY)(problem).eval()
    pop = clone(single, 3).eval()
    inst = generate(problem, 7, 4, seed=0)
    n = 7
    sol = rollout(pop, inst, 3 * n, starts=True, greedy=True)
    assert sol.agents == 3 and sol.actions.shape[:2] == (4, 3 * n)
    check_solutions(inst, sol.actions)
    one = rollout(single, inst, n, starts=True, greedy=True)
    for k in range(3):  # identical decoders: identical greedy tours from the same starts
        assert torch.equal(sol.actions[:, k * n : (k + 1) * n, : one.actions.shape[2]], one.actions)
    assert torch.allclose(evaluate(pop, inst, "multistart"), evaluate(single, inst, "multistart"))
    sampled = rollout(pop, inst, 3 * n, starts=True, greedy=False, generator=torch.Generator().manual_seed(0))
    check_solutions(inst, sampled.actions)
