"""Task families: dynamics by hand, the train/test split, seeding, the Gymnasium wrappers."""

import numpy as np
import pytest

from ascent.incontext.tasks import FAMILIES, make_env, make_family, make_vec_env, optimal_returns
from ascent.typed import ConfigError


def test_darkroom_walk_to_goal_and_walls():
    f = make_family("darkroom")
    b = f.batch(np.array([[4, 6], [0, 0]]), seed=0)
    assert list(b.reset()) == [40, 40]  # both start in the centre (4, 4)
    obs, r = b.step(np.array([2, 1]))  # right; up
    assert list(obs) == [41, 31] and list(r) == [0, 0]
    obs, r = b.step(np.array([2, 4]))  # right onto the goal; left
    assert list(obs) == [42, 30] and list(r) == [1, 0]
    obs, r = b.step(np.array([0, 1]))  # no-op on the goal pays again
    assert list(r) == [1, 0]
    for _ in range(10):
        obs, _ = b.step(np.array([2, 1]))  # walls clip
    assert list(obs) == [44, 0 * 9 + 3]


def test_darkroom_expert_return_and_split():
    f = make_family("darkroom")
    assert len(f.train_tasks) == 61 and len(f.test_tasks) == 20
    train = {tuple(t) for t in f.train_tasks}
    assert not train & {tuple(t) for t in f.test_tasks} and len(train) == 61
    # the expert reaches a goal at Manhattan distance d from the centre at step d, then stays: 20 - d + 1
    goals = np.array([[4, 6], [0, 0], [4, 4]])
    assert list(optimal_returns(f, goals)) == [19, 13, 20]
    other = make_family("darkroom(split_seed=1)")
    assert {tuple(t) for t in other.test_tasks} != {tuple(t) for t in f.test_tasks}
    assert np.array_equal(make_family("darkroom").test_tasks, f.test_tasks)  # seeded


def test_tasks_cycles_through_split():
    f = make_family("darkroom")
    t = f.tasks("train", 122, seed=3)
    assert len({tuple(x) for x in t[:61]}) == 61 and len({tuple(x) for x in t[61:]}) == 61
    assert np.array_equal(t, f.tasks("train", 122, seed=3))


def test_key_to_door_rewards_once_each():
    f = make_family("key_to_door")
    assert len(f.train_tasks) + len(f.test_tasks) == 81 * 80
    task = np.array([[4, 5, 4, 7]])  # key (4, 5), door (4, 7)
    b = f.batch(task, seed=0)
    b.reset()
    b.pos[:] = [4, 4]
    rewards = [float(b.step(np.array([a]))[1][0]) for a in (4, 2, 2, 0, 2, 2, 0, 4, 2)]
    # left, right to (4,4), onto the key (1), stay (0), onto (4,6), onto the door (1), stay, off and back on (0)
    assert rewards == [0, 0, 1, 0, 0, 1, 0, 0, 0]
    assert optimal_returns(f, f.test_tasks[:50], seed=0).min() == 2.0


def test_door_without_key_pays_nothing():
    f = make_family("key_to_door")
    b = f.batch(np.array([[0, 0, 4, 5]]), seed=0)
    b.reset()
    b.pos[:] = [4, 4]
    assert float(b.step(np.array([2]))[1][0]) == 0.0  # on the door without the key


def test_key_to_door_start_cells_are_seeded():
    f = make_family("key_to_door")
    a, b = f.batch(f.test_tasks[:8], 5), f.batch(f.test_tasks[:8], 5)
    assert np.array_equal(a.reset(), b.reset())
    assert not np.array_equal(f.batch(f.test_tasks[:8], 6).reset(), a.reset())


def test_bandit_reward_rates_and_split():
    f = make_family("bandit(arms=3, num_train=10, num_test=4)")
    assert f.train_tasks.shape == (10, 3) and f.test_tasks.shape == (4, 3)
    tasks = np.array([[0.1, 0.5, 0.9]] * 20000)
    b = f.batch(tasks, seed=0)
    b.reset()
    for arm, p in enumerate((0.1, 0.5, 0.9)):
        rate = b.step(np.full(len(tasks), arm))[1].mean()
        assert abs(rate - p) < 0.015
    assert list(optimal_returns(f, np.array([[0.2, 0.7]]))) == [0.7]


def test_bad_actions_and_specs_fail_clearly():
    f = make_family("darkroom")
    b = f.batch(f.test_tasks[:2], 0)
    b.reset()
    with pytest.raises(ValueError, match="expected 2 actions"):
        b.step(np.array([5, 0]))
    with pytest.raises(ConfigError, match="valid names"):
        make_family("darkrooom")
    with pytest.raises(ValueError, match="num_test"):
        make_family("darkroom(num_test=81)")
    assert FAMILIES.names() == ["bandit", "darkroom", "key_to_door"]


def test_gymnasium_vector_env_autoresets_same_step():
    gym = pytest.importorskip("gymnasium")
    f = make_family("darkroom")
    env = make_vec_env(f, np.array([[4, 8], [0, 4]]), seed=0)  # goals against the walls
    assert isinstance(env, gym.vector.VectorEnv) and env.num_envs == 2
    obs, _ = env.reset(seed=0)
    assert list(obs) == [40, 40]
    total = np.zeros(2)
    for t in range(f.horizon):
        obs, r, term, trunc, info = env.step(np.array([2, 1]))
        total += r
        assert not term.any() and trunc.all() == (t == f.horizon - 1)
    assert list(total) == [17, 17] and list(info["final_obs"]) == [44, 4] and list(obs) == [40, 40]


def test_gymnasium_single_env_matches_batch():
    pytest.importorskip("gymnasium")
    f = make_family("key_to_door")
    env = make_env(f, f.test_tasks[0], seed=3)
    obs, _ = env.reset()
    b = f.batch(f.test_tasks[:1], 3)
    assert obs == int(b.reset()[0])
    rng = np.random.default_rng(0)
    for t in range(f.horizon):
        a = int(rng.integers(5))
        o, r, term, trunc, _ = env.step(a)
        ob, rb = b.step(np.array([a]))
        assert (o, r) == (int(ob[0]), float(rb[0])) and trunc == (t == f.horizon - 1)
    assert env.observation_space.n == 81 and env.action_space.n == 5
