"""`ascent collect`: offline datasets in Minari's format from a classic recipe or run, with D4RL's mixtures (Fu et al.
2020, "D4RL: Datasets for Deep Data-Driven Reinforcement Learning", arXiv:2004.07219).

    ascent collect RECIPE_OR_RUN --policy random --steps N --out DIR                      # <env>-random-v0
    ascent collect RUN --policy run-checkpoint --level expert --steps N --out DIR         # <env>-expert-v0
    ascent collect RUN --policy run-checkpoint --level medium --steps N --out DIR         # <env>-medium-v0
    ascent collect RUN --policy run-checkpoint --level medium-replay --out DIR            # <env>-medium-replay-v0

Levels (D4RL's definitions, on a run's own checkpoints):
    random         uniformly random actions.
    expert         the run's latest checkpoint, its stochastic policy (D4RL samples its SAC experts' actions).
    medium         the checkpoint whose deterministic return, normalised 0 = random, 100 = expert, is closest to
                   100/3 ("a third of the expert"), its stochastic policy. The run must keep its checkpoints
                   (`classic.checkpoint_every`, `classic.keep_checkpoints`).
    medium-replay  the replay buffer saved in that medium checkpoint: every transition the run stored up to it
                   (off-policy runs: SAC, DQN; its episodes recovered from the buffer's order, the last cut one
                   marked truncated).
Every dataset records ref_min_score (the random policy's mean return) and ref_max_score (the expert checkpoint's
deterministic mean return) in its Minari metadata, so that scores normalise the same way everywhere. Episodes are
cut at `--steps` transitions (the last one marked truncated). A dataset whose folder already holds the same
request (collect.json: source, checkpoint, level, steps, seed) is reused, not rebuilt.
"""

from __future__ import annotations

import json
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Optional

import numpy as np
import torch

from ascent.app.classic import evaluate_checkpoint
from ascent.app.runs import RunDirError, read_run_config
from ascent.classic.envs import evaluate, make_env
from ascent.classic.loop import EVAL_SEED_OFFSET, ClassicTrainer
from ascent.config.schema import RunConfig
from ascent.offline.dataset import DatasetError, Episode, write_dataset
from ascent.trainer.checkpoint import Checkpointer

LEVELS = ("random", "medium", "medium-replay", "expert")
MEDIUM_TARGET = 100.0 / 3.0
"""Normalised score a medium policy aims at (D4RL: about a third of the expert)."""


@dataclass
class Source:
    """What a dataset is collected from: a run directory (with checkpoints) or only a recipe's config."""

    cfg: RunConfig
    run_dir: Optional[Path] = None


def open_source(target: str, overrides: list[str]) -> Source:
    """A run directory (it holds config.yaml) or a recipe name / YAML path."""
    path = Path(target)
    if (path / "config.yaml").exists():
        cfg = read_run_config(path, overrides)
        run_dir: Optional[Path] = path
    else:
        from ascent.config import load_config

        cfg, run_dir = load_config(target, overrides), None
    if cfg.classic is None:
        raise RunDirError(f"{target}: ascent collect needs a classic (Gymnasium) recipe or run; it has no classic:")
    return Source(cfg, run_dir)


def rollout(make: Callable[[], Any], act: Callable[[np.ndarray], np.ndarray], steps: int, seed: int) -> list[Episode]:
    """Episodes of `act` (raw observations (1, D) -> actions (1, ...)) in one environment until `steps`
    transitions; environment i-th reset seeded seed + i; the last episode cut at `steps` is marked truncated."""
    env = make()
    discrete = hasattr(env.action_space, "n")
    episodes: list[Episode] = []
    total = 0
    while total < steps:
        obs, _ = env.reset(seed=seed + len(episodes))
        o, a, r, te, tr = [obs], [], [], [], []
        done = False
        while not done and total < steps:
            action = act(np.asarray(obs, np.float32)[None])[0]
            if not discrete:
                action = np.clip(action, env.action_space.low, env.action_space.high)
            obs, reward, term, trunc, _ = env.step(action)
            o.append(obs), a.append(action), r.append(reward), te.append(term), tr.append(trunc)
            total += 1
            done = term or trunc
        tr[-1] = tr[-1] or not done
        episodes.append(as_episode(o, a, r, te, tr, discrete))
    env.close()
    return episodes


def as_episode(o, a, r, te, tr, discrete: bool) -> Episode:
    return Episode(
        np.asarray(o, np.float32),
        np.asarray(a, np.int64 if discrete else np.float32),
        np.asarray(r, np.float32),
        np.asarray(te, bool),
        np.asarray(tr, bool),
    )


def random_policy(make: Callable[[], Any], seed: int) -> Callable[[np.ndarray], np.ndarray]:
    """Uniformly random actions from the action space, seeded."""
    space = make().action_space
    space.seed(seed)
    return lambda obs: np.stack([space.sample() for _ in range(len(obs))])


def load_trainer(run_dir: Path, checkpoint: Path) -> ClassicTrainer:
    """The run's trainer with `checkpoint`'s networks and state (observation statistics, replay buffer)."""
    cfg = read_run_config(run_dir)
    torch.set_num_threads(cfg.threads or 1)
    trainer = ClassicTrainer(cfg.classic, cfg.seed)
    trainer.weights.load(checkpoint)
    trainer.load_state_dict(Checkpointer.load_state(checkpoint)["trainer"])
    return trainer


def checkpoint_policy(trainer: ClassicTrainer) -> Callable[[np.ndarray], np.ndarray]:
    """The checkpoint's stochastic policy on raw observations (normalised by its frozen statistics)."""
    norm = trainer.envs.obs_norm

    def act(obs: np.ndarray) -> np.ndarray:
        return trainer.algo.act(obs if norm is None else norm(obs, update=False), deterministic=False)

    return act


def run_checkpoints(run_dir: Path) -> list[Path]:
    """The run's whole checkpoints, oldest first."""
    root = run_dir / "checkpoints"
    found = sorted(p for p in root.glob("step_*") if (p / "trainer_state.pt").exists())
    if not found:
        raise RunDirError(f"{run_dir} has no checkpoint; train it first (`ascent train ...`)")
    return found


def reference_scores(source: Source, episodes: int, cache: Path) -> tuple[float, float, dict[str, float]]:
    """(random return, expert return, {checkpoint name: deterministic return}) of the run; cached in `cache`
    (keyed by checkpoint name and modification time)."""
    stored = json.loads(cache.read_text()) if cache.exists() else {}
    c, seed = source.cfg.classic, source.cfg.seed
    if "random" not in stored:
        make = lambda: make_env(c.env, c.wrappers, False)  # noqa: E731
        stored["random"] = float(np.mean(evaluate(make, random_policy(make, seed), episodes, seed + EVAL_SEED_OFFSET)))
    scores: dict[str, float] = {}
    for ckpt in run_checkpoints(source.run_dir) if source.run_dir is not None else []:
        key = f"{ckpt.name}@{(ckpt / 'trainer_state.pt').stat().st_mtime_ns}"
        if key not in stored:
            result = evaluate_checkpoint(source.run_dir, ckpt, [f"classic.eval_episodes={episodes}"])
            stored[key] = result["return_mean"]
        scores[ckpt.name] = stored[key]
    cache.parent.mkdir(parents=True, exist_ok=True)
    cache.write_text(json.dumps(stored, indent=2))
    expert = scores[max(scores)] if scores else float("nan")
    return stored["random"], expert, scores


def medium_checkpoint(scores: dict[str, float], random_return: float, expert_return: float) -> str:
    """The checkpoint whose normalised score is closest to MEDIUM_TARGET (the latest one excluded when there are
    others: it is the expert).

    >>> medium_checkpoint({"step_1": -900.0, "step_2": -600.0, "step_3": -200.0}, -1000.0, -200.0)
    'step_2'
    """
    names = sorted(scores)[:-1] or sorted(scores)
    span = expert_return - random_return
    return min(names, key=lambda n: abs(100.0 * (scores[n] - random_return) / span - MEDIUM_TARGET))


def replay_episodes(trainer: ClassicTrainer) -> list[Episode]:
    """The episodes in the trainer's replay buffer (stored one vector step at a time, environment by environment):
    environment e's transitions are every E-th row from e; an episode ends at a terminal transition or where the
    next row does not start from this row's next observation (a time-limit reset); the last one is truncated."""
    buf = getattr(trainer.algo, "buffer", None)
    if buf is None:
        raise RunDirError(f"{trainer.cfg.algorithm}: medium-replay needs an off-policy run with a replay buffer")
    if trainer.envs.obs_norm is not None:
        raise RunDirError("medium-replay: the run normalised observations, so its replay buffer holds normalised ones")
    n, E = len(buf), trainer.envs.num_envs
    order = np.roll(np.arange(n), -buf.pos) if buf.full else np.arange(n)
    discrete = trainer.envs.discrete
    episodes: list[Episode] = []
    for e in range(E):
        rows = order[e::E]
        start = 0
        for k, i in enumerate(rows):
            last = k == len(rows) - 1
            cut = last or buf.terminated[i] > 0 or not np.array_equal(buf.next_obs[i], buf.obs[rows[k + 1]])
            if cut:
                seg = rows[start : k + 1]
                obs = np.concatenate([buf.obs[seg], buf.next_obs[seg[-1:]]])
                term = buf.terminated[seg] > 0
                trunc = np.zeros(len(seg), bool)
                trunc[-1] = not term[-1]
                actions = buf.actions[seg].reshape(len(seg)) if discrete else buf.actions[seg]
                episodes.append(as_episode(obs, actions, buf.rewards[seg], term, trunc, discrete))
                start = k + 1
    return episodes


def collect(
    target: str,
    policy: str,
    steps: int,
    out: str,
    level: str = "expert",
    seed: Optional[int] = None,
    name: Optional[str] = None,
    eval_episodes: int = 10,
    overrides: Optional[list[str]] = None,
) -> dict[str, Any]:
    """Write (or reuse) one dataset; returns its description (path, episodes, steps, reference scores)."""
    if policy not in ("random", "run-checkpoint"):
        raise DatasetError(f"--policy must be random or run-checkpoint, got {policy!r}")
    level = "random" if policy == "random" else level
    if level not in LEVELS:
        raise DatasetError(f"--level must be one of {', '.join(LEVELS[1:])}, got {level!r}")
    if steps <= 0 and level != "medium-replay":
        raise DatasetError(f"--steps must be > 0, got {steps}")
    source = open_source(target, overrides or [])
    if policy == "run-checkpoint" and source.run_dir is None:
        raise RunDirError(f"{target}: --policy run-checkpoint needs a run directory (with checkpoints), not a recipe")
    c = source.cfg.classic
    seed = source.cfg.seed if seed is None else seed
    dataset_id = name or f"{c.env.split('-')[0].lower()}-{level}-v0"
    folder = Path(out) / dataset_id
    t0 = time.perf_counter()
    random_return, expert_return, scores = reference_scores(
        source, eval_episodes, Path(out) / f".scores-{(source.run_dir or Path(c.env)).name}.json"
    )
    chosen = None
    if level in ("expert", "medium", "medium-replay"):
        chosen = max(scores) if level == "expert" else medium_checkpoint(scores, random_return, expert_return)
    request = {
        "source": str(Path(source.run_dir).resolve()) if source.run_dir else c.env,
        "checkpoint": chosen,
        "checkpoint_return": scores.get(chosen) if chosen else None,
        "checkpoint_score": (
            round(100.0 * (scores[chosen] - random_return) / (expert_return - random_return), 2) if chosen else None
        ),
        "level": level,
        "steps": 0 if level == "medium-replay" else steps,  # the buffer is taken whole
        "seed": seed,
        "env": c.env,
        "ref_min_score": random_return,
        "ref_max_score": expert_return if scores else None,
    }
    done = folder / "collect.json"
    if done.exists() and {k: v for k, v in json.loads(done.read_text()).items() if k in request} == request:
        return {**json.loads(done.read_text()), "cached": True}
    if folder.exists() and any(folder.iterdir()):
        if not done.exists():
            raise DatasetError(f"{folder} exists and was not written by ascent collect; choose another --out or --name")
        shutil.rmtree(folder)  # an earlier, different request: rebuilt
    make = lambda: make_env(c.env, c.wrappers, False)  # noqa: E731
    if level == "random":
        episodes = rollout(make, random_policy(make, seed), steps, seed)
    else:
        trainer = load_trainer(source.run_dir, source.run_dir / "checkpoints" / chosen)
        if level == "medium-replay":
            episodes = replay_episodes(trainer)
        else:
            torch.manual_seed(seed)
            episodes = rollout(make, checkpoint_policy(trainer), steps, seed)
    ref_max = request["ref_max_score"]
    write_dataset(
        out, dataset_id, episodes, c.env, f"ascent {c.algorithm} {level}",
        ref_min_score=random_return if ref_max is not None else None, ref_max_score=ref_max,
    )  # fmt: skip
    returns = [float(ep.rewards.sum()) for ep in episodes]
    result = {
        **request,
        "path": str(folder),
        "episodes": len(episodes),
        "transitions": int(sum(len(ep) for ep in episodes)),
        "episode_return_mean": float(np.mean(returns)),
        "seconds": round(time.perf_counter() - t0, 2),
    }
    done.write_text(json.dumps(result, indent=2))
    return {**result, "cached": False}
