"""Learning histories: each source learns (or, for AD^epsilon, its noise decays), the record is whole, the cache
returns the same history."""

import numpy as np
import pytest

from ascent.incontext.histories import SOURCES, History, cached_history, collect, eps_schedule
from ascent.incontext.tasks import make_family, optimal_returns


def test_q_learning_learns_darkroom():
    f = make_family("darkroom")
    tasks = f.tasks("train", 30, 0)
    h = collect(f, tasks, "q_learning", 150, seed=0)
    assert h.obs.shape == (30, 150 * 20) and h.episodes == 150
    ret = h.episode_returns()
    opt = optimal_returns(f, tasks)
    assert ret[:, :5].mean() < 0.3 * opt.mean()  # starts far from optimal
    assert ret[:, -10:].mean() > 0.9 * opt.mean()  # ends near it


def test_history_is_consistent_with_dynamics():
    f = make_family("darkroom")
    tasks = f.tasks("train", 4, 1)
    h = collect(f, tasks, "q_learning", 3, seed=1)
    b = f.batch(tasks, 1)
    for e in range(3):
        assert list(b.reset()) == list(h.obs[:, e * 20])
        for t in range(20):
            i = e * 20 + t
            obs, r = b.step(h.actions[:, i])
            assert np.array_equal(r, h.rewards[:, i])
            if t < 19:
                assert np.array_equal(obs, h.obs[:, i + 1])


@pytest.mark.parametrize("source", ["ucb", "thompson"])
def test_bandit_sources_approach_best_arm(source):
    f = make_family("bandit(arms=5, num_train=300)")
    tasks = f.train_tasks
    h = collect(f, tasks, source, 300, seed=0)
    ret = h.episode_returns()  # (N, 300)
    best, mean = tasks.max(1).mean(), tasks.mean()
    assert abs(ret[:, :5].mean() - mean) < 0.1  # untried arms first: about the average arm
    assert ret[:, -50:].mean() > 0.9 * best


def test_ucb_tries_every_arm_first():
    f = make_family("bandit(arms=4, num_train=10)")
    h = collect(f, f.train_tasks, "ucb", 4, seed=0)
    assert all(sorted(row) == [0, 1, 2, 3] for row in h.actions)


def test_noisy_expert_schedule_and_improvement():
    assert eps_schedule(0, 100, 1.0, 0.0, 0.5) == 1.0
    assert eps_schedule(25, 100, 1.0, 0.0, 0.5) == 0.5
    assert eps_schedule(90, 100, 1.0, 0.2, 0.5) == pytest.approx(0.2)
    f = make_family("darkroom")
    tasks = f.tasks("train", 61, 0)
    h = collect(f, tasks, "noisy_expert", 100, seed=0)
    ret, opt = h.episode_returns(), optimal_returns(f, tasks).mean()
    assert ret[:, :10].mean() < 0.2 * opt and ret[:, -10:].mean() == pytest.approx(opt)  # eps reaches 0 at 90%
    e = collect(f, tasks, "expert", 3, seed=0).episode_returns()
    assert np.allclose(e.mean(1), optimal_returns(f, tasks))


def test_noisy_expert_actions_match_eps():
    f = make_family("darkroom")
    tasks = f.tasks("train", 2000, 0)
    h = collect(f, tasks, "noisy_expert(eps_start=0.5, eps_end=0.5)", 1, seed=0)
    b = f.batch(tasks, 0)
    b.reset()
    agree = (h.actions[:, 0] == b.expert()).mean()
    assert abs(agree - (0.5 + 0.5 / 5)) < 0.03  # noise picks the expert's action 1 time in 5


def test_q_learning_key_to_door():
    f = make_family("key_to_door")
    tasks = f.tasks("train", 40, 0)
    ret = collect(f, tasks, "q_learning", 200, seed=0).episode_returns()
    assert ret[:, :5].mean() < 1.2 and ret[:, -20:].mean() > 1.8


def test_subsample_and_cache_roundtrip(tmp_path):
    f = make_family("darkroom")
    tasks = f.tasks("train", 3, 0)
    h = cached_history(f, "darkroom", tasks, "q_learning", 6, 0, tmp_path)
    again = cached_history(f, "darkroom", tasks, "q_learning", 6, 0, tmp_path)
    assert len(list(tmp_path.glob("*.npz"))) == 1
    for k in ("obs", "actions", "rewards", "tasks"):
        assert np.array_equal(getattr(h, k), getattr(again, k))
    assert isinstance(again, History) and again.source == "q_learning" and again.horizon == 20
    cached_history(f, "darkroom", tasks, "q_learning(lr=0.3)", 6, 0, tmp_path)
    assert len(list(tmp_path.glob("*.npz"))) == 2  # another source spec: another file
    s = h.subsample(2)
    assert s.episodes == 3 and np.array_equal(s.obs[:, :20], h.obs[:, 20:40])


def test_sources_registered_with_clear_errors():
    assert SOURCES.names() == ["expert", "noisy_expert", "posterior_sampling", "q_learning", "thompson", "ucb"]
    with pytest.raises(ValueError, match="q_learning needs"):
        SOURCES.resolve("q_learning(lr=0)")


def test_posterior_sampling_learns_within_a_few_episodes_and_then_is_optimal():
    f = make_family("darkroom")
    tasks = f.tasks("train", 61, 0)
    h = collect(f, tasks, "posterior_sampling", 12, seed=0)
    ret, opt = h.episode_returns(), optimal_returns(f, tasks)
    assert ret[:, 0].mean() < 0.3 * opt.mean()  # the first episode walks to a random cell
    assert ret[:, -2:].mean() > 0.95 * opt.mean()  # most goals found within 10 episodes
    for i in range(len(tasks)):  # once a reward is seen, every later episode is the expert's (optimal) one
        seen = np.flatnonzero(ret[i] > 0)
        if len(seen):
            assert np.all(ret[i, seen[0] + 1 :] == opt[i])


def test_posterior_sampling_never_revisits_a_refuted_target():
    f = make_family("darkroom")
    tasks = f.tasks("train", 20, 1)
    h = collect(f, tasks, "posterior_sampling", 6, seed=1)
    idle = (h.actions == 0) & (h.rewards == 0)  # a no-op off the goal: the agent stands on its sampled target
    # resample=True: a target is replaced once refuted, so the only untested cell one can stand on is the start
    # cell (the centre, 40), tested by one no-op at most once per task
    assert np.all(h.obs[idle] == 40) and idle.sum(1).max() <= 1
    slow = collect(f, tasks, "posterior_sampling(resample=false)", 6, seed=1)
    assert (slow.actions == 0).sum() > idle.sum() and slow.episode_returns().mean() < h.episode_returns().mean()


def test_posterior_sampling_is_darkroom_only():
    f = make_family("key_to_door")
    with pytest.raises(ValueError, match="darkroom only"):
        collect(f, f.tasks("train", 2, 0), "posterior_sampling", 1, seed=0)
