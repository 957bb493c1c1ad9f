"""Preference optimisation for CO (Pan et al. 2025, arXiv:2505.08735): the loss against hand-computed values, its
invariance to the reward's scale, and learning on tiny instances."""

from __future__ import annotations

import math

import pytest
import torch

from ascent.co.decoding import Solutions
from ascent.co.losses import CO_LOSSES
from ascent.co.preference import PreferenceParams
from ascent.co.problems import generate
from ascent.co.solvers import EvalSet, reference
from ascent.co.train import CoTrainer
from ascent.config.schema import CoConfig

TINY = "attention_model(embed_dim=32, layers=2, heads=4, ff_hidden=64)"


def sols(reward: list, ll: torch.Tensor, agents: int = 1) -> Solutions:
    r = torch.tensor(reward)
    return Solutions(torch.zeros(*r.shape, 1, dtype=torch.long), ll, r, torch.zeros_like(r), agents)


def logsig(x: float) -> float:
    return -math.log1p(math.exp(-x))


def sig(x: float) -> float:
    return 1 / (1 + math.exp(-x))


def test_bradley_terry_loss_and_gradient_against_hand_computed_values():
    # three solutions, costs 1 < 2 < 3: preferences (0 > 1), (0 > 2), (1 > 2) out of 3 x 3 ordered pairs
    a, lp = 0.5, [-1.0, -2.0, -0.5]
    ll = torch.tensor([lp], requires_grad=True)
    loss, _ = CO_LOSSES.resolve(f"preference(alpha={a})")(sols([[-1.0, -2.0, -3.0]], ll))
    want = -(logsig(a * (lp[0] - lp[1])) + logsig(a * (lp[0] - lp[2])) + logsig(a * (lp[1] - lp[2]))) / 9
    assert float(loss.detach()) == pytest.approx(want, rel=1e-6)
    loss.backward()
    g0 = -a * (sig(-a * (lp[0] - lp[1])) + sig(-a * (lp[0] - lp[2]))) / 9
    g2 = a * (sig(-a * (lp[0] - lp[2])) + sig(-a * (lp[1] - lp[2]))) / 9
    assert ll.grad[0, 0].item() == pytest.approx(g0, rel=1e-5)
    assert ll.grad[0, 2].item() == pytest.approx(g2, rel=1e-5)
    assert ll.grad.sum().item() == pytest.approx(0.0, abs=1e-7)  # pairwise: what one gains the other loses


def test_exponential_model_is_a_rank_advantage_and_ties_carry_no_preference():
    ll = torch.zeros(1, 4, requires_grad=True)
    loss, _ = CO_LOSSES.resolve("preference(alpha=0.1, model=exponential)")(sols([[-1.0, -2.0, -2.0, -3.0]], ll))
    loss.backward()
    # d/dl_i = -(alpha / M^2) (number of solutions i beats - number that beat i); the two -2's tie
    assert torch.allclose(ll.grad, -0.1 / 16 * torch.tensor([[3.0, 0.0, 0.0, -3.0]]))
    tie = torch.zeros(1, 3, requires_grad=True)
    loss, _ = CO_LOSSES.resolve("preference")(sols([[-2.0, -2.0, -2.0]], tie))
    assert float(loss) == 0.0


def test_plackett_luce_matches_the_ranking_likelihood():
    a, lp = 0.3, torch.tensor([[0.2, -1.0, 0.5]])
    loss, _ = CO_LOSSES.resolve(f"preference(alpha={a}, model=plackett_luce)")(sols([[-3.0, -1.0, -2.0]], lp))
    s = [a * lp[0, 1].item(), a * lp[0, 2].item(), a * lp[0, 0].item()]  # best first: 1, 2, 0
    logp = sum(s[k] - math.log(sum(math.exp(x) for x in s[k:])) for k in range(3))
    assert float(loss) == pytest.approx(-logp / 3, rel=1e-6)


def test_only_the_order_of_the_costs_matters():
    ll = torch.randn(2, 6, generator=torch.Generator().manual_seed(0))
    r = torch.randn(2, 6, generator=torch.Generator().manual_seed(1))
    fn = CO_LOSSES.resolve("preference")
    a, _ = fn(sols(r.tolist(), ll))
    b, _ = fn(sols((10 * r + 3).tolist(), ll))  # any increasing map of the rewards
    assert torch.equal(a, b)


def test_a_population_compares_within_each_agent():
    ll = torch.zeros(1, 4, requires_grad=True)
    loss, _ = CO_LOSSES.resolve("preference(model=exponential, alpha=1.0)")(sols([[-1.0, -5.0, -2.0, -3.0]], ll, 2))
    loss.backward()  # agent 0: (-1 > -5), agent 1: (-2 > -3); never across agents
    assert torch.allclose(ll.grad, torch.tensor([[-1.0, 1.0, -1.0, 1.0]]) / 8)


def test_bad_parameters_say_what_is_wrong():
    with pytest.raises(ValueError, match="alpha must be > 0"):
        PreferenceParams(alpha=0.0)
    with pytest.raises(ValueError, match="model must be"):
        PreferenceParams(model="thurstone")
    with pytest.raises(ValueError, match="at least 2 solutions"):
        CO_LOSSES.resolve("preference")(sols([[-1.0]], torch.zeros(1, 1)))


def test_preference_optimisation_closes_the_gap_on_tiny_instances(one_thread):
    inst = generate("tsp", 8, 64, seed=99)
    ts = EvalSet(inst, *reference(inst, iterations=200))
    cfg = CoConfig(
        problem="tsp", n=8, policy=TINY, loss="preference(alpha=0.1)", steps=40, batch_size=32, lr=1e-3,
        eval_modes=["greedy"],
    )  # fmt: skip
    trainer = CoTrainer(cfg, seed=0, test=ts)
    before = trainer.evaluate()["eval/gap_greedy"]
    assert trainer.fit()
    after = trainer.evaluate()["eval/gap_greedy"]
    assert before > 40.0 and after < 10.0, (before, after)
