"""Minari datasets: written by ascent (`write_dataset`, `ascent collect`), read back exactly, readable by Minari itself,
cached, and bad ones rejected with the file and the field named."""

from __future__ import annotations

import json

import numpy as np
import pytest

pytest.importorskip("gymnasium")
pytest.importorskip("minari")

from ascent.app.collect import collect, medium_checkpoint, replay_episodes  # noqa: E402
from ascent.classic.replay import ReplayBuffer  # noqa: E402
from ascent.offline.dataset import DatasetError, Episode, load_transitions, read_episodes, write_dataset  # noqa: E402


def episode(T: int, rng: np.random.Generator, terminal: bool) -> Episode:
    term = np.zeros(T, bool)
    term[-1] = terminal
    trunc = np.zeros(T, bool)
    trunc[-1] = not terminal
    return Episode(
        rng.normal(size=(T + 1, 3)).astype(np.float32),
        rng.uniform(-2, 2, size=(T, 1)).astype(np.float32),
        rng.normal(size=T).astype(np.float32),
        term,
        trunc,
    )


def test_write_then_read_round_trips_every_field(tmp_path):
    rng = np.random.default_rng(0)
    eps = [episode(5, rng, True), episode(7, rng, False)]
    folder = write_dataset(tmp_path, "pendulum-test-v0", eps, "Pendulum-v1", "test", -1000.0, -100.0)
    back, meta, _ = read_episodes(folder)
    assert len(back) == 2 and meta["ref_min_score"] == -1000.0 and meta["ref_max_score"] == -100.0
    for a, b in zip(eps, back):
        for key in ("observations", "actions", "rewards", "terminations", "truncations"):
            assert np.array_equal(getattr(a, key), getattr(b, key)), key
    t = load_transitions(folder, "Pendulum-v1", 3)
    assert len(t) == 12 and t.env_id == "Pendulum-v1" and not t.discrete
    assert np.array_equal(t.next_obs[:5], eps[0].observations[1:]) and np.array_equal(
        t.obs[5:], eps[1].observations[:-1]
    )
    assert t.terminated.tolist() == [0, 0, 0, 0, 1] + [0] * 7  # a truncated end is not terminal
    assert np.allclose(t.episode_returns, [eps[0].rewards.sum(), eps[1].rewards.sum()])
    assert t.normalized_score([-1000.0, -100.0]).tolist() == [0.0, 100.0]


def test_a_relative_output_folder_is_written_where_it_says(tmp_path, monkeypatch):
    # `ascent collect ... --out datasets` (the documented command): minari joined a relative folder onto itself
    monkeypatch.chdir(tmp_path)
    folder = write_dataset(
        "datasets", "pendulum-rel-v0", [episode(4, np.random.default_rng(1), True)], "Pendulum-v1", "t"
    )
    assert str(folder) == "datasets/pendulum-rel-v0" and (tmp_path / folder / "data" / "main_data.hdf5").is_file()
    assert len(load_transitions(folder)) == 4


def test_minari_itself_reads_what_ascent_writes(tmp_path, monkeypatch):
    import minari

    rng = np.random.default_rng(1)
    write_dataset(tmp_path, "pendulum-test-v0", [episode(4, rng, False)], "Pendulum-v1", "test", -1.0, 1.0)
    monkeypatch.setenv("MINARI_DATASETS_PATH", str(tmp_path))
    ds = minari.load_dataset("pendulum-test-v0")
    assert ds.total_episodes == 1 and ds.total_steps == 4
    assert float(minari.get_normalized_score(ds, np.array([0.0]))[0]) == 0.5
    assert len(load_transitions("pendulum-test-v0")) == 4  # a Minari id resolves under MINARI_DATASETS_PATH


def test_collect_random_from_a_recipe_writes_episodes_and_is_cached(tmp_path):
    out = tmp_path / "data"
    first = collect("cartpole-ppo", "random", 150, str(out), eval_episodes=2)
    assert not first["cached"] and first["transitions"] == 150 and first["ref_max_score"] is None
    eps, meta, _ = read_episodes(first["path"])
    assert sum(len(e) for e in eps) == 150 and meta["env_spec"] and json.loads(meta["env_spec"])["id"] == "CartPole-v1"
    assert eps[-1].truncations[-1] or eps[-1].terminations[-1]  # the cut episode is marked
    assert all(e.terminations[-1] for e in eps[:-1])  # CartPole's random episodes end by falling
    data_file = out / "cartpole-random-v0" / "data" / "main_data.hdf5"
    stamp = data_file.stat().st_mtime_ns
    again = collect("cartpole-ppo", "random", 150, str(out), eval_episodes=2)
    assert again["cached"] and data_file.stat().st_mtime_ns == stamp
    other = collect("cartpole-ppo", "random", 60, str(out), eval_episodes=2)  # a different request rebuilds
    assert not other["cached"] and other["transitions"] == 60


def test_medium_is_the_checkpoint_nearest_a_third_of_the_expert():
    scores = {"step_1": -1000.0, "step_2": -750.0, "step_3": -500.0, "step_4": -100.0}
    assert medium_checkpoint(scores, -1000.0, -100.0) == "step_2"  # 27.8 is nearer 33.3 than 55.6


def test_replay_buffer_episodes_are_recovered_per_environment():
    class Envs:
        num_envs, discrete, obs_norm = 2, False, None

    class Algo:
        buffer = ReplayBuffer(16, obs_dim=1, action_shape=(1,), discrete=False)

    class Trainer:
        envs, algo = Envs(), Algo()

    buf = Algo.buffer
    # env 0: 0 -> 1 -> 2 (terminal), 10 -> 11 (a time-limit cut: the next row starts at 20), 20 -> 21;
    # env 1: 5 -> 6 -> 7 -> 8 -> 9, one episode still running when the buffer was saved
    steps = [((0, 5), (1, 6), (0, 0)), ((1, 6), (2, 7), (1, 0)), ((10, 7), (11, 8), (0, 0)), ((20, 8), (21, 9), (0, 0))]
    for obs, nxt, term in steps:
        buf.add(
            np.array(obs, np.float32)[:, None], np.zeros((2, 1), np.float32), np.array([1.0, 2.0]),
            np.array(nxt, np.float32)[:, None], np.array(term, bool),
        )  # fmt: skip
    eps = replay_episodes(Trainer())
    got = [(e.observations[:, 0].tolist(), e.terminations.tolist(), e.truncations.tolist()) for e in eps]
    assert got == [
        ([0.0, 1.0, 2.0], [False, True], [False, False]),
        ([10.0, 11.0], [False], [True]),
        ([20.0, 21.0], [False], [True]),
        ([5.0, 6.0, 7.0, 8.0, 9.0], [False] * 4, [False, False, False, True]),
    ]
    assert [e.rewards.tolist() for e in eps] == [[1.0, 1.0], [1.0], [1.0], [2.0] * 4]


def corrupt(folder, edit) -> None:
    import h5py

    with h5py.File(folder / "data" / "main_data.hdf5", "a") as f:
        edit(f)


@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda f: f["episode_1"].__delitem__("rewards"), r"main_data.hdf5: episode_1: missing field 'rewards'"),
        (lambda f: f["episode_0"]["observations"].__setitem__((2, 1), np.nan), r"episode 0: field 'observations'.*NaN"),
        (lambda f: f["episode_0"]["rewards"].__setitem__(0, np.inf), r"episode 0: field 'rewards'.*NaN or infinite"),
    ],
)
def test_bad_datasets_name_the_file_and_the_field(tmp_path, edit, message):
    rng = np.random.default_rng(2)
    folder = write_dataset(tmp_path, "bad-v0", [episode(4, rng, True), episode(3, rng, False)], "Pendulum-v1", "t")
    corrupt(folder, edit)
    with pytest.raises(DatasetError, match=message):
        load_transitions(folder)


def test_mismatched_or_empty_datasets_are_rejected(tmp_path):
    rng = np.random.default_rng(3)
    folder = write_dataset(tmp_path, "p-v0", [episode(4, rng, True)], "Pendulum-v1", "t")
    with pytest.raises(DatasetError, match=r"p-v0/data/metadata.json: field 'env_spec'.*Pendulum-v1.*CartPole-v1"):
        load_transitions(folder, env_id="CartPole-v1")
    with pytest.raises(DatasetError, match=r"field 'observation_space': observations of size 3, the run's env has 4"):
        load_transitions(folder, obs_dim=4)
    with pytest.raises(DatasetError, match=r"no episodes to write"):
        write_dataset(tmp_path, "empty-v0", [], "Pendulum-v1", "t")
    import gymnasium as gym
    from minari.dataset.minari_storage import MinariStorage

    env = gym.make("Pendulum-v1")
    (tmp_path / "none-v0" / "data").mkdir(parents=True)
    MinariStorage.new(tmp_path / "none-v0" / "data", env.observation_space, env.action_space, data_format="hdf5")
    with pytest.raises(DatasetError, match=r"none-v0/data/main_data.hdf5: the dataset has no episodes"):
        load_transitions(tmp_path / "none-v0")
    with pytest.raises(DatasetError, match=r"nowhere: no Minari dataset there"):
        load_transitions(tmp_path / "nowhere")
    short = episode(4, rng, True)
    short.observations = short.observations[:-1]  # T observations instead of T + 1
    folder = write_dataset(tmp_path, "short-v0", [short], None, "t", spaces=(env.observation_space, env.action_space))
    with pytest.raises(DatasetError, match=r"field 'observations' has shape \(4, 3\), expected \(5, 3\)"):
        load_transitions(folder)
