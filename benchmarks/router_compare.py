"""The causal LLM router against its paper's decoupled baseline on logged routing data (Tsiourvas, Sun & Perakis
2025, arXiv:2505.16037).

    python benchmarks/router_compare.py --seeds 5 --n-log 2000 --steps 300

Per seed s: a fresh `make_world(s)` (4 models, 8 features, lambda 0.5), a log of `--n-log` queries routed by the
cheap-leaning logging policy through `RoutingBanditEnv`, the outcome and propensity models fitted on it, then the
decoupled router (utility regression, argmax) and the two end-to-end routers (`cls_bound`, `softmax_regret` on
doubly robust estimates) trained on the same log with the same scorer class; regret computed exactly on 5,000
held-out queries. Prints a JSON line per seed, then each router's mean regret and the paired difference
end-to-end - decoupled (negative: the end-to-end router has lower regret) with its 95% t-interval over seeds.
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

from ascent.applications.router import RouterRun, compare_routers  # noqa: E402

T95 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262}
ROUTERS = ("decoupled", "cls_bound", "softmax_regret")


def interval(xs: list[float]) -> dict:
    m = statistics.mean(xs)
    sd = statistics.stdev(xs) if len(xs) > 1 else 0.0
    h = T95.get(len(xs) - 1, 1.96) * sd / len(xs) ** 0.5 if len(xs) > 1 else 0.0
    return {"mean": round(m, 4), "sd": round(sd, 4), "ci95": [round(m - h, 4), round(m + h, 4)]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--n-log", type=int, default=2000)
    ap.add_argument("--n-test", type=int, default=5000)
    ap.add_argument("--hidden", type=int, default=0, help="scorer hidden width, 0 = linear")
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--lam", type=float, default=0.5)
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    run = RouterRun(n_log=args.n_log, n_test=args.n_test, hidden=args.hidden, steps=args.steps, lam=args.lam)
    rows = []
    for seed in range(args.seeds):
        rows.append(compare_routers(seed, run, ROUTERS))
        print(json.dumps(rows[-1]), flush=True)
    summary = {name: interval([r[name] for r in rows]) for name in (*ROUTERS, "best_constant", "logging")}
    for name in ROUTERS[1:]:
        summary[f"{name} - decoupled"] = interval([r[name] - r["decoupled"] for r in rows])
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(json.dumps({"summary": summary, "seeds": args.seeds, "load1": round(load, 1)}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
