"""SEQUOIA against its myopic baseline on capacity-constrained coRMABs (Xu, Wilder, Khalil & Tambe 2025,
arXiv:2503.01919).

    python benchmarks/co_sequoia.py --seeds 5 --arms 8 --workers 3 --horizon 10 --episodes 40 --eval-episodes 50

Per seed s: a fresh instance `generate_cormab(arms, workers, seed=s)`; SEQUOIA trains on it (`train_sequoia`, seed
s: myopic pretraining, then DQN with a MILP argmax per step); then SEQUOIA's greedy MILP policy, the myopic MILP
policy, a random feasible policy and the null policy (never act) are evaluated on the same `--eval-episodes`
episodes (common random numbers: the same start states and transition draws for every policy). Prints a JSON line
per seed and a summary: the mean return of each policy and the paired difference sequoia - myopic with its 95%
t-interval over seeds. One torch thread; the HiGHS MILPs run single-threaded.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import ci95  # noqa: E402

from ascent.co.rmab import evaluate, generate_cormab, myopic  # noqa: E402
from ascent.co.sequoia import SequoiaParams, greedy_action, train_sequoia  # noqa: E402


def run_seed(seed: int, args: argparse.Namespace) -> dict:
    inst = generate_cormab(args.arms, args.workers, seed=seed, horizon=args.horizon)
    cpu0, wall0 = time.process_time(), time.time()
    params = SequoiaParams(
        episodes=args.episodes, pretrain_samples=args.pretrain_samples, pretrain_epochs=args.pretrain_epochs
    )
    net, info = train_sequoia(inst, seed, params)
    train_cpu, train_wall = time.process_time() - cpu0, time.time() - wall0
    g = torch.Generator().manual_seed(seed)
    policies = {
        "sequoia": lambda s: greedy_action(net, inst, s)[0],
        "myopic": myopic(inst),
        "random": lambda s: inst.random_action(g),
        "null": lambda s: torch.zeros(inst.arms),
    }
    eval_seed = 10_000 + seed
    out = {"seed": seed, "train_cpu_s": round(train_cpu, 1), "train_wall_s": round(train_wall, 1), **info}
    for name, policy in policies.items():
        out[name] = round(statistics.mean(evaluate(inst, policy, args.eval_episodes, eval_seed)), 4)
    out["diff"] = round(out["sequoia"] - out["myopic"], 4)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--first-seed", type=int, default=0)
    ap.add_argument("--arms", type=int, default=8)
    ap.add_argument("--workers", type=int, default=3)
    ap.add_argument("--horizon", type=int, default=10)
    ap.add_argument("--episodes", type=int, default=40, help="SEQUOIA's DQN episodes")
    ap.add_argument("--eval-episodes", type=int, default=50)
    ap.add_argument("--pretrain-samples", type=int, default=SequoiaParams.pretrain_samples)
    ap.add_argument("--pretrain-epochs", type=int, default=SequoiaParams.pretrain_epochs)
    args = ap.parse_args()
    torch.set_num_threads(1)
    print(json.dumps({"cpu": _cpu(), "load": os.getloadavg(), "args": vars(args)}), flush=True)
    rows = []
    for seed in range(args.first_seed, args.first_seed + args.seeds):
        rows.append(run_seed(seed, args))
        print(json.dumps(rows[-1]), flush=True)
    diffs = [r["diff"] for r in rows]
    summary = {
        name: round(statistics.mean(r[name] for r in rows), 3) for name in ("sequoia", "myopic", "random", "null")
    }
    summary.update(
        diff_mean=round(statistics.mean(diffs), 3),
        diff_sd=round(statistics.stdev(diffs), 3) if len(diffs) > 1 else 0.0,
        diff_ci95=ci95(diffs, digits=3),
        wins=sum(d > 0 for d in diffs),
        seeds=len(diffs),
        load_end=os.getloadavg(),
    )
    print(json.dumps({"summary": summary}), flush=True)


def _cpu() -> str:
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown"


if __name__ == "__main__":
    main()
