"""Skipper (Zhao et al. 2024, arXiv:2310.00229) against its model-free baseline (DQN, same widths, same replay and
update frequency) at equal environment steps on ascent/RandDistShift-6x6-v0 (50 training layouts, lava density
0.3). Each trained agent is evaluated, deterministically, on `--episodes` episodes of: the training layouts,
held-out layouts of the training difficulty, and held-out layouts of harder and easier difficulties (the paper's
out-of-distribution test). The figure is the success rate (the return: +1 at the goal). Seeds run in ABBA order so
a loaded machine's load falls on both arms. Prints each run, then per evaluation set the paired difference
Skipper - DQN with a 95% t interval.

    OMP_NUM_THREADS=1 nice -n 10 python benchmarks/classic_skipper.py --steps 12000 --seeds 5
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import time
from functools import partial
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.common import ci95  # noqa: E402

ENV = "ascent/RandDistShift-6x6-v0"
COMMON = "lr=0.0005,batch_size=64,buffer_size=50000,learning_starts=1000,target_update_interval=1000,"
COMMON += "exploration_fraction=0.25,hidden=[{h},{h}],train_freq={tf}"
ARMS = {"dqn": "dqn(" + COMMON + ")", "skipper": "skipper(" + COMMON + ")"}
SETS = {"train layouts": {}, "held-out 0.3": {"layouts": 0, "difficulty": 0.3}}
SETS.update({"held-out 0.15": {"layouts": 0, "difficulty": 0.15}, "held-out 0.45": {"layouts": 0, "difficulty": 0.45}})


def run(arm: str, steps: int, seed: int, episodes: int, train_freq: int, hidden: int) -> dict[str, float]:
    import gymnasium as gym
    import numpy as np
    import torch

    from ascent.classic.envs import evaluate
    from ascent.classic.loop import ClassicTrainer
    from ascent.config import load_config

    torch.set_num_threads(1)
    random.seed(seed), np.random.seed(seed), torch.manual_seed(seed)  # as ascent.app.classic does
    over = [f"classic.env={ENV}", f"classic.total_steps={steps}", "classic.num_envs=1", f"seed={seed}"]
    over.append("classic.algorithm=" + ARMS[arm].format(tf=train_freq, h=hidden))
    trainer = ClassicTrainer(load_config("acrobot-dqn", over).classic, seed)
    t = time.process_time()
    trainer.fit(lambda *a: None, lambda s: None)
    out = {"train_cpu_s": round(time.process_time() - t, 1)}
    for name, kwargs in SETS.items():
        if hasattr(trainer.algo, "begin_episodes"):
            trainer.algo.begin_episodes()
        act = partial(trainer.algo.act, deterministic=True)
        returns = evaluate(partial(gym.make, ENV, **kwargs), act, episodes, 10**6 + 1000 * seed)
        out[name] = statistics.mean(returns)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=12000)
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--episodes", type=int, default=30)
    ap.add_argument("--train-freq", type=int, default=4)
    ap.add_argument("--hidden", type=int, default=128)
    args = ap.parse_args()
    cpu = next((x.split(":")[1].strip() for x in open("/proc/cpuinfo") if x.startswith("model name")), "?")
    print(json.dumps({"cpu": cpu, "load": os.getloadavg(), **vars(args)}), flush=True)
    res: dict[str, dict[int, dict]] = {"dqn": {}, "skipper": {}}
    for seed in range(args.seeds):
        for arm in ("dqn", "skipper") if seed % 2 == 0 else ("skipper", "dqn"):
            res[arm][seed] = run(arm, args.steps, seed, args.episodes, args.train_freq, args.hidden)
            print(json.dumps({"arm": arm, "seed": seed, **res[arm][seed], "load": os.getloadavg()[0]}), flush=True)
    for name in SETS:
        d = [res["skipper"][s][name] - res["dqn"][s][name] for s in res["dqn"]]
        means = {arm: statistics.mean(r[s][name] for s in r) for arm, r in res.items()}
        print(
            f"{name}: dqn {means['dqn']:.3f} skipper {means['skipper']:.3f}; skipper - dqn mean "
            f"{statistics.mean(d):+.3f} sd {statistics.stdev(d):.3f} 95% t {ci95(d, 3)} over {len(d)} seeds"
        )


if __name__ == "__main__":
    main()
