"""Offline datasets in the field's format: Farama Minari (https://minari.farama.org), read and written.

A dataset is a Minari dataset directory (`DIR/<id>/data/main_data.hdf5` + `metadata.json`, what
`minari.create_dataset_from_buffers` writes and `minari.load_dataset` reads); `ascent collect` writes them from
classic runs (ascent/app/collect.py), and any local Minari dataset is read the same way. For training, its episodes
are flattened into one `Transitions` record; every episode is checked on the way in, and a bad one fails with a
`DatasetError` naming the file, the episode and the field (a missing key, a NaN, a shape that does not match the
observation or action space, an empty episode list).

Conventions (D4RL's, Fu et al. 2020, arXiv:2004.07219; Minari's): an episode of T steps has T + 1 observations;
`terminations[t]` marks a terminal next state (no bootstrap), `truncations[t]` a time-limit or collection cut
(bootstrap); the normalised score of a return R is 100 (R - ref_min_score) / (ref_max_score - ref_min_score).
"""

from __future__ import annotations

import json
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional, Sequence

import numpy as np

from ascent.typed import ConfigError

REQUIRED = ("observations", "actions", "rewards", "terminations", "truncations")
"""The per-episode fields a dataset must have."""


class DatasetError(ConfigError):
    """A dataset that cannot be used; the message names the file and the field."""


@dataclass
class Episode:
    """One episode as numpy arrays (T steps)."""

    observations: np.ndarray
    """(T + 1, D) float32: the first observation and the one after every step."""
    actions: np.ndarray
    """(T, A) float32 for continuous actions, (T,) int64 for discrete ones."""
    rewards: np.ndarray
    """(T,) float32, undiscounted and raw."""
    terminations: np.ndarray
    """(T,) bool: the step reached a terminal state."""
    truncations: np.ndarray
    """(T,) bool: the episode was cut after this step (time limit or the collection's end)."""

    def __len__(self) -> int:
        return len(self.rewards)


@dataclass
class Transitions:
    """A dataset flattened to N transitions (what the offline algorithms sample from)."""

    obs: np.ndarray
    """(N, D) float32"""
    actions: np.ndarray
    """(N, A) float32, or (N,) int64 for discrete actions"""
    rewards: np.ndarray
    """(N,) float32"""
    next_obs: np.ndarray
    """(N, D) float32"""
    terminated: np.ndarray
    """(N,) float32: 1.0 where the next state is terminal."""
    episode_returns: np.ndarray
    """(E,) float64: each episode's undiscounted return."""
    discrete: bool
    """Whether actions are discrete (then `n_actions` is their count)."""
    n_actions: int = 0
    env_id: Optional[str] = None
    """The Gymnasium id the data came from (the Minari metadata's env_spec), when recorded."""
    ref_min_score: Optional[float] = None
    """Return of the random policy (normalised score 0), when recorded."""
    ref_max_score: Optional[float] = None
    """Return of the policy that scores 100 (the expert), when recorded."""
    path: str = ""

    def __len__(self) -> int:
        return len(self.rewards)

    def normalized_score(self, returns: Any) -> np.ndarray:
        """100 (R - ref_min) / (ref_max - ref_min) (D4RL's normalised score).

        >>> t = Transitions(*(np.zeros(1),) * 6, discrete=False, ref_min_score=-10.0, ref_max_score=30.0)
        >>> t.normalized_score([-10.0, 30.0, 0.0]).tolist()
        [0.0, 100.0, 25.0]
        """
        if self.ref_min_score is None or self.ref_max_score is None:
            raise DatasetError(f"{self.path}: the dataset records no ref_min_score / ref_max_score to normalise with")
        span = self.ref_max_score - self.ref_min_score
        return 100.0 * (np.asarray(returns, np.float64) - self.ref_min_score) / span


def minari():
    """The minari module, or a ConfigError saying how to install it."""
    try:
        import minari
    except ImportError:
        raise ConfigError("offline datasets need minari: pip install 'ascent[offline]'") from None
    return minari


def dataset_dir(path: str | Path) -> Path:
    """The folder holding main_data.hdf5 / metadata.json for `path`: the dataset folder itself, its `data/`
    subfolder, or a Minari id under MINARI_DATASETS_PATH (~/.minari/datasets)."""
    p = Path(path)
    for candidate in (p, p / "data"):
        if (candidate / "metadata.json").is_file():
            return candidate
    if not p.exists() and not p.is_absolute():
        from minari.storage.datasets_root_dir import get_dataset_path

        root = Path(get_dataset_path(str(path))) / "data"
        if (root / "metadata.json").is_file():
            return root
    raise DatasetError(f"{path}: no Minari dataset there (expected metadata.json and the data file in it or in data/)")


def read_episodes(path: str | Path) -> tuple[list[Episode], dict[str, Any], Path]:
    """(episodes, metadata, data folder) of the Minari dataset at `path`, each episode checked (module docstring)."""
    minari()
    from minari.dataset.minari_storage import MinariStorage

    folder = dataset_dir(path)
    try:
        storage = MinariStorage.read(folder)
    except (KeyError, ValueError, OSError) as err:
        raise DatasetError(f"{folder}: not a readable Minari dataset ({err})") from None
    metadata = dict(storage.metadata)
    hdf5 = metadata.get("data_format", "hdf5") == "hdf5"
    where = folder / "main_data.hdf5" if hdf5 else folder
    if storage.total_episodes == 0:
        raise DatasetError(f"{where}: the dataset has no episodes")
    if hdf5:
        check_hdf5_keys(where, storage.total_episodes)
    try:
        raw = list(storage.get_episodes(range(storage.total_episodes)))
    except (KeyError, ValueError, OSError) as err:
        raise DatasetError(f"{where}: an episode cannot be read ({err})") from None
    obs_space, act_space = storage.observation_space, storage.action_space
    episodes = [check_episode(ep, i, where, obs_space, act_space) for i, ep in enumerate(raw)]
    return episodes, metadata, folder


def check_hdf5_keys(file: Path, total: int) -> None:
    """A DatasetError naming the first episode group of an hdf5 Minari file that lacks a required field."""
    import h5py

    with h5py.File(file, "r") as f:
        for i in range(total):
            group = f.get(f"episode_{i}")
            if group is None:
                raise DatasetError(f"{file}: episode_{i} is missing (the metadata says {total} episodes)")
            missing = [key for key in REQUIRED if key not in group]
            if missing:
                raise DatasetError(f"{file}: episode_{i}: missing field {missing[0]!r} (needs {', '.join(REQUIRED)})")


def check_episode(ep: dict[str, Any], i: int, where: Path, obs_space: Any, act_space: Any) -> Episode:
    """One raw Minari episode as an `Episode`, or a DatasetError naming the file, episode and field."""
    name = f"{where}: episode {ep.get('id', i)}"
    missing = [key for key in REQUIRED if ep.get(key) is None]
    if missing:
        raise DatasetError(f"{name}: missing field {missing[0]!r} (an episode needs {', '.join(REQUIRED)})")
    if isinstance(ep["observations"], dict) or not hasattr(obs_space, "shape") or len(obs_space.shape) != 1:
        raise DatasetError(f"{name}: field 'observations': only flat (1-D Box) observations are supported")
    obs = np.asarray(ep["observations"], np.float32)
    T = len(ep["rewards"])
    if T == 0:
        raise DatasetError(f"{name}: field 'rewards' is empty (an episode needs at least one step)")
    if obs.shape != (T + 1, obs_space.shape[0]):
        raise DatasetError(
            f"{name}: field 'observations' has shape {obs.shape}, expected {(T + 1, obs_space.shape[0])} "
            f"(T + 1 observations of the observation space's size)"
        )
    discrete = hasattr(act_space, "n")
    actions = np.asarray(ep["actions"], np.int64 if discrete else np.float32)
    want = (T,) if discrete else (T, int(np.prod(act_space.shape)))
    if actions.shape != want and not (discrete and actions.shape == (T, 1)):
        raise DatasetError(f"{name}: field 'actions' has shape {actions.shape}, expected {want}")
    actions = actions.reshape(want)
    fields = {"observations": obs, "actions": actions, "rewards": np.asarray(ep["rewards"], np.float32)}
    for key in ("terminations", "truncations"):
        fields[key] = np.asarray(ep[key], bool)
        if fields[key].shape != (T,):
            raise DatasetError(f"{name}: field {key!r} has shape {fields[key].shape}, expected {(T,)}")
    for key in ("observations", "actions", "rewards"):
        if not np.isfinite(fields[key]).all():
            raise DatasetError(f"{name}: field {key!r} holds NaN or infinite values")
    if discrete and (actions.min() < 0 or actions.max() >= act_space.n):
        raise DatasetError(f"{name}: field 'actions' holds actions outside 0..{act_space.n - 1}")
    return Episode(**fields)


def flatten(episodes: Sequence[Episode], discrete: bool) -> dict[str, np.ndarray]:
    """The transitions of `episodes` concatenated (the keys of `Transitions`)."""
    return {
        "obs": np.concatenate([ep.observations[:-1] for ep in episodes]),
        "actions": np.concatenate([ep.actions for ep in episodes]),
        "rewards": np.concatenate([ep.rewards for ep in episodes]),
        "next_obs": np.concatenate([ep.observations[1:] for ep in episodes]),
        "terminated": np.concatenate([ep.terminations for ep in episodes]).astype(np.float32),
        "episode_returns": np.array([float(ep.rewards.sum(dtype=np.float64)) for ep in episodes]),
    }


def load_transitions(path: str | Path, env_id: Optional[str] = None, obs_dim: Optional[int] = None) -> Transitions:
    """The Minari dataset at `path` as `Transitions`; with `env_id` / `obs_dim`, a DatasetError when the dataset's
    environment or observation size differs from the run's."""
    episodes, meta, folder = read_episodes(path)
    minari()
    from minari.dataset.minari_storage import MinariStorage

    space = MinariStorage.read(folder).action_space
    discrete = hasattr(space, "n")
    spec = meta.get("env_spec")
    data_env = json.loads(spec).get("id") if isinstance(spec, str) else None
    where = folder / "metadata.json"
    if env_id is not None and data_env is not None and data_env != env_id:
        raise DatasetError(f"{where}: field 'env_spec': the dataset comes from {data_env}, the run's env is {env_id}")
    D = episodes[0].observations.shape[1]
    if obs_dim is not None and D != obs_dim:
        raise DatasetError(f"{where}: field 'observation_space': observations of size {D}, the run's env has {obs_dim}")
    ref = {k: (float(meta[k]) if meta.get(k) is not None else None) for k in ("ref_min_score", "ref_max_score")}
    return Transitions(
        **flatten(episodes, discrete),
        discrete=discrete,
        n_actions=int(space.n) if discrete else 0,
        env_id=data_env,
        path=str(folder),
        **ref,
    )


def write_dataset(
    out: str | Path,
    dataset_id: str,
    episodes: Sequence[Episode],
    env_id: Optional[str],
    algorithm_name: str,
    ref_min_score: Optional[float] = None,
    ref_max_score: Optional[float] = None,
    description: str = "",
    spaces: Optional[tuple[Any, Any]] = None,
) -> Path:
    """Write `episodes` as the Minari dataset `out/dataset_id` (hdf5) and return its folder; `ref_*_score` go into
    the metadata (Minari's normalisation references). Without `env_id` (an environment not in Gymnasium's registry),
    `spaces` gives (observation space, action space)."""
    minari()
    import gymnasium as gym
    from minari.data_collector import EpisodeBuffer
    from minari.dataset.minari_storage import MinariStorage
    from minari.utils import _generate_dataset_metadata

    if not episodes:
        raise DatasetError(f"{out}/{dataset_id}: no episodes to write")
    folder = Path(out) / dataset_id / "data"
    folder.mkdir(parents=True, exist_ok=True)
    spec = gym.spec(env_id) if env_id else None
    if spaces is None:
        env = gym.make(env_id)
        spaces = (env.observation_space, env.action_space)
        env.close()
    buffers = [
        EpisodeBuffer(
            id=i,
            observations=ep.observations,
            actions=ep.actions,
            rewards=ep.rewards,
            terminations=ep.terminations,
            truncations=ep.truncations,
        )
        for i, ep in enumerate(episodes)
    ]
    with warnings.catch_warnings():  # Minari asks for an author, e-mail and permalink: none to give here
        warnings.simplefilter("ignore", UserWarning)
        metadata = _generate_dataset_metadata(
            dataset_id, spec, None, algorithm_name, "ascent", None, None, ref_min_score, ref_max_score,
            None, 100, description or f"{env_id or 'data'}, {algorithm_name}; written by ascent", None,
        )  # fmt: skip
        storage = MinariStorage.new(  # an absolute folder: minari joins a relative one onto itself
            folder.resolve(), observation_space=spaces[0], action_space=spaces[1], env_spec=spec,
            data_format="hdf5",
        )  # fmt: skip
        storage.update_metadata(metadata)
        storage.update_episodes(buffers)
    return folder.parent
