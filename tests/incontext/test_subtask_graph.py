"""Subtask-graph tasks, precondition inference (MSGI's ILP), the exact planner, MTSGI's prior, graph-free control."""

import itertools

import numpy as np
import pytest

from ascent.incontext.agents import AGENTS
from ascent.incontext.subtask_graph import (
    Experience,
    FamilyParams,
    SubtaskEnv,
    SubtaskFamily,
    SubtaskGraph,
    build_prior,
    combine_with_prior,
    consistent,
    evaluate,
    infer_graph,
    infer_precondition,
    plan_value,
    play,
)

# 0, 1 roots; 2 needs 0 AND 1; 3 needs 0 OR 2
HAND = SubtaskGraph([[()], [()], [(0, 1)], [(0,), (2,)]], np.array([0.1, -0.5, 1.0, 0.3]))


def test_env_dynamics_by_hand():
    env = SubtaskEnv(HAND, budget=3)
    obs, _ = env.reset()
    assert list(obs[4:8]) == [1, 1, 0, 0] and obs[-1] == 1.0
    obs, r, end, _, info = env.step(2)  # not eligible: the step is wasted
    assert r == 0.0 and not info["executed"] and not end and obs[-1] == pytest.approx(2 / 3)
    obs, r, end, _, _ = env.step(0)
    assert r == pytest.approx(0.1) and list(obs[:4]) == [1, 0, 0, 0] and list(obs[4:8]) == [0, 1, 0, 1]
    obs, r, end, _, _ = env.step(3)  # 0 done makes 3 eligible through the OR
    assert r == pytest.approx(0.3) and end  # budget spent
    env.reset()
    assert env.step(4)[2]  # stop ends the episode
    with pytest.raises(ValueError, match="action must be"):
        env.step(9)


def test_infer_precondition_recovers_and_or_from_all_completion_vectors():
    done = np.array(list(itertools.product([0, 1], repeat=4)), dtype=bool)
    elig = np.array([HAND.eligible(d) | d for d in done])  # eligibility as if not done
    elig &= ~done
    assert infer_precondition(done, elig, 2) == [(0, 1)]
    assert infer_precondition(done, elig, 3) == [(0,), (2,)]
    assert infer_precondition(done, elig, 0) == [()]
    assert infer_precondition(done[:0], elig[:0], 0) is None
    assert consistent([(0, 1)], done, elig, 2) and not consistent([(0,)], done, elig, 2)


def test_plan_value_matches_hand_computation():
    # 2 steps: 0 then 3 = 0.4 (1 costs -0.5, 2 unreachable in 2 steps without 1); 3 steps: 0, 1, 2 = 0.6
    # beats 0, 3 = 0.4; 4 steps: 0, 1, 2, 3 = 0.9
    done = np.zeros(4, dtype=bool)
    assert plan_value(HAND, done, 2, {}) == pytest.approx(0.4)
    assert plan_value(HAND, done, 3, {}) == pytest.approx(0.6)
    assert plan_value(HAND, done, 4, {}) == pytest.approx(0.9)


def test_msgi_recovers_the_graph_and_the_oracle_return():
    agent = AGENTS.resolve("msgi")()
    env = SubtaskEnv(HAND, budget=4)
    agent.adapt(env, 6, np.random.default_rng(0))
    assert agent.graph.pre[2] == [(0, 1)] and agent.graph.reward[1] == pytest.approx(-0.5)
    assert play(env, agent.act) == pytest.approx(0.9)


def test_prior_fills_what_the_test_data_leave_open():
    # test data: only the roots' eligibility seen (nothing executed beyond 0); the prior knows 2 <- 0 AND 1
    exp = Experience(4)
    env = SubtaskEnv(HAND, budget=1)
    obs, _ = env.reset()
    exp.add(obs)
    obs, r, *_ = env.step(0)
    exp.add(obs)
    exp.rewards[0] = [r]
    inferred, seen = infer_graph(exp)
    prior_graph = SubtaskGraph([[()], [()], [(0, 1)], [(0,), (2,)]], np.array([9.0, -0.4, 0.8, 0.2]))
    wrong = SubtaskGraph([[()], [(0,)], [(1,)], [(1,)]], np.zeros(4))  # contradicted: 1 eligible with nothing done
    g = combine_with_prior(inferred, seen, exp, [(wrong, np.ones(4)), (prior_graph, np.ones(4))])
    assert g.pre[2] == [(0, 1)] and g.pre[3] == [(0,), (2,)]
    assert g.reward[0] == pytest.approx(0.1) and g.reward[2] == pytest.approx(0.8)  # observed kept, rest prior


def test_option_q_learns_a_small_task():
    agent = AGENTS.resolve("option_q")()
    env = SubtaskEnv(HAND, budget=4)
    agent.adapt(env, 200, np.random.default_rng(0))
    assert play(env, agent.act) == pytest.approx(0.9)


def test_mtsgi_beats_msgi_and_q_learning_after_one_episode():
    fam = SubtaskFamily(FamilyParams(), seed=0)
    prior = build_prior(fam, fam.tasks("train", 40, 0), episodes=10, seed=0)
    out = evaluate(fam, fam.tasks("test", 10, 0), [1, 8], seed=0, prior=prior)
    m = {k: v.mean(1) for k, v in out.items()}
    assert m["mtsgi"][0] > m["msgi"][0] + 0.3 and m["mtsgi"][0] > m["option_q"][0] + 0.5
    assert m["msgi"][1] >= 0.9 * m["oracle"][1] and (out["oracle"] >= out["mtsgi"] - 1e-9).all()
    with pytest.raises(ValueError, match="split"):
        fam.tasks("val", 1, 0)


def test_ascent_list_sees_every_incontext_agent():
    import subprocess
    import sys

    out = subprocess.run(
        [
            sys.executable,
            "-c",
            "from ascent.app.references import registries; print(' '.join(registries()['incontext_agents'].names()))",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert {"mtsgi", "msgi", "option_q", "icpi", "lamer", "grpo_single_attempt"} <= set(out)
