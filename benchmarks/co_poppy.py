"""Poppy's population objective against K agents trained independently with POMO, at equal compute.

    python benchmarks/co_poppy.py --problem tsp --n 20 --seeds 3 --pretrain 100 --steps 60 --agents 4

Per seed: one attention model is trained with POMO for `--pretrain` steps (Poppy's phase 1, Grinsztajn et al. 2022,
arXiv:2210.03475); its decoder is cloned into a population of K agents sharing the encoder; the same clone is then
trained for `--steps` more steps twice, on the same instances and sampling seeds:

- poppy: the population objective (`co_loss` poppy: only the best agent per instance and start gets the gradient,
  the second best as baseline);
- pomo:  each agent its own POMO loss on its own rollouts (`co_loss` pomo with a per-agent baseline): K independent
  POMO agents (sharing the encoder, as the population does).

Both arms roll out the same n solutions per instance per step (equal compute): `CoTrainer.step` rolls out co.starts
(= n) solutions in all, split over the agents, so each agent trains from n / K start nodes (the first n / K nodes),
not from all n as in the paper. The population's test gap is the best over its K agents and n starts (greedy), with
and without 8-fold augmentation, on the fixed test set. Prints a JSON line per (seed, arm) and a summary with the
mean paired difference (poppy - pomo) and its 95% t-interval.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import ci95  # noqa: E402

from ascent.co.population import clone  # noqa: E402
from ascent.co.solvers import load_test_set  # noqa: E402
from ascent.co.train import CoTrainer  # noqa: E402
from ascent.config.schema import CoConfig  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--problem", choices=["tsp", "cvrp"], default="tsp")
    ap.add_argument("--n", type=int, default=20)
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--first-seed", type=int, default=0, help="seeds first_seed .. first_seed + seeds - 1")
    ap.add_argument("--pretrain", type=int, default=100, help="phase 1: POMO steps of the single agent")
    ap.add_argument("--steps", type=int, default=60, help="phase 2: steps of each arm")
    ap.add_argument("--agents", type=int, default=4)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--lr", type=float, default=1e-4)
    ap.add_argument("--policy", default="attention_model(embed_dim=64, layers=3, heads=4, ff_hidden=256)")
    ap.add_argument("--eval-size", type=int, default=200)
    args = ap.parse_args()
    torch.set_num_threads(1)
    test = load_test_set(args.problem, args.n, size=args.eval_size)
    base = CoConfig(
        problem=args.problem,
        n=args.n,
        policy=args.policy,
        steps=args.pretrain,
        batch_size=args.batch_size,
        lr=args.lr,
        eval_size=args.eval_size,
        eval_modes=["multistart", "multistart_aug8"],
        log_every=10**6,
    )
    rows: dict[str, list[dict]] = {"poppy": [], "pomo": []}
    for seed in range(args.first_seed, args.first_seed + args.seeds):
        t0 = time.perf_counter()
        phase1 = CoTrainer(base, seed, test)
        phase1.fit()
        start = phase1.evaluate()
        order = ["poppy", "pomo"] if seed % 2 == 0 else ["pomo", "poppy"]
        for arm in order:
            cfg = replace(base, steps=args.pretrain + args.steps, loss=arm)
            tr = CoTrainer(cfg, seed, test)
            tr.policy = clone(copy.deepcopy(phase1.policy), args.agents)
            tr.optim = torch.optim.Adam(tr.policy.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
            tr.gen.set_state(phase1.gen.get_state())  # both arms see the same instances and sampling draws
            tr.sample_gen.set_state(phase1.sample_gen.get_state())
            tr.steps = args.pretrain
            t1 = time.perf_counter()
            tr.fit()
            res = tr.evaluate()
            row = {
                "seed": seed,
                "arm": arm,
                "agents": args.agents,
                "gap_multistart": res["eval/gap_multistart"],
                "gap_aug8": res["eval/gap_multistart_aug8"],
                "phase1_gap_multistart": start["eval/gap_multistart"],
                "phase1_gap_aug8": start["eval/gap_multistart_aug8"],
                "train_wall_s": time.perf_counter() - t1,
                "load": os.getloadavg()[0],
            }
            rows[arm].append(row)
            print(json.dumps({k: round(v, 4) if isinstance(v, float) else v for k, v in row.items()}), flush=True)
        print(json.dumps({"seed": seed, "seed_wall_s": round(time.perf_counter() - t0, 1)}), flush=True)
    summary = {"problem": args.problem, "n": args.n, "seeds": args.seeds, "agents": args.agents, **vars(args)}
    for key in ("gap_multistart", "gap_aug8"):
        diffs = [a[key] - b[key] for a, b in zip(rows["poppy"], rows["pomo"])]
        summary[f"poppy_{key}"] = round(statistics.mean(r[key] for r in rows["poppy"]), 4)
        summary[f"pomo_{key}"] = round(statistics.mean(r[key] for r in rows["pomo"]), 4)
        summary[f"diff_{key}"] = round(statistics.mean(diffs), 4)
        summary[f"diff_{key}_ci95"] = ci95(diffs)
    print(json.dumps(summary), flush=True)


if __name__ == "__main__":
    main()
