"""One d3rlpy run for benchmarks/offline_vs_d3rlpy.py: train IQL or TD3+BC on a Minari dataset written by
`ascent collect`, evaluate it with the protocol ascent uses, print one JSON line.

Run with d3rlpy importable (`bash benchmarks/d3rlpy_env.sh` installs it into .venv-d3rlpy-site, put on PYTHONPATH
by the benchmark). The dataset is read with ascent's reader (the same arrays both sides train on; reading is not
timed on either side). Hyper-parameters mirror ascent's defaults: Adam 3e-4, batch 256, gamma 0.99, tau 0.005,
ReLU MLPs of `--hidden`, standardised observations; IQL expectile 0.7, beta 3, max weight 100, rewards scaled by
1000 / (max - min episode return), the actor's learning rate cosine-annealed over the run; TD3+BC alpha 2.5,
smoothing 0.2 clipped at 0.5, actor every 2 steps. Timed: `fit` (wall and process CPU seconds). Evaluation: the
mean undiscounted return of `--eval-episodes` deterministic episodes, episode i reset with seed + 10000 + i
(`ascent.classic.envs.evaluate`, the function ascent's runs use).
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np


def mdp_dataset(path: str):
    import d3rlpy

    from ascent.offline.dataset import read_episodes

    episodes, _, _ = read_episodes(path)
    obs = np.concatenate([e.observations[:-1] for e in episodes])
    return d3rlpy.dataset.MDPDataset(
        observations=obs,
        actions=np.concatenate([e.actions for e in episodes]),
        rewards=np.concatenate([e.rewards for e in episodes]),
        terminals=np.concatenate([e.terminations for e in episodes]).astype(np.float32),
        timeouts=np.concatenate([e.truncations & ~e.terminations for e in episodes]).astype(np.float32),
    )


def config(algo: str, hidden: list[int], steps: int, low: np.ndarray, high: np.ndarray):
    import d3rlpy

    enc = d3rlpy.models.VectorEncoderFactory(hidden_units=hidden)
    common = dict(
        actor_learning_rate=3e-4,
        critic_learning_rate=3e-4,
        actor_encoder_factory=enc,
        critic_encoder_factory=enc,
        batch_size=256,
        gamma=0.99,
        tau=0.005,
        observation_scaler=d3rlpy.preprocessing.StandardObservationScaler(),
    )
    if not (np.all(low == -1) and np.all(high == 1)):
        common["action_scaler"] = d3rlpy.preprocessing.MinMaxActionScaler(minimum=low, maximum=high)
    if algo == "iql":
        cosine = d3rlpy.optimizers.lr_schedulers.CosineAnnealingLRFactory(T_max=steps)
        return d3rlpy.algos.IQLConfig(
            **common,
            value_encoder_factory=enc,
            expectile=0.7,
            weight_temp=3.0,
            max_weight=100.0,
            reward_scaler=d3rlpy.preprocessing.ReturnBasedRewardScaler(multiplier=1000.0),
            actor_optim_factory=d3rlpy.optimizers.AdamFactory(lr_scheduler_factory=cosine),
        )
    return d3rlpy.algos.TD3PlusBCConfig(
        **common, target_smoothing_sigma=0.2, target_smoothing_clip=0.5, alpha=2.5, update_actor_interval=2
    )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--algo", choices=["iql", "td3_bc"], required=True)
    p.add_argument("--dataset", required=True)
    p.add_argument("--env", required=True)
    p.add_argument("--steps", type=int, required=True)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--hidden", default="256,256")
    p.add_argument("--eval-episodes", type=int, default=10)
    args = p.parse_args()
    import d3rlpy
    import gymnasium as gym
    import torch

    from ascent.classic.envs import evaluate, make_env

    torch.set_num_threads(1)
    d3rlpy.seed(args.seed)
    dataset = mdp_dataset(args.dataset)
    space = gym.make(args.env).action_space
    hidden = [int(h) for h in args.hidden.split(",")]
    algo = config(args.algo, hidden, args.steps, space.low, space.high).create(device="cpu:0")
    t0, c0 = time.perf_counter(), time.process_time()
    algo.fit(
        dataset,
        n_steps=args.steps,
        n_steps_per_epoch=args.steps,
        show_progress=False,
        save_interval=10**9,
        logger_adapter=d3rlpy.logging.NoopAdapterFactory(),
    )
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    returns = evaluate(lambda: make_env(args.env), algo.predict, args.eval_episodes, args.seed + 10_000)
    result = {"final_returns": returns, "train_seconds": wall, "train_cpu_seconds": cpu, "d3rlpy": d3rlpy.__version__}
    print(json.dumps(result))


if __name__ == "__main__":
    main()
