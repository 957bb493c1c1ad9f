"""Loss graphs (Co-Reyes et al. 2021, arXiv:2101.03958): parsing and rendering, values by hand, DQN's graph equals
ascent's DQN step exactly, the cheap filters, mutation validity, and a tiny real search."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from ascent.classic.base import ClassicContext
from ascent.classic.dqn import DQN, DQNParams
from ascent.classic.envs import VecEnv, make_env
from ascent.incontext.evolve import (
    DQN_GRAPH,
    INPUTS,
    LossGraphDQN,
    LossGraphDQNParams,
    SearchParams,
    evaluate_graph,
    mutate,
    parse,
    probe,
    random_graph,
    render,
    search,
)

DQNREG = "add(square(sub(q, add(r, mul(g, qn)))), mul(c01, q))"


def test_parse_render_and_values_by_hand():
    for expr in (DQN_GRAPH, DQNREG, "max(abs(q), neg(r))"):
        assert render(parse(expr)) == expr
    b = {
        "q": torch.tensor([1.0, 3.0]),
        "qn": torch.tensor([2.0, 0.0]),
        "r": torch.tensor([0.5, 1.0]),
        "g": torch.tensor([0.5, 0.0]),
    }
    # targets 0.5 + 0.5 * 2 = 1.5 and 1.0: errors -0.5 and 2.0
    np.testing.assert_allclose(evaluate_graph(parse(DQN_GRAPH), b).numpy(), [0.125, 1.5])
    np.testing.assert_allclose(evaluate_graph(parse(DQNREG), b).numpy(), [0.25 + 0.1, 4.0 + 0.3], rtol=1e-6)
    for bad, msg in (
        ("foo(q)", "not an input"),
        ("add(q)", "takes 2"),
        ("q", "one op expression"),
        ("sub(q, r)x", "one"),
    ):
        with pytest.raises(ValueError, match=msg):
            parse(bad)
    with pytest.raises(ValueError, match="not an input"):
        LossGraphDQNParams(graph="huber(sub(q, target))")


def test_filters_gradient_through_q_and_functional_equivalence():
    assert probe(parse("add(r, qn)"))[0] is False  # no q: cannot learn
    assert probe(parse("mul(c1, sub(r, r))"))[0] is False
    assert probe(parse(DQN_GRAPH))[0] is True
    assert probe(parse("add(q, r)"))[1] == probe(parse("add(r, q)"))[1]
    assert probe(parse("add(q, r)"))[1] != probe(parse("sub(q, r)"))[1]


def test_random_and_mutated_graphs_only_use_earlier_nodes():
    rng = np.random.default_rng(0)
    for _ in range(200):
        nodes = mutate(random_graph(5, rng), rng)
        assert len(nodes) == 5
        for i, (op, args) in enumerate(nodes):
            assert all(0 <= a < len(INPUTS) + i for a in args)
        render(nodes)


def test_the_dqn_graph_takes_exactly_dqns_gradient_step():
    envs = VecEnv(lambda: make_env("CartPole-v1"), 2, 0)
    ctx = ClassicContext(envs, 1000, 0, torch.device("cpu"))
    torch.manual_seed(0)
    a = DQN(ctx, DQNParams(hidden=[16]))
    b = LossGraphDQN(ctx, LossGraphDQNParams(hidden=[16], graph=DQN_GRAPH))
    b.q.load_state_dict(a.q.state_dict())
    b.q_target.load_state_dict(a.q_target.state_dict())
    rng = np.random.default_rng(1)
    for _ in range(50):
        obs, nxt = rng.normal(size=(2, 4)).astype(np.float32), rng.normal(size=(2, 4)).astype(np.float32)
        args = (obs, rng.integers(0, 2, 2), rng.normal(size=2).astype(np.float32), nxt, rng.random(2) < 0.2)
        a.buffer.add(*args)
        b.buffer.add(*args)
    la, lb = a.gradient_step(), b.gradient_step()
    assert float(la) == pytest.approx(float(lb), rel=1e-6)
    for pa, pb in zip(a.q.parameters(), b.q.parameters()):
        torch.testing.assert_close(pa, pb)
    assert F.smooth_l1_loss(torch.tensor([3.0]), torch.tensor([0.0])) == 2.5  # the Huber the graph's op uses


def test_a_tiny_search_scores_real_dqn_runs_and_keeps_the_best():
    p = SearchParams(
        population=2,
        tournament=1,
        evaluations=3,
        steps=64,
        num_envs=2,
        eval_episodes=1,
        dqn={"learning_starts": 16, "hidden": [8]},
    )
    out = search(p, 0, log=lambda m: None)
    trained = [h for h in out["history"] if h[2] == "trained"]
    assert out["trained"] == len(trained) == 3
    assert out["best_score"] == max(h[1] for h in trained) and 0 < out["best_score"] <= 1
    assert all(h[1] == 0.0 for h in out["history"] if h[2] == "no-grad")


def test_a_recipe_can_name_dqn_loss_graph_in_a_fresh_interpreter():
    """`classic.algorithm=dqn_loss_graph(...)` resolves from the command line without anything importing
    ascent.incontext.evolve first (it registers outside ascent.classic)."""
    import subprocess
    import sys

    code = (
        "from ascent.config.loader import load_config\n"
        "cfg = load_config('cartpole-ppo', ['classic.algorithm=dqn_loss_graph'])\n"
        "print(cfg.classic.algorithm)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-400:]
    assert out.stdout.strip().startswith("dqn_loss_graph")


def test_every_classic_algorithm_says_which_action_spaces_it_handles():
    """The config check reads `fn.action_spaces` of every classic entry to suggest alternatives; one entry without
    it turned every action-space mismatch into an AttributeError."""
    from ascent.classic import CLASSIC
    from ascent.config.loader import register_classic_families

    register_classic_families()
    assert [e.name for e in CLASSIC.entries() if not hasattr(e.fn, "action_spaces")] == []
