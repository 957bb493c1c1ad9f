"""COMPASS's latent search against POMO sampling at the same test-time budget of rollouts.

    python benchmarks/co_compass.py --problem tsp --n 20 --seeds 5 --pretrain 150 --steps 60 --budget 3200

Per seed (Chalumeau et al. 2023, arXiv:2311.13569, warm-started like the authors' code from a POMO checkpoint):

1. one attention model is trained with POMO for `--pretrain` steps (batch B);
2. from that checkpoint, two arms train `--steps` more steps with the same rollouts per step:
   - compass: the latent-conditioned model (`co.policy compass`, zero latent maps: it starts as the checkpoint),
     K latents x n starts x B instances per step, only the best latent per (instance, start) trained;
   - pomo: the checkpoint trained on with POMO on K x B instances x n starts per step;
3. on the fixed test set, each gets the same budget of rollouts per instance:
   - compass: CMA-ES over the latent space (`latent_search`, P latents x n starts per generation, greedy);
   - compass_uniform: the same rollouts with fresh uniform latents (the paper's no-search ablation);
   - pomo: sampling from every start (`sample_search`, temperature 1), the best kept;
   and, for reference, each arm's greedy multistart (n rollouts).

Prints a JSON line per seed and a summary with the paired differences (compass - pomo) and their 95% t-intervals.
The arms are run in alternating order by seed (ABBA) so that the machine's load falls on both.
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

from ascent.co.compass import CompassTrainer, LatentParams, from_checkpoint, latent_search, sample_search  # noqa: E402
from ascent.co.decoding import evaluate  # noqa: E402
from ascent.co.solvers import gap, load_test_set  # noqa: E402
from ascent.co.train import CoTrainer  # noqa: E402
from ascent.config.schema import CoConfig  # noqa: E402

SMALL = "embed_dim=64, layers=3, heads=4, ff_hidden=256"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--problem", choices=["tsp", "cvrp"], default="tsp")
    ap.add_argument("--n", type=int, default=20)
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--first-seed", type=int, default=0)
    ap.add_argument("--pretrain", type=int, default=150, help="POMO steps of the checkpoint both arms start from")
    ap.add_argument("--steps", type=int, default=60, help="phase-2 steps of each arm")
    ap.add_argument("--latents", type=int, default=8, help="K, latents per training step")
    ap.add_argument("--latent-dim", type=int, default=16)
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--lr", type=float, default=1e-4)
    ap.add_argument("--budget", type=int, default=3200, help="test-time rollouts per instance")
    ap.add_argument(
        "--popsize", type=int, default=16, help="latents (compass) or samples (pomo) per start and generation"
    )
    ap.add_argument("--components", type=int, default=3, help="CMA-ES states per instance")
    ap.add_argument("--eval-size", type=int, default=100)
    ap.add_argument("--plot", default="", help="write the mean gap against rollouts spent to this PNG")
    ap.add_argument(
        "--aggregate", nargs="+", default=[], help="summarise (and --plot) the seed lines of earlier runs' output files"
    )
    args = ap.parse_args()
    if args.aggregate:
        rows = [json.loads(line) for f in args.aggregate for line in open(f) if line.startswith('{"seed"')]
        if not rows:
            raise SystemExit(f"no seed lines in {', '.join(args.aggregate)}")
        summarise(rows, {"aggregate": args.aggregate, "seeds": [r["seed"] for r in rows]}, args.plot)
        return
    if args.budget < 1:
        raise SystemExit(f"--budget must be positive, got {args.budget}")
    torch.set_num_threads(1)
    test = load_test_set(args.problem, args.n, size=args.eval_size)
    inst = test.instances
    base = CoConfig(
        problem=args.problem,
        n=args.n,
        policy=f"attention_model({SMALL})",
        steps=args.pretrain,
        batch_size=args.batch_size,
        lr=args.lr,
        eval_size=args.eval_size,
        eval_modes=["multistart"],
        log_every=10**6,
    )
    lp = LatentParams(latent_dim=args.latent_dim, latents=args.latents)
    rows: list[dict] = []
    for seed in range(args.first_seed, args.first_seed + args.seeds):
        t0 = time.perf_counter()
        phase1 = CoTrainer(base, seed, test)
        phase1.fit()
        row: dict = {
            "seed": seed,
            "checkpoint_gap_multistart": gap(evaluate(phase1.policy, inst, "multistart"), test.ref_cost),
        }
        order = ["compass", "pomo"] if seed % 2 == 0 else ["pomo", "compass"]
        for arm in order:
            if arm == "compass":
                cfg = replace(
                    base,
                    steps=args.pretrain + args.steps,
                    loss="compass",
                    policy=f"compass({SMALL}, latent_dim={args.latent_dim}, latents={args.latents})",
                )
                tr = CompassTrainer(cfg, seed, test)
                tr.policy = from_checkpoint(copy.deepcopy(phase1.policy), lp)
            else:
                cfg = replace(base, steps=args.pretrain + args.steps, batch_size=args.batch_size * args.latents)
                tr = CoTrainer(cfg, seed, test)
                tr.policy = copy.deepcopy(phase1.policy)
            tr.optim = torch.optim.Adam(tr.policy.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
            tr.gen.set_state(phase1.gen.get_state())
            tr.sample_gen.set_state(phase1.sample_gen.get_state())
            tr.steps = args.pretrain
            t1 = time.perf_counter()
            c1 = time.process_time()
            tr.fit()
            row[f"{arm}_train_cpu_s"] = round(time.process_time() - c1, 1)
            row[f"{arm}_train_wall_s"] = round(time.perf_counter() - t1, 1)
            c1 = time.process_time()
            if arm == "compass":
                res = latent_search(
                    tr.policy, inst, args.budget, popsize=args.popsize, components=args.components, seed=seed
                )
                uni = latent_search(tr.policy, inst, args.budget, popsize=args.popsize, strategy="uniform", seed=seed)
                row["compass_uniform_gap"] = gap(uni.cost, test.ref_cost)
                tr.policy.set_latents(torch.zeros(1, args.latent_dim))
                row["compass_greedy_multistart_gap"] = gap(evaluate(tr.policy, inst, "multistart"), test.ref_cost)
            else:
                res = sample_search(tr.policy, inst, args.budget, seed=seed, per_generation=args.popsize)
                row["pomo_greedy_multistart_gap"] = gap(evaluate(tr.policy, inst, "multistart"), test.ref_cost)
            row[f"{arm}_search_cpu_s"] = round(time.process_time() - c1, 1)
            row[f"{arm}_gap"] = gap(res.cost, test.ref_cost)
            row[f"{arm}_budget_used"] = res.used
            row[f"{arm}_curve"] = [(u, round(100 * (c / float(test.ref_cost.mean()) - 1), 4)) for u, c in res.curve]
        row["seed_wall_s"] = round(time.perf_counter() - t0, 1)
        row["load"] = os.getloadavg()[0]
        rows.append(row)
        print(json.dumps({k: round(v, 4) if isinstance(v, float) else v for k, v in row.items()}), flush=True)
    summarise(rows, {k: v for k, v in vars(args).items() if k != "aggregate"}, args.plot)


def summarise(rows: list[dict], summary: dict, plot: str) -> None:
    """Means, paired differences with 95% t-intervals, the mean curves; a PNG of the curves if `plot`."""
    for key in ("compass_gap", "compass_uniform_gap", "pomo_gap", "pomo_greedy_multistart_gap"):
        summary[f"mean_{key}"] = round(statistics.mean(r[key] for r in rows), 4)
    for other in ("pomo_gap", "compass_uniform_gap"):
        diffs = [r["compass_gap"] - r[other] for r in rows]
        summary[f"diff_compass_minus_{other}"] = round(statistics.mean(diffs), 4)
        summary[f"diff_compass_minus_{other}_ci95"] = ci95(diffs)
    budgets = [u for u, _ in rows[0]["compass_curve"]]
    for arm in ("compass", "pomo"):
        summary[f"{arm}_curve_mean"] = [
            [u, round(statistics.mean(r[f"{arm}_curve"][i][1] for r in rows), 3)] for i, u in enumerate(budgets)
        ]
    print(json.dumps(summary), flush=True)
    if plot:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(6, 4))
        for arm, color, label in (
            ("compass", "tab:red", "COMPASS, CMA-ES latent search"),
            ("pomo", "tab:blue", "POMO, sampling"),
        ):
            for r in rows:
                ax.plot(budgets, [c for _, c in r[f"{arm}_curve"]], color=color, alpha=0.2, lw=0.8)
            ax.plot(
                budgets,
                [c for _, c in summary[f"{arm}_curve_mean"]],
                color=color,
                lw=2,
                label=f"{label} (mean of {len(rows)})",
            )
        ax.set_xlabel("rollouts per instance")
        ax.set_ylabel("gap of the best tour so far (%)")
        ax.set_title("test-time search at equal rollouts")
        ax.grid(alpha=0.3)
        ax.legend()
        fig.tight_layout()
        Path(plot).parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(plot, dpi=110)


if __name__ == "__main__":
    main()
