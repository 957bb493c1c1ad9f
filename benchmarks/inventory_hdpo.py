"""HDPO against REINFORCE and the best base-stock policy on lost-sales stores with lead time (Alvo, Russo, Kanoria
& Lee 2023, arXiv:2306.11246).

    python benchmarks/inventory_hdpo.py --seeds 5 --stores 4 --steps 30 150

Per seed s: `make_problem(s)` (4 stores, lead time 2); `hdpo` and `reinforce` train the same store network with
the same demand paths per step and the same Adam steps (each budget in --steps), `base_stock` searches order-up-to
levels; every policy is scored on the same 1,024 held-out demand paths (mean cost per store-period after the
warm-up). Prints a JSON line per seed and, per budget, the paired differences hdpo - reinforce and
hdpo - base_stock (negative: HDPO cheaper) with 95% t-intervals over seeds.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from ascent.applications.inventory import INVENTORY_METHODS, make_problem, simulate  # noqa: E402

T95 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262}


def interval(xs: list[float]) -> dict:
    m = statistics.mean(xs)
    sd = statistics.stdev(xs) if len(xs) > 1 else 0.0
    h = T95.get(len(xs) - 1, 1.96) * sd / len(xs) ** 0.5 if len(xs) > 1 else 0.0
    return {"mean": round(m, 4), "sd": round(sd, 4), "ci95": [round(m - h, 4), round(m + h, 4)]}


def run_seed(seed: int, stores: int, budgets: list[int]) -> dict:
    problem = make_problem(seed, stores)
    test = problem.demand(1024, torch.Generator().manual_seed(100_000 + seed))
    out: dict = {"seed": seed}
    with torch.no_grad():
        out["base_stock"] = round(
            float(simulate(problem, INVENTORY_METHODS.resolve("base_stock")(problem, seed), test).mean()), 4
        )
    for steps in budgets:
        for name in ("hdpo", "reinforce"):
            policy = INVENTORY_METHODS.resolve(f"{name}(steps={steps})")(problem, seed)
            with torch.no_grad():
                out[f"{name}@{steps}"] = round(float(simulate(problem, policy, test).mean()), 4)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--stores", type=int, default=4)
    ap.add_argument("--steps", type=int, nargs="+", default=[30, 150])
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    rows = []
    for seed in range(args.seeds):
        rows.append(run_seed(seed, args.stores, args.steps))
        print(json.dumps(rows[-1]), flush=True)
    summary = {"base_stock": interval([r["base_stock"] for r in rows])}
    for steps in args.steps:
        for name in ("hdpo", "reinforce"):
            summary[f"{name}@{steps}"] = interval([r[f"{name}@{steps}"] for r in rows])
        summary[f"hdpo - reinforce @{steps}"] = interval([r[f"hdpo@{steps}"] - r[f"reinforce@{steps}"] for r in rows])
        summary[f"hdpo - base_stock @{steps}"] = interval([r[f"hdpo@{steps}"] - r["base_stock"] for r in rows])
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(json.dumps({"summary": summary, "seeds": args.seeds, "load1": round(load, 1)}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
