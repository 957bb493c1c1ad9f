"""DR-RL against static (uniform) low rank (Erden 2025, arXiv:2512.15973): per-layer rank selection in a small
attention network, reward = fidelity - cost - perturbation.

    python benchmarks/rank_selection.py --seeds 5 --iterations 150

Per seed s: `make_problem(s)` (4 layers with their own spectral decay); `dr_rl` trains its policy by REINFORCE
(--iterations updates of 64 sequences), `uniform` picks the grid rank of best mean reward on 128 training
sequences (the tuned static baseline); every policy, and every fixed rank of the grid (the uniform frontier), is
scored on the same 512 held-out sequences of seed s. Prints a JSON line per seed and the paired differences
dr_rl - uniform (episode reward, per-layer fidelity, cost r / d, end-to-end fidelity) and dr_rl's fidelity minus the
uniform frontier's fidelity at dr_rl's cost (linear interpolation between grid ranks), with 95% t-intervals.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from ascent.applications.rank_selection import RANK_METHODS, RANKS, fixed_rank, make_problem, score  # noqa: E402
from benchmarks.common import ci95, load  # noqa: E402

KEYS = ("reward", "fidelity", "cost", "end_to_end")


def run_seed(seed: int, iterations: int) -> dict:
    problem = make_problem(seed)
    test = problem.sample(512, torch.Generator().manual_seed(100_000 + seed))
    out: dict = {"seed": seed}
    frontier = [score(problem, fixed_rank(i), test) for i in range(len(RANKS))]
    for name in ("uniform", "dr_rl"):
        policy = RANK_METHODS.resolve(f"{name}(iterations={iterations})")(problem, seed)
        sc = score(problem, policy, test)
        out[name] = {k: round(sc[k], 4) for k in KEYS} | {"ranks": sc["ranks"]}
    costs, fids = [f["cost"] for f in frontier], [f["fidelity"] for f in frontier]
    order = np.argsort(costs)
    at = float(np.interp(out["dr_rl"]["cost"], np.array(costs)[order], np.array(fids)[order]))
    out["uniform_fidelity_at_dr_rl_cost"] = round(at, 4)
    out["frontier"] = [[RANKS[i], round(f["cost"], 3), round(f["fidelity"], 4)] for i, f in enumerate(frontier)]
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--iterations", type=int, default=150)
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    rows = []
    for seed in range(args.seeds):
        rows.append(run_seed(seed, args.iterations))
        print(json.dumps(rows[-1]), flush=True)
    summary: dict = {}
    for k in KEYS:
        d = [r["dr_rl"][k] - r["uniform"][k] for r in rows]
        summary[f"dr_rl - uniform: {k}"] = {
            "dr_rl": round(statistics.mean(r["dr_rl"][k] for r in rows), 4),
            "uniform": round(statistics.mean(r["uniform"][k] for r in rows), 4),
            "mean": round(statistics.mean(d), 4),
            "ci95": ci95(d),
        }
    d = [r["dr_rl"]["fidelity"] - r["uniform_fidelity_at_dr_rl_cost"] for r in rows]
    summary["dr_rl fidelity - uniform frontier at the same cost"] = {
        "mean": round(statistics.mean(d), 4),
        "ci95": ci95(d),
    }
    print(json.dumps({"summary": summary, "seeds": args.seeds, "load": load()}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
