"""IRL in constrained MDPs (Schlaginhaufen & Kamgarpour 2023, arXiv:2306.00629) on an entropy-regularised
gridworld: the constrained IRL reward's constrained optimum matches the expert; the reward is identified only up to
potential shaping and the constraint direction; and rewards not identified up to a constant (the learned ones, or
the true reward plus a potential shaping term) transfer badly to a new budget or transition law. Against the
baseline of the same IRL with the constraint left out of the forward problem. Deterministic (exact occupancies).

    OMP_NUM_THREADS=1 python benchmarks/theory_constrained_irl.py
    OMP_NUM_THREADS=1 python benchmarks/theory_constrained_irl.py --size 4 --steps 200 --trajectories 10,100,1000,10000
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from ascent.applications.constrained_irl import IRL_METHODS, gridworld, sample_occupancy, shaping_residual, with_slip


def l1(a: np.ndarray, b: np.ndarray) -> float:
    return round(float(np.abs(a - b).sum()), 5)


def measure(size: int, steps: int, budgets: list[float], slip: float, seed: int = 0) -> dict:
    world, r = gridworld(size)
    mu_e, lam = world.constrained_soft_optimum(r)
    out: dict[str, object] = {
        "size": size,
        "expert_cost": round(float((world.cost * mu_e).sum()), 4),
        "budget": world.budget,
        "expert_lambda": round(lam, 4),
        "unconstrained_optimum_cost": round(float((world.cost * world.soft_optimum(r)).sum()), 4),
    }
    phi = np.random.default_rng(seed).standard_normal(size * size)
    shaped = r + world.gamma * world.P @ phi - phi[:, None]  # the true reward plus potential shaping
    rewards = {"true": r, "true+shaping": shaped}
    for name in ("constrained", "unconstrained"):
        rewards[name] = IRL_METHODS.resolve(f"{name}(steps={steps})")(world, mu_e)
    new_p = with_slip(world, size, slip)
    for name, rh in rewards.items():
        row = {
            "match_l1": l1(world.constrained_soft_optimum(rh)[0], mu_e),
            "expert_suboptimality": round(world.suboptimality(rh, mu_e), 6),
            "residual_shaping_const_cost": round(shaping_residual(world, rh, r, True, mu_e), 4),
            "residual_shaping_const": round(shaping_residual(world, rh, r, False, mu_e), 4),
        }
        for b in budgets:
            row[f"transfer_budget_{b}_l1"] = l1(
                world.constrained_soft_optimum(rh, b)[0], world.constrained_soft_optimum(r, b)[0]
            )
        row[f"transfer_slip_{slip}_l1"] = l1(
            new_p.constrained_soft_optimum(rh)[0], new_p.constrained_soft_optimum(r)[0]
        )
        out[name] = row
        print(json.dumps({"reward": name, **row}), flush=True)
    return out


def finite_sample(size: int, steps: int, trajectories: list[int], seeds: int) -> list[dict]:
    """Constrained IRL on the empirical occupancy of N expert trajectories: how far the learned reward's constrained
    optimum is from the true expert, and its regularised value under the true reward, as N grows."""
    import statistics

    from common import ci95

    world, r = gridworld(size)
    mu_e, lam = world.constrained_soft_optimum(r)
    pi_e = mu_e / mu_e.sum(1, keepdims=True)
    value = lambda m: float((r * m).sum()) + world.tau * world.entropy(m)  # noqa: E731
    rows = []
    for n in trajectories:
        dist, gap = [], []
        for seed in range(seeds):
            mu_hat = sample_occupancy(world, pi_e, n, np.random.default_rng(seed))
            mu = world.constrained_soft_optimum(IRL_METHODS.resolve(f"constrained(steps={steps})")(world, mu_hat))[0]
            dist.append(float(np.abs(mu - mu_e).sum()))
            gap.append(value(mu_e) - value(mu))
        row = {"trajectories": n, "seeds": seeds, "l1_to_expert": [round(statistics.mean(dist), 4), ci95(dist)]}
        row["true_value_gap"] = [round(statistics.mean(gap), 5), ci95(gap, 5)]
        rows.append(row)
        print(json.dumps(row), flush=True)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", type=int, default=5)
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--budgets", default="0.08,0.3")
    ap.add_argument("--slip", type=float, default=0.3)
    ap.add_argument("--trajectories", default="", help="e.g. 10,100,1000,10000: the finite-sample experiment instead")
    ap.add_argument("--seeds", type=int, default=5)
    args = ap.parse_args()
    if args.trajectories:
        finite_sample(args.size, args.steps, [int(n) for n in args.trajectories.split(",")], args.seeds)
        return
    out = measure(args.size, args.steps, [float(b) for b in args.budgets.split(",")], args.slip)
    print(json.dumps({k: v for k, v in out.items() if not isinstance(v, dict)}))


if __name__ == "__main__":
    main()
