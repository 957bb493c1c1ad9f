"""Time to target from an `ascent compare` folder: per seed, the training seconds (the sum of `time/step` over
the RL steps, evaluations excluded) an arm needs to first reach the greedy held-out accuracy the base arm ends
with on the same seed, against the base arm's own. Made for RAPID's claim (Huang et al. 2025, arXiv:2510.03515:
less running time at similar accuracy) measured as `grpo_2mb` against `grpo`; run the compare with a dense
`train.eval_every` (the arm's crossing is only known to the next evaluation, so its time is an upper bound).

    ascent compare hard --variants V.yaml --seeds 5 --jobs 1 --name rapid train.eval_every=5 eval.pass_k=0 \\
        control.enabled=false
    python benchmarks/time_to_target.py compare/rapid --base grpo --arm grpo_2mb --seeds 5
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np


def curve(run: Path) -> list[tuple[int, float, float]]:
    """(step, greedy accuracy, training seconds so far) at every evaluation of the RL phase, the final one included."""
    points, seconds = [], 0.0
    for line in (run / "metrics.jsonl").read_text().splitlines():
        row = json.loads(line)
        if row.get("phase") != "rl":
            continue
        seconds += float(row.get("time/step", 0.0))
        if row.get("eval/accuracy") is not None:
            points.append((int(row["step"]), float(row["eval/accuracy"]), seconds))
    summary = json.loads((run / "summary.json").read_text())
    if not points or points[-1][0] != summary["steps"]:
        points.append((int(summary["steps"]), float(summary["accuracy_after_rl"]), seconds))
    return points


def crossing(points: list[tuple[int, float, float]], target: float) -> tuple[int | None, float]:
    for step, acc, seconds in points:
        if acc >= target:
            return step, seconds
    return None, float("nan")


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("folder", help="an `ascent compare` output folder (holding runs/)")
    p.add_argument("--base", default="grpo")
    p.add_argument("--arm", default="grpo_2mb")
    p.add_argument("--seeds", type=int, default=5)
    args = p.parse_args(argv)
    runs = Path(args.folder) / "runs"
    ratios, lines = [], []
    for seed in range(args.seeds):
        base, arm = curve(runs / f"{args.base}__seed{seed}"), curve(runs / f"{args.arm}__seed{seed}")
        target = base[-1][1]
        base_step, base_s = crossing(base, target)
        arm_step, arm_s = crossing(arm, target)
        ratios.append(arm_s / base_s)
        lines.append(
            f"seed {seed}: {args.base} ends at {target:.3f}, first reached at step {base_step} ({base_s:.2f} s); "
            f"{args.arm} at step {arm_step} ({arm_s:.2f} s), ends at {arm[-1][1]:.3f}"
        )
    r = np.asarray(ratios)
    rng = np.random.default_rng(0)
    finite = r[np.isfinite(r)]  # a seed whose arm never reaches the target has no time (nan): left out
    boot = [float(np.mean(rng.choice(finite, len(finite)))) for _ in range(10_000)] if len(finite) else [np.nan]
    out = {
        "base": args.base,
        "arm": args.arm,
        "time_to_base_final_ratio": float(np.nanmean(r)),
        "ci95": [float(np.percentile(boot, 2.5)), float(np.percentile(boot, 97.5))],
        "per_seed": [round(float(x), 3) for x in r],
    }
    print("\n".join(lines))
    print(json.dumps(out))
    return out


if __name__ == "__main__":
    main()
