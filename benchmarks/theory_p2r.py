"""Preference-to-reward reduction P2R (Wang, Liu & Jin 2023, arXiv:2306.14111) on tabular final-state-reward MDPs:
the same optimistic reward-based RL algorithm fed by the true reward (control), by P2R, and by the naive
reduction (one comparison per episode, outcome as the reward). Prints per horizon T the cumulative regret, the
final policy's suboptimality and the preference queries, with paired 95% t intervals of the regret differences.

    OMP_NUM_THREADS=1 python benchmarks/theory_p2r.py --seeds 5 --episodes 500,2000,8000
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import ci95  # noqa: E402

from ascent.applications.p2r import PREFERENCE_INTERFACES, TrueReward, make_mdp, run_reduction  # noqa: E402

ARMS = ("true_reward", "p2r", "per_episode")


def measure(episodes: list[int], seeds: int, epsilon: float) -> list[dict]:
    rows = []
    for T in episodes:
        res: dict[str, list[dict]] = {a: [] for a in ARMS}
        for seed in range(seeds):
            mdp = make_mdp(seed)
            for arm in ARMS:
                pref_rng = np.random.default_rng(10_000 + seed)
                if arm == "true_reward":
                    source = TrueReward(mdp)
                else:
                    spec = f"p2r(epsilon={epsilon})" if arm == "p2r" else arm
                    source = PREFERENCE_INTERFACES.resolve(spec)(mdp, pref_rng)
                res[arm].append(run_reduction(mdp, source, T, np.random.default_rng(seed)))
        row: dict[str, object] = {"episodes": T, "seeds": seeds, "epsilon": epsilon}
        for arm in ARMS:
            for m in ("regret", "final_gap", "queries"):
                row[f"{arm}_{m}"] = round(statistics.mean(r[m] for r in res[arm]), 4)
            row[f"{arm}_final_gap_max"] = round(max(r["final_gap"] for r in res[arm]), 4)
        for arm in ("p2r", "per_episode"):
            d = [a["regret"] - b["regret"] for a, b in zip(res[arm], res["true_reward"])]
            row[f"{arm}_minus_true_regret"] = [round(statistics.mean(d), 3), ci95(d, 3)]
        rows.append(row)
        print(json.dumps(row), flush=True)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--episodes", default="500,2000,8000")
    ap.add_argument("--epsilon", type=float, default=0.1)
    args = ap.parse_args()
    measure([int(x) for x in args.episodes.split(",")], args.seeds, args.epsilon)


if __name__ == "__main__":
    main()
