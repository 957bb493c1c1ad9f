"""PAMC (Shihab, Akter & Sharma 2025, arXiv:2509.03790) on tabular low-rank reward matrices: weighted conformal
coverage at the nominal level, set size shrinking with data, and the samples the greedy policy needs against the
no-structure baseline (per-entry means). Coverage is exact given the data (Gaussian noise integrated in closed form),
averaged over uniformly drawn entries, then over seeds.

    OMP_NUM_THREADS=1 python benchmarks/theory_pamc.py --seeds 10
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

import numpy as np
from scipy.stats import norm

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import ci95  # noqa: E402

from ascent.applications.pamc import REWARD_COMPLETERS, conformal_sets, make_world  # noqa: E402


def coverage(world, r_hat: np.ndarray, q: np.ndarray) -> float:
    """P(|R + noise - r_hat| <= q) averaged over the entries (uniform test distribution)."""
    err = world.R - r_hat
    return float((norm.cdf((q - err) / world.noise) - norm.cdf((-q - err) / world.noise)).mean())


def measure(sizes: list[int], seeds: int, alpha: float, target: float) -> dict:
    rows = []
    for n in sizes:
        row: dict[str, object] = {"n": n}
        cov_w, cov_u, width, regret = [], [], [], {"pamc": [], "entry_means": []}
        for seed in range(seeds):
            world = make_world(seed)
            obs = world.observe(n, np.random.default_rng(1000 + seed))
            r_hat, q = conformal_sets(obs, alpha=alpha, seed=seed)
            cov_w.append(coverage(world, r_hat, q))
            width.append(float(np.median(2 * q)))
            r_u, q_u = conformal_sets(obs, alpha=alpha, weighted=False, seed=seed)
            cov_u.append(coverage(world, r_u, q_u))
            for name in regret:
                regret[name].append(world.greedy_regret(REWARD_COMPLETERS.resolve(name)(obs)))
        row["coverage_weighted"] = [round(statistics.mean(cov_w), 4), ci95(cov_w)]
        row["coverage_unweighted"] = [round(statistics.mean(cov_u), 4), ci95(cov_u)]
        row["median_set_width"] = round(statistics.median(width), 4)
        for name, v in regret.items():
            row[f"regret_{name}"] = [round(statistics.mean(v), 4), ci95(v)]
        rows.append(row)
        print(json.dumps(row), flush=True)
    need = {}
    for name in ("pamc", "entry_means"):
        hit = [r["n"] for r in rows if r[f"regret_{name}"][0] <= target]
        need[name] = hit[0] if hit else None
    return {"rows": rows, "samples_to_target": need}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--alpha", type=float, default=0.1)
    ap.add_argument("--target", type=float, default=0.1, help="greedy regret for the sample-efficiency comparison")
    ap.add_argument("--sizes", default="200,400,800,1600,3200,6400,12800,25600")
    args = ap.parse_args()
    out = measure([int(x) for x in args.sizes.split(",")], args.seeds, args.alpha, args.target)
    need = out["samples_to_target"]
    ratio = need["entry_means"] / need["pamc"] if need["pamc"] and need["entry_means"] else None
    print(f"samples to greedy regret <= {args.target}: {need}; ratio entry_means / pamc = {ratio}")


if __name__ == "__main__":
    main()
