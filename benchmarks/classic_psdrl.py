"""PSDRL (Sasso et al. 2023, arXiv:2305.00477) against DQN at equal environment steps on a small discrete task;
seeds in ABBA order so a loaded machine's load falls on both arms. Prints each run's deterministic evaluation return
and the paired difference PSDRL - DQN with a 95% t interval.

    OMP_NUM_THREADS=1 nice -n 10 python benchmarks/classic_psdrl.py --env CartPole-v1 --steps 5000 --seeds 5
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
from pathlib import Path

DQN = "dqn(lr=0.001,batch_size=64,buffer_size=10000,learning_starts=500,target_update_interval=500,"
DQN += "exploration_fraction=0.2,hidden=[64,64])"
PSDRL = "psdrl(lr=0.001,batch_size=64,buffer_size=10000,learning_starts=500,hidden=[64,64])"
T95 = {2: 12.706, 3: 4.303, 4: 3.182, 5: 2.776, 6: 2.571, 7: 2.447, 8: 2.365, 9: 2.306, 10: 2.262}


def run(arm: str, env: str, steps: int, seed: int, out: Path) -> dict:
    from ascent.app.pipeline import train
    from ascent.config import load_config

    overrides = [f"classic.env={env}", f"classic.total_steps={steps}", f"seed={seed}", "logging.progress=false"]
    overrides += [f"classic.algorithm={DQN if arm == 'dqn' else PSDRL}", f"output_dir={out}", f"name={arm}-s{seed}"]
    return train(load_config("acrobot-dqn", [*overrides, "classic.eval_episodes=10"]))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--env", default="CartPole-v1")
    ap.add_argument("--steps", type=int, default=5000)
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--work", default="")
    args = ap.parse_args()
    out = Path(args.work or tempfile.mkdtemp(prefix="psdrl-"))
    res: dict[str, dict[int, float]] = {"dqn": {}, "psdrl": {}}
    for seed in range(args.seeds):
        for arm in ("dqn", "psdrl") if seed % 2 == 0 else ("psdrl", "dqn"):
            s = run(arm, args.env, args.steps, seed, out)
            res[arm][seed] = s["final_return"]
            row = {"arm": arm, "seed": seed, "final_return": s["final_return"], "cpu": s.get("train_cpu_seconds")}
            print(json.dumps({**row, "load": os.getloadavg()[0]}), flush=True)
    for arm, v in res.items():
        print(f"{arm}: mean {statistics.mean(v.values()):.1f} sd {statistics.stdev(v.values()):.1f} {list(v.values())}")
    d = [res["psdrl"][s] - res["dqn"][s] for s in res["dqn"]]
    m, sd = statistics.mean(d), statistics.stdev(d)
    h = T95.get(len(d), 2.0) * sd / len(d) ** 0.5
    print(f"psdrl - dqn: mean {m:.1f} sd {sd:.1f} 95% t [{m - h:.1f}, {m + h:.1f}] over {len(d)} seeds")


if __name__ == "__main__":
    main()
