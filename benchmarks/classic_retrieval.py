"""The learned retrieval process (Goyal et al. 2022, arXiv:2202.08417; `learned_retrieval_dqn`) against the fixed
k-NN retrieval (`retrieval_dqn`) and against no retrieval (`dqn`) at equal environment steps, the same DQN settings
in all three arms; arms in a rotating order per seed so a loaded machine's load falls on all of them. Prints each
run's deterministic evaluation return and the paired differences with 95% t intervals.

    OMP_NUM_THREADS=1 nice -n 10 python benchmarks/classic_retrieval.py --env CartPole-v1 --steps 5000 --seeds 5
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import ci95  # noqa: E402

COMMON = "lr=0.001,batch_size=64,buffer_size=10000,learning_starts=500,target_update_interval=500,"
COMMON += "exploration_fraction=0.2,hidden=[64,64]"
ARMS = {
    "dqn": f"dqn({COMMON})",
    "retrieval_dqn": f"retrieval_dqn({COMMON})",
    "learned_retrieval_dqn": f"learned_retrieval_dqn({COMMON})",
}


def run(arm: str, env: str, steps: int, seed: int, out: Path, episodes: int) -> dict:
    from ascent.app.pipeline import train
    from ascent.config import load_config

    overrides = [f"classic.env={env}", f"classic.total_steps={steps}", f"seed={seed}", "logging.progress=false"]
    overrides += [f"classic.algorithm={ARMS[arm]}", f"output_dir={out}", f"name={arm}-s{seed}", "threads=1"]
    return train(load_config("acrobot-dqn", [*overrides, f"classic.eval_episodes={episodes}"]))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--env", default="CartPole-v1")
    ap.add_argument("--steps", type=int, default=5000)
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--episodes", type=int, default=10)
    ap.add_argument("--work", default="")
    args = ap.parse_args()
    out = Path(args.work or tempfile.mkdtemp(prefix="retrieval-"))
    names = list(ARMS)
    res: dict[str, dict[int, float]] = {a: {} for a in names}
    for seed in range(args.seeds):
        for arm in names[seed % 3 :] + names[: seed % 3]:
            s = run(arm, args.env, args.steps, seed, out, args.episodes)
            res[arm][seed] = s["final_return"]
            row = {"arm": arm, "seed": seed, "final_return": s["final_return"], "cpu": s.get("train_cpu_seconds")}
            print(json.dumps({**row, "load": round(os.getloadavg()[0], 2)}), flush=True)
    for arm, v in res.items():
        xs = list(v.values())
        print(f"{arm}: mean {statistics.mean(xs):.1f} sd {statistics.stdev(xs):.1f} {xs}")
    for a, b in (
        ("learned_retrieval_dqn", "retrieval_dqn"),
        ("learned_retrieval_dqn", "dqn"),
        ("retrieval_dqn", "dqn"),
    ):
        d = [res[a][s] - res[b][s] for s in res[b]]
        lo, hi = ci95(d, 1)
        print(f"{a} - {b}: mean {statistics.mean(d):.1f} sd {statistics.stdev(d):.1f} 95% t [{lo}, {hi}] n={len(d)}")


if __name__ == "__main__":
    main()
