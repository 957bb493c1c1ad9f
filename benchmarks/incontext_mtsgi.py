"""MTSGI vs MSGI vs graph-free option-level Q-learning on held-out subtask-graph tasks (docs/in_context.md).

    PYTHONPATH=. python benchmarks/incontext_mtsgi.py --seeds 0 1 2 3 4 --test-tasks 20

Per seed: a family of template graphs (seeded), `--train-tasks` training tasks whose graphs MSGI infers from
`--prior-episodes` exploration episodes each (MTSGI's prior), `--test-tasks` held-out tasks; on each, every agent
adapts for K episodes and is scored on one test episode. Prints, per K, the mean test return of each agent (mean
over tasks, then over seeds, 95% t-interval over seeds) and the paired differences MTSGI - option_q and MTSGI - MSGI.
"""

from __future__ import annotations

import argparse
import json
import platform

import numpy as np
from scipy import stats

from ascent.incontext.subtask_graph import FamilyParams, SubtaskFamily, build_prior, evaluate


def interval(x: np.ndarray) -> str:
    m = float(np.mean(x))
    h = float(stats.t.ppf(0.975, len(x) - 1) * np.std(x, ddof=1) / np.sqrt(len(x))) if len(x) > 1 else 0.0
    return f"{m:+.3f} [{m - h:+.3f}, {m + h:+.3f}]"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    ap.add_argument("--train-tasks", type=int, default=40)
    ap.add_argument("--test-tasks", type=int, default=20)
    ap.add_argument("--prior-episodes", type=int, default=10)
    ap.add_argument("--shots", type=int, nargs="+", default=[1, 2, 4, 8])
    ap.add_argument("--out", default=None, help="write the per-seed means as JSON here")
    a = ap.parse_args()
    print(f"cpu: {platform.processor() or platform.machine()}; load: {open('/proc/loadavg').read().split()[:3]}")
    per_seed = []
    for seed in a.seeds:
        fam = SubtaskFamily(FamilyParams(), seed=seed)
        prior = build_prior(fam, fam.tasks("train", a.train_tasks, seed), a.prior_episodes, seed)
        out = evaluate(fam, fam.tasks("test", a.test_tasks, seed), a.shots, seed, prior)
        per_seed.append({k: v.mean(1) for k, v in out.items()})  # (shots,)
        print(f"seed {seed}: " + "; ".join(f"{k} {np.round(v.mean(1), 2).tolist()}" for k, v in out.items()))
    agents = list(per_seed[0])
    table = {}
    for s, k in enumerate(a.shots):
        row = {n: np.array([p[n][s] for p in per_seed]) for n in agents}
        print(f"K={k}: " + "; ".join(f"{n} {interval(row[n])}" for n in agents))
        print(
            f"      mtsgi - option_q {interval(row['mtsgi'] - row['option_q'])}; "
            f"mtsgi - msgi {interval(row['mtsgi'] - row['msgi'])}"
        )
        table[k] = {n: row[n].tolist() for n in agents}
    if a.out:
        with open(a.out, "w") as f:
            json.dump(table, f, indent=1)


if __name__ == "__main__":
    main()
