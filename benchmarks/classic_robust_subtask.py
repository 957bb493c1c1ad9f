"""Robust subtask learning (Jothimurugan et al. 2023, arXiv:2302.02984) against average-case subtask learning (the
same tabular Q-learning on uniformly random subtask orders) on the doors game (ascent.classic.robust_subtask), at
equal environment steps and the same seeds. Arms alternate in ABBA order. Prints, per arm and seed, the exact
worst-case value of the greedy subtask policies (best-responding adversary) and their value over random task
sequences, then the paired difference robust - average of each with its 95% t interval.

    OMP_NUM_THREADS=1 nice -n 10 python benchmarks/classic_robust_subtask.py --episodes 100 300 --seeds 10
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import ci95  # noqa: E402

from ascent.classic.robust_subtask import SUBTASK_LEARNERS, doors_game, policy_value, solve  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--episodes", type=int, nargs="+", default=[100, 300])
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--slip", type=float, default=0.1)
    args = ap.parse_args()
    print("cpu:", next((x.split(":")[1].strip() for x in open("/proc/cpuinfo") if x.startswith("model name")), "?"))
    game = doors_game(slip=args.slip)
    for agg in ("min", "mean"):
        opt = solve(game, agg).argmax(-1)
        print(
            f"exact {agg}-optimal policies: worst case {policy_value(game, opt):.4f}, "
            f"random orders {policy_value(game, opt, 'mean'):.4f}"
        )
    summary = {}
    for episodes in args.episodes:
        res: dict[str, dict[str, list[float]]] = {arm: {"worst": [], "random": []} for arm in ("robust", "average")}
        for seed in range(args.seeds):
            arms = ["robust", "average"] if seed % 2 == 0 else ["average", "robust"]
            for arm in arms:
                q = SUBTASK_LEARNERS.resolve(f"{arm}(episodes={episodes})")(game, seed=seed)
                res[arm]["worst"].append(policy_value(game, q.argmax(-1)))
                res[arm]["random"].append(policy_value(game, q.argmax(-1), "mean"))
        for arm, r in res.items():
            print(
                f"episodes {episodes} {arm}: worst case mean {statistics.mean(r['worst']):.4f} "
                f"sd {statistics.stdev(r['worst']):.4f}; random orders mean {statistics.mean(r['random']):.4f}"
            )
        for metric in ("worst", "random"):
            d = [a - b for a, b in zip(res["robust"][metric], res["average"][metric])]
            summary[f"{episodes}/{metric}"] = {
                "mean": round(statistics.mean(d), 4),
                "sd": round(statistics.stdev(d), 4),
                "ci95": ci95(d),
            }
            print(f"episodes {episodes} robust - average ({metric}): {json.dumps(summary[f'{episodes}/{metric}'])}")
    print(json.dumps({"seeds": args.seeds, "load": os.getloadavg()[0], "paired": summary}))


if __name__ == "__main__":
    main()
