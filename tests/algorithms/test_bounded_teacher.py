"""TreeOPSD's bounded-teacher loss `tree_sd`: reference values, the policy-gradient tangent at the behaviour policy,
the finite target, and sequential updates that stop there (plain policy gradient does not)."""

from __future__ import annotations

import math

import pytest
import torch

from ascent.algorithms import LOSSES, LossInput
from ascent.algorithms.bounded_teacher import TreeSdParams
from ascent.config.schema import AlgorithmConfig

CFG = AlgorithmConfig()


def loss_input(logp, old, adv):
    logp = torch.tensor(logp, requires_grad=True) if not isinstance(logp, torch.Tensor) else logp
    mask = torch.ones(logp.shape)
    inp = LossInput(
        logprobs=logp,
        old_logprobs=torch.tensor(old),
        advantages=torch.tensor(adv),
        mask=mask,
        num_tokens=float(mask.sum()),
        num_seqs=float(mask.shape[0]),
        norm_length=float(mask.shape[1]),
    )
    return inp, logp


def test_reference_value_and_policy_gradient_tangent():
    tree_sd = LOSSES.get("tree_sd")
    # rho = 1 on both tokens; A = 0.5, -1; bound 0.2: log rho* = 0.2 tanh(A) = 0.0924234, -0.1523188
    inp, logp = loss_input([[-1.0, -2.0]], [[-1.0, -2.0]], [[0.5, -1.0]])
    loss, m = tree_sd(inp, CFG, params=TreeSdParams(bound=0.2))
    t = [0.2 * math.tanh(0.5), 0.2 * math.tanh(-1.0)]
    terms = [(math.exp(x) * x - math.exp(x) + 1.0) / 0.2 for x in t]  # 0.0227198, 0.0524336
    assert float(loss.detach()) == pytest.approx(sum(terms) / 2, abs=1e-6)
    assert float(loss.detach()) == pytest.approx(0.0375767, abs=1e-6)
    loss.backward()
    # d l / d log pi = (rho - rho*) / bound, token-mean over 2 tokens
    expected = [(1.0 - math.exp(x)) / 0.2 / 2 for x in t]
    assert logp.grad[0].tolist() == pytest.approx(expected, abs=1e-6)
    # small advantages: the gradient at the behaviour policy is the policy gradient -A grad log pi
    inp, logp = loss_input([[-1.0, -2.0]], [[-1.0, -2.0]], [[0.01, -0.02]])
    tree_sd(inp, CFG)[0].backward()
    pg_in, pg_logp = loss_input([[-1.0, -2.0]], [[-1.0, -2.0]], [[0.01, -0.02]])
    LOSSES.get("pg")(pg_in, CFG)[0].backward()
    assert logp.grad[0].tolist() == pytest.approx(pg_logp.grad[0].tolist(), rel=2e-2)
    assert m["loss/ratio_mean"] == pytest.approx(1.0)


def test_the_teacher_is_the_minimum():
    adv, bound = 0.7, 0.3
    target = bound * math.tanh(adv)
    inp, logp = loss_input([[-1.0 + target]], [[-1.0]], [[adv]])
    loss, _ = LOSSES.get("tree_sd")(inp, CFG, params=TreeSdParams(bound=bound))
    loss.backward()
    assert float(loss.detach()) == pytest.approx(0.0, abs=1e-6) and abs(float(logp.grad)) < 1e-6
    for off in (-0.05, 0.05):  # >= 0 on both sides
        inp, _ = loss_input([[-1.0 + target + off]], [[-1.0]], [[adv]])
        assert float(LOSSES.get("tree_sd")(inp, CFG, params=TreeSdParams(bound=bound))[0].detach()) > 0
    with pytest.raises(ValueError, match="bound must be a positive number"):
        TreeSdParams(bound=0.0)


@pytest.mark.parametrize("adv", [2.0, -2.0])
def test_sequential_updates_stop_at_a_finite_target(adv):
    """One batch reused for 300 sequential updates of a 4-way softmax policy: tree_sd moves the sampled token's
    log-ratio to bound tanh(A) and stays; plain policy gradient keeps pushing it."""
    old = torch.log_softmax(torch.zeros(4), 0)[0].item()
    final = {}
    for name in ("tree_sd", "pg"):
        logits = torch.zeros(4, requires_grad=True)
        opt = torch.optim.SGD([logits], lr=0.5)
        for _ in range(300):
            inp, _ = loss_input(torch.log_softmax(logits, 0)[0].view(1, 1), [[old]], [[adv]])
            loss, _ = LOSSES.get(name)(inp, CFG)
            opt.zero_grad()
            loss.backward()
            opt.step()
        final[name] = float(torch.log_softmax(logits, 0)[0].detach()) - old
    assert final["tree_sd"] == pytest.approx(0.2 * math.tanh(adv), abs=1e-3)
    assert abs(final["pg"]) > 5 * abs(final["tree_sd"])
