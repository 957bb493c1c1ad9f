"""ONI (Zheng et al. 2024, arXiv:2410.23022) against extrinsic-only PPO (the paper's baseline) at equal environment
steps on the sparse-reward ascent/KeyDoor-v0 (9 x 9, +1 only at the goal behind a locked door). Both arms: the
same PPO settings; ONI adds the intrinsic reward distilled from its asynchronous scripted annotator. Seeds in ABBA
order so a loaded machine's load falls on both arms. Prints each run's deterministic evaluation return (the success
rate over `--episodes` episodes), then the paired difference ONI - PPO with a 95% t interval.

    OMP_NUM_THREADS=1 nice -n 10 python benchmarks/classic_oni.py --steps 30000 --seeds 5
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.common import ci95  # noqa: E402

PPO = "n_steps=64,batch_size=256,n_epochs=4,gamma=0.99,gae_lambda=0.95,lr=0.0005,ent_coef=0.01,hidden=[64,64]"
ARMS = {"ppo": f"ppo({PPO})", "oni": f"oni({PPO},intrinsic_coef=0.1)"}


def run(arm: str, steps: int, seed: int, episodes: int) -> dict[str, float]:
    import numpy as np
    import torch

    from ascent.classic.loop import ClassicTrainer
    from ascent.config import load_config

    torch.set_num_threads(1)
    random.seed(seed), np.random.seed(seed), torch.manual_seed(seed)  # as ascent.app.classic does
    over = ["classic.env=ascent/KeyDoor-v0", f"classic.total_steps={steps}", "classic.num_envs=8", f"seed={seed}"]
    over.append(f"classic.algorithm={ARMS[arm]}")
    trainer = ClassicTrainer(load_config("cartpole-ppo", over).classic, seed)
    t = time.process_time()
    trainer.fit(lambda *a: None, lambda s: None)
    cpu = round(time.process_time() - t, 1)
    train_eps = trainer.envs.drain_episodes()
    last = [r for r, _ in train_eps[-200:]]
    labels = len(getattr(trainer.algo, "labels", {}))
    success = statistics.mean(trainer.evaluate(episodes))
    return {
        "success": success,
        "train_success_last200": statistics.mean(last) if last else 0.0,
        "cpu_s": cpu,
        "labels": labels,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=30000)
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--episodes", type=int, default=50)
    args = ap.parse_args()
    cpu = next((x.split(":")[1].strip() for x in open("/proc/cpuinfo") if x.startswith("model name")), "?")
    print(json.dumps({"cpu": cpu, "load": os.getloadavg(), **vars(args)}), flush=True)
    res: dict[str, dict[int, dict]] = {"ppo": {}, "oni": {}}
    for seed in range(args.seeds):
        for arm in ("ppo", "oni") if seed % 2 == 0 else ("oni", "ppo"):
            res[arm][seed] = run(arm, args.steps, seed, args.episodes)
            print(json.dumps({"arm": arm, "seed": seed, **res[arm][seed], "load": os.getloadavg()[0]}), flush=True)
    for key in ("success", "train_success_last200"):
        d = [res["oni"][s][key] - res["ppo"][s][key] for s in res["ppo"]]
        means = {arm: statistics.mean(r[s][key] for s in r) for arm, r in res.items()}
        print(
            f"{key}: ppo {means['ppo']:.3f} oni {means['oni']:.3f}; oni - ppo mean {statistics.mean(d):+.3f} "
            f"sd {statistics.stdev(d) if len(d) > 1 else 0.0:.3f} 95% t {ci95(d, 3)} over {len(d)} seeds"
        )


if __name__ == "__main__":
    main()
