"""One Stable-Baselines3 run of a classic-RL benchmark task: train, then evaluate 10 deterministic episodes.

Runs inside `.venv-sb3` (built by `benchmarks/sb3_env.sh`; SB3 is never a dependency of ascent), started by
`benchmarks/classic_vs_sb3.py` as a subprocess. Standard library + SB3 + gymnasium only: no ascent import.

The hyper-parameters are RL Baselines3 Zoo's tuned values, the ones ascent's recipes use (written here once,
in `TASKS`). Usage:

    .venv-sb3/bin/python benchmarks/sb3_run.py --task cartpole-ppo --seed 0 [--steps N] [--threads 1] [--out F]

Prints one JSON line (also written to `--out`): final_return (mean undiscounted return of 10 deterministic
evaluation episodes after training), final_return_std, eval_returns, wall_seconds (the `learn()` call, the
training only), train_cpu_seconds (the process's CPU seconds over the same call, all threads), eval_seconds,
env_steps, versions and thread count.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Any, Callable

EVAL_EPISODES = 10
"""Deterministic evaluation episodes at the end of training (the same protocol as ascent's summary.json)."""
EVAL_SEED_OFFSET = 10_000
"""Evaluation episode i of a run with seed s resets with seed s + EVAL_SEED_OFFSET + i: the same start states as
ascent's evaluation (`ascent.classic.loop.EVAL_SEED_OFFSET`)."""


def linear(start: float) -> Callable[[float], float]:
    """SB3 schedule: `progress_remaining` goes 1 -> 0 over training, so this anneals `start` linearly to 0."""
    return lambda progress_remaining: progress_remaining * start


def _torch_nn() -> Any:
    import torch.nn as nn

    return nn


TASKS: dict[str, dict[str, Any]] = {
    # CartPole-v1 PPO (zoo: ppo.yml CartPole-v1)
    "cartpole-ppo": dict(
        env_id="CartPole-v1",
        algo="ppo",
        n_envs=8,
        steps=100_000,
        kwargs=lambda: dict(
            n_steps=32,
            batch_size=256,
            n_epochs=20,
            gamma=0.98,
            gae_lambda=0.8,
            clip_range=linear(0.2),
            learning_rate=linear(1e-3),
            ent_coef=0.0,
            vf_coef=0.5,
            max_grad_norm=0.5,
            normalize_advantage=True,
            policy_kwargs=dict(
                net_arch=dict(pi=[64, 64], vf=[64, 64]), activation_fn=_torch_nn().Tanh, ortho_init=True
            ),
        ),
    ),
    # Acrobot-v1 DQN (zoo: dqn.yml Acrobot-v1); SB3's DQN: Huber loss, max_grad_norm 10, hard target copy
    "acrobot-dqn": dict(
        env_id="Acrobot-v1",
        algo="dqn",
        n_envs=1,
        steps=100_000,
        kwargs=lambda: dict(
            learning_rate=6.3e-4,
            batch_size=128,
            buffer_size=50_000,
            learning_starts=0,
            gamma=0.99,
            target_update_interval=250,
            tau=1.0,
            train_freq=4,
            gradient_steps=-1,
            exploration_fraction=0.12,
            exploration_initial_eps=1.0,
            exploration_final_eps=0.1,
            max_grad_norm=10,
            policy_kwargs=dict(net_arch=[256, 256], activation_fn=_torch_nn().ReLU),
        ),
    ),
    # HalfCheetah-v5 SAC (zoo: sac.yml HalfCheetah-v3, the SB3 defaults with learning_starts 10k)
    "halfcheetah-sac": dict(
        env_id="HalfCheetah-v5",
        algo="sac",
        n_envs=1,
        steps=100_000,
        kwargs=lambda: dict(
            learning_starts=10_000,
            learning_rate=3e-4,
            buffer_size=1_000_000,
            batch_size=256,
            tau=0.005,
            gamma=0.99,
            train_freq=1,
            gradient_steps=1,
            ent_coef="auto",
            target_entropy="auto",
            policy_kwargs=dict(net_arch=[256, 256], activation_fn=_torch_nn().ReLU),
        ),
    ),
    # Hopper-v5 PPO (zoo: ppo.yml Hopper-v3, normalize: true; the zoo gives VecNormalize the algorithm's gamma)
    "hopper-ppo": dict(
        env_id="Hopper-v5",
        algo="ppo",
        n_envs=1,
        steps=200_000,
        normalize=True,
        kwargs=lambda: dict(
            n_steps=512,
            batch_size=32,
            n_epochs=5,
            gamma=0.999,
            gae_lambda=0.99,
            learning_rate=9.80828e-05,
            ent_coef=0.00229519,
            clip_range=0.2,
            max_grad_norm=0.7,
            vf_coef=0.835671,
            policy_kwargs=dict(
                log_std_init=-2,
                ortho_init=False,
                activation_fn=_torch_nn().ReLU,
                net_arch=dict(pi=[256, 256], vf=[256, 256]),
            ),
        ),
    ),
}
"""Task name (as ascent's recipe) -> environment, algorithm, env count, default env steps, SB3 keyword args."""


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--task", required=True, choices=sorted(TASKS))
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--steps", type=int, default=0, help="environment steps (0: the task's default)")
    p.add_argument("--threads", type=int, default=1, help="torch intra-op threads")
    p.add_argument("--out", default="", help="also write the JSON here")
    return p.parse_args(argv)


def build(task: dict[str, Any], seed: int) -> tuple[Any, Any]:
    """(model, vec_env) with the task's hyper-parameters; VecNormalize around the env where the zoo has it."""
    from stable_baselines3 import DQN, PPO, SAC
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.vec_env import VecNormalize

    kwargs = task["kwargs"]()
    venv = make_vec_env(task["env_id"], n_envs=task["n_envs"], seed=seed)
    if task.get("normalize"):
        venv = VecNormalize(venv, gamma=kwargs["gamma"])
    algo = {"ppo": PPO, "dqn": DQN, "sac": SAC}[task["algo"]]
    return algo("MlpPolicy", venv, seed=seed, device="cpu", verbose=0, **kwargs), venv


def progress_callback(total: int, every: int = 10_000) -> Any:
    """An SB3 callback printing `env steps N/total, S s` on stderr every `every` steps (long runs show progress)."""
    from stable_baselines3.common.callbacks import BaseCallback

    class Progress(BaseCallback):
        def _on_training_start(self) -> None:
            self.t0, self.next = time.perf_counter(), every

        def _on_step(self) -> bool:
            if self.num_timesteps >= self.next:
                print(f"env steps {self.num_timesteps}/{total}, {time.perf_counter() - self.t0:.0f} s", file=sys.stderr)
                self.next += every
            return True

    return Progress()


def evaluate(model: Any, venv: Any, env_id: str, seed: int) -> list[float]:
    """Undiscounted returns of EVAL_EPISODES deterministic episodes on a fresh env (the TimeLimit of gym.make);
    observations pass through the training VecNormalize's frozen statistics where there is one."""
    import gymnasium as gym
    import numpy as np

    normalize = getattr(venv, "normalize_obs", None) if hasattr(venv, "obs_rms") else None
    env = gym.make(env_id)
    returns = []
    for i in range(EVAL_EPISODES):
        obs, _ = env.reset(seed=seed + EVAL_SEED_OFFSET + i)
        total, done = 0.0, False
        while not done:
            x = normalize(np.asarray(obs)) if normalize else obs
            action, _ = model.predict(x, deterministic=True)
            obs, reward, terminated, truncated, _ = env.step(action)
            total += float(reward)
            done = terminated or truncated
        returns.append(total)
    env.close()
    return returns


def main(argv: list[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    import gymnasium
    import stable_baselines3
    import torch

    torch.set_num_threads(args.threads)
    task = TASKS[args.task]
    steps = args.steps or task["steps"]
    model, venv = build(task, args.seed)
    t0, c0 = time.perf_counter(), time.process_time()
    model.learn(total_timesteps=steps, callback=progress_callback(steps))
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    t1 = time.perf_counter()
    returns = evaluate(model, venv, task["env_id"], args.seed)
    eval_s = time.perf_counter() - t1
    mean = sum(returns) / len(returns)
    std = (sum((r - mean) ** 2 for r in returns) / len(returns)) ** 0.5
    out = {
        "side": "sb3",
        "task": args.task,
        "env_id": task["env_id"],
        "seed": args.seed,
        "final_return": mean,
        "final_return_std": std,
        "eval_returns": returns,
        "wall_seconds": wall,
        "train_cpu_seconds": cpu,
        "eval_seconds": eval_s,
        "env_steps": int(model.num_timesteps),
        "torch_threads": torch.get_num_threads(),
        "versions": {
            "torch": torch.__version__,
            "stable_baselines3": stable_baselines3.__version__,
            "gymnasium": gymnasium.__version__,
            "python": sys.version.split()[0],
        },
        "omp_num_threads": os.environ.get("OMP_NUM_THREADS"),
    }
    line = json.dumps(out)
    print(line, flush=True)
    if args.out:
        with open(args.out, "w") as f:
            f.write(line + "\n")
    return out


if __name__ == "__main__":
    main()
