"""Rulebook-informed RL against the plain driving reward (Bogdoll et al. 2024, arXiv:2402.04168) in the grid-driving
world.

    python benchmarks/rulebook_compare.py --seeds 5 --episodes 3000 --tests 300

Per seed s: tabular Q-learning (same seed, same episodes, same situations drawn by the environment) on each reward:
`plain` (the paper's baseline, no rules), `rulebook` (situation-aware, controlled exceptions) and `static_rulebook`
(the same rules with no exception, an ablation); every greedy policy is scored on the same `--tests` held-out
situations of seed s. Prints a JSON line per seed and the paired differences rulebook - plain and
rulebook - static_rulebook (violations per episode outside exceptions, success rate, success on stopped-vehicle
situations) with 95% t-intervals over seeds.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from ascent.applications.rulebook import train_and_score  # noqa: E402
from benchmarks.common import ci95, load  # noqa: E402

ARMS = ("plain", "rulebook", "static_rulebook")
METRICS = ("violations", "success", "collision", "stopped_success", "slow_success", "exception_steps")


def run_seed(seed: int, episodes: int, tests: int) -> dict:
    out: dict = {"seed": seed}
    for arm in ARMS:
        sc = train_and_score(arm, seed, episodes, tests)
        out[arm] = {
            "violations": round(sc.violations, 4),
            "success": round(sc.success, 4),
            "collision": round(sc.collision, 4),
            "stopped_success": round(sc.by_situation["stopped"]["success"], 4),
            "slow_success": round(sc.by_situation["slow"]["success"], 4),
            "exception_steps": round(sc.exception_steps, 4),
        }
    return out


def summarise(rows: list[dict]) -> dict:
    summary: dict = {}
    for arm in ARMS:
        summary[arm] = {m: round(statistics.mean(r[arm][m] for r in rows), 4) for m in METRICS}
    for other in ("plain", "static_rulebook"):
        for m in ("violations", "success", "stopped_success", "collision"):
            d = [r["rulebook"][m] - r[other][m] for r in rows]
            sd = statistics.stdev(d) if len(d) > 1 else 0.0
            summary[f"rulebook - {other}: {m}"] = {
                "mean": round(statistics.mean(d), 4),
                "sd": round(sd, 4),
                "ci95": ci95(d),
            }
    return summary


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--episodes", type=int, default=3000)
    ap.add_argument("--tests", type=int, default=300)
    args = ap.parse_args(argv)
    rows = []
    for seed in range(args.seeds):
        rows.append(run_seed(seed, args.episodes, args.tests))
        print(json.dumps(rows[-1]), flush=True)
    print(json.dumps({"summary": summarise(rows), "seeds": args.seeds, "load": load()}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
