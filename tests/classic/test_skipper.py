"""Skipper (Zhao et al. 2024, arXiv:2310.00229) and its RandDistShift gridworld: the layout generator's lava count
and routes, the dynamics by hand, value iteration over a checkpoint graph by hand, the target choice, hindsight
relabelling inside the episode, hindsight distances that learn the grid's geometry, and exact resume."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from ascent.classic.gridworld import make_layout, shortest_path
from ascent.classic.skipper import SkipperParams, choose_target, plan_graph

gym = pytest.importorskip("gymnasium")


def test_layouts_have_the_papers_lava_count_and_a_route():
    rng = np.random.default_rng(0)
    for _ in range(50):
        layout = make_layout(8, 0.4, rng)
        assert layout["lava"].sum() == int(0.4 * 8 * 6)
        assert not layout["lava"][[0, 7], :].any()  # the edge columns are free
        assert {layout["start"][0], layout["goal"][0]} == {0, 7}
        assert shortest_path(layout, layout["start"], layout["goal"]) is not None


def test_dynamics_by_hand():
    from ascent.classic.gridworld import make

    env = make(size=4, difficulty=0.0, layouts=1)
    env.reset(seed=0)
    env.layout = {"lava": np.zeros((4, 4), bool), "start": (0, 0), "goal": (3, 0)}
    env.layout["lava"][1, 1] = True
    env.pos = (0, 0)
    obs, r, term, trunc, _ = env.step(3)  # north into the border: stays
    assert env.pos == (0, 0) and (r, term, trunc) == (0.0, False, False)
    assert obs[-16:].argmax() == 0 and obs[16 + 3 * 4 + 0] == 1.0 and obs[1 * 4 + 1] == 1.0  # agent, goal, lava
    env.step(1)  # south to (0, 1)
    _, r, term, _, _ = env.step(0)  # east into lava at (1, 1)
    assert (r, term) == (0.0, True)
    env.pos = (2, 0)
    _, r, term, _, _ = env.step(0)
    assert (r, term) == (1.0, True)


def test_layout_pool_and_held_out_layouts():
    from ascent.classic.gridworld import make

    a, b = make(layouts=5, layout_seed=3), make(layouts=5, layout_seed=3)
    assert all((x["lava"] == y["lava"]).all() and x["goal"] == y["goal"] for x, y in zip(a.pool, b.pool))
    fresh = make(layouts=0)
    l1 = fresh.reset(seed=1)[0]
    l2 = fresh.reset(seed=2)[0]
    assert not np.array_equal(l1, l2) and np.array_equal(fresh.reset(seed=1)[0], l1)
    with pytest.raises(ValueError, match="difficulty"):
        make(difficulty=1.0)


def test_value_iteration_takes_the_two_hop_route():
    """current -> A (discount 0.9, reward 0), A -> goal (0.9, reward 1); the direct edge current -> goal is pruned:
    Q[current, A] = 0 + 0.9 * 1 = 0.9, Q[current, goal] = 0."""
    d = torch.tensor([[0.0, 0.9, 0.5], [0.9, 0.0, 0.9], [0.0, 0.0, 0.0]])
    r = torch.tensor([[0.0, 0.0, 1.0], [0.0, 0.0, 1.0], [0.0, 0.0, 0.0]])
    keep = torch.ones(3, 3, dtype=torch.bool)
    keep[0, 2] = False
    q = plan_graph(d, r, torch.tensor([False, False, True]), keep, 5)
    assert torch.allclose(q[0], torch.tensor([0.0, 0.9, 0.0]))
    assert choose_target(q[0], torch.tensor([0.0, 1.0, 6.6])) == 1
    keep[0, 2] = True  # with the direct edge: 1.0 beats 0.9
    q = plan_graph(d, r, torch.tensor([False, False, True]), keep, 5)
    assert choose_target(q[0], torch.tensor([0.0, 1.0, 6.6])) == 2


def test_terminal_vertices_have_no_way_out():
    d = torch.full((2, 2), 0.9)
    r = torch.ones(2, 2)
    q = plan_graph(d, r, torch.tensor([False, True]), torch.ones(2, 2, dtype=torch.bool), 3)
    assert torch.allclose(q, torch.tensor([[0.0, 1.0], [0.0, 0.0]]))


def _algo(size: int = 5, difficulty: float = 0.0, total: int = 3000, **kw):
    from ascent.classic.base import ClassicContext
    from ascent.classic.envs import VecEnv
    from ascent.classic.gridworld import make
    from ascent.classic.skipper import Skipper

    torch.manual_seed(0)
    envs = VecEnv(lambda: make(size=size, difficulty=difficulty, layouts=10), 1, seed=0)
    return Skipper(ClassicContext(envs, total, 0, torch.device("cpu")), SkipperParams(**kw))


def test_hindsight_targets_come_from_the_transitions_episode():
    algo = _algo(learning_starts=10**9, buffer_size=300, random_targets=0.0)
    while algo.written < 500:  # wraps the ring: old episodes are partly overwritten
        algo.iteration(False)
    n, rng = algo.p.buffer_size, np.random.default_rng(0)
    idx = rng.integers(0, n, 400)
    cells, hindsight = algo.relabel(idx, rng)
    assert hindsight.all()
    oldest = algo.written - n
    for slot, cell in zip(idx, cells):
        start, end = max(algo.ep_start[slot], oldest), algo.ep_end[slot]
        end = algo.written - 1 if end < 0 else end
        visited = {int(algo.agent_cell(algo.buffer.next_obs[a % n])) for a in range(start, end + 1)}
        assert int(cell) in visited


def test_bad_settings_say_what_to_change():
    with pytest.raises(ValueError, match="checkpoints must be >= 2"):
        SkipperParams(checkpoints=1)
    with pytest.raises(ValueError, match="gamma must be in"):
        SkipperParams(gamma=1.0)
    from ascent.classic.base import ClassicContext
    from ascent.classic.envs import VecEnv
    from ascent.classic.skipper import Skipper, skipper

    with pytest.raises(ValueError, match="classic.num_envs=1"):
        skipper.check(SkipperParams(), 2)
    envs = VecEnv(lambda: gym.make("CartPole-v1"), 1, seed=0)
    with pytest.raises(ValueError, match="grid observation"):
        Skipper(ClassicContext(envs, 100, 0, torch.device("cpu")), SkipperParams())


def test_hindsight_distances_learn_the_grids_geometry():
    """5 x 5 without lava, 2,500 steps of uniform random behaviour (the estimators train from step 500): the
    estimated distance between cells grows with the true shortest-path distance (Spearman > 0.3 over every pair of
    10 held-out layouts; an untrained estimator scores about 0), and adjacent cells are estimated nearer than cells
    five or more moves apart."""
    from scipy.stats import spearmanr

    from ascent.classic.gridworld import make

    algo = _algo(
        learning_starts=500, train_freq=1, target_update_interval=250, hidden=[64, 64], eps_start=1.0, eps_end=1.0
    )
    algo = _train(algo, 2500)
    env, est, true = make(size=5, difficulty=0.0, layouts=0), [], []
    for k in range(10):
        obs, _ = env.reset(seed=200 + k)
        goal = env.layout["goal"][0] * 5 + env.layout["goal"][1]
        cells = [c for c in range(25) if c != goal]
        with torch.no_grad():
            dist = algo.graph(torch.from_numpy(obs), cells)[2]
        for i in range(len(cells)):
            for j in range(len(cells)):
                if i != j:
                    est.append(float(dist[i, j]))
                    true.append(shortest_path(env.layout, divmod(cells[i], 5), divmod(cells[j], 5)))
    est_a, true_a = np.array(est), np.array(true)
    assert spearmanr(est, true).statistic > 0.3
    assert est_a[true_a == 1].mean() < est_a[true_a >= 5].mean() - 1.0


def _train(algo, steps: int):
    while algo.steps < steps:
        algo.iteration(False)
    return algo


def test_resume_is_exact(tmp_path):
    from safetensors.torch import load_file

    from ascent.app.pipeline import train
    from ascent.config import load_config
    from ascent.trainer.checkpoint import Checkpointer

    common = ["classic.env=ascent/RandDistShift-6x6-v0", "classic.total_steps=400", "logging.progress=false"]
    common += ["classic.algorithm=skipper(learning_starts=100,hidden=[16],checkpoints=4,candidates=6)"]
    common += ["classic.num_envs=1", "classic.eval_episodes=2", f"output_dir={tmp_path}"]
    whole = train(load_config("acrobot-dqn", [*common, "name=whole"]))
    assert train(load_config("acrobot-dqn", [*common, "name=split"]), stop_at=200) is None
    split = train(run_dir=tmp_path / "split", resume=True)
    assert split["final_returns"] == whole["final_returns"]
    a, b = (
        load_file(str(Checkpointer(tmp_path / n / "checkpoints").latest() / "model.safetensors"))
        for n in ("whole", "split")
    )
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
