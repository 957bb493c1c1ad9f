"""On-policy distillation vs GRPO alone: RL steps and wall time to reach the teacher's held-out accuracy - 2 points.

Setting (issue 20's bar): the default task; the student starts from a warm start, the teacher is a GRPO-trained
checkpoint of the same warm start. Arms, each from the same warm-start weights, one seed after another:

    grpo      the default recipe (GRPO advantages, ppo_clip)
    opd       algorithm.loss=opd(teacher=T): full-vocabulary reverse KL alone
    opd+rl    algorithm.loss=opd(teacher=T, rl=true): reverse KL added to the PPO-clip loss
    opd-fail  algorithm.loss=opd(teacher=T, rl=true, only_failed=true): HyperEyes' variant

A run's crossing step is the first evaluation (every `--eval-every` steps) whose greedy held-out accuracy is
>= target = teacher accuracy - 0.02; its wall time is the sum of `time/step` up to that step (training only:
evaluations and start-up are left out, so arms with different evaluation counts compare fairly). The ratio is
the arm's crossing step over GRPO's, per seed (the bar: opd <= 1/3).

    python benchmarks/opd_vs_grpo.py --warmstart RUN/warmstart --teacher TEACHER_RUN --out DIR [--seeds 0 1 2]
    python benchmarks/opd_vs_grpo.py --teacher TEACHER_RUN --out DIR --report   # only read existing runs
    ... --set train.optim.lr=1e-4 --tag lr1e-4                                  # both arms at another lr

The teacher's accuracy is `accuracy_after_rl` of its summary.json. Runs use threads=1.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

ARMS = {
    "grpo": [],
    "opd": ["algorithm.loss=opd(teacher={teacher})"],
    "opd+rl": ["algorithm.loss=opd(teacher={teacher},rl=true)"],
    "opd-fail": ["algorithm.loss=opd(teacher={teacher},rl=true,only_failed=true)"],
}


def crossing(metrics: Path, target: float) -> tuple[int | None, float | None, float]:
    """(first step whose eval/accuracy >= target, training seconds up to it, best accuracy seen)."""
    wall, best = 0.0, 0.0
    for line in metrics.read_text().splitlines():
        row = json.loads(line)
        if row.get("phase") != "rl":
            continue
        wall += row.get("time/step", 0.0)
        acc = row.get("eval/accuracy")
        if acc is None:
            continue
        best = max(best, acc)
        if acc >= target:
            return int(row["step"]), wall, best
    return None, None, best


def early_curve(metrics: Path, evals: int) -> list[float]:
    """Held-out accuracy at the run's first `evals` evaluations (a less noisy view of speed than one crossing)."""
    rows = [json.loads(line) for line in metrics.read_text().splitlines()]
    return [r["eval/accuracy"] for r in rows if r.get("phase") == "rl" and "eval/accuracy" in r][:evals]


def run_name(arm: str, seed: int, tag: str) -> str:
    return f"{arm}{'-' + tag if tag else ''}-s{seed}"


def run_arm(arm: str, seed: int, args: argparse.Namespace) -> Path:
    name = run_name(arm, seed, args.tag)
    extra = [o.format(teacher=args.teacher) for o in ARMS[arm]]
    cmd = [
        str(Path(sys.executable).parent / "ascent"),
        "train",
        "default",
        "control.enabled=false",
        "threads=1",
        f"output_dir={args.out}",
        f"name={name}",
        f"seed={seed}",
        f"warmstart.init_from={args.warmstart}",
        f"train.steps={args.steps}",
        f"train.eval_every={args.eval_every}",
        "train.checkpoint_every=0",
        *extra,
        *args.set,
    ]
    print(" ".join(cmd), flush=True)
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    return Path(args.out) / name


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--teacher", required=True, help="the teacher's run directory (summary.json, checkpoints/)")
    ap.add_argument("--warmstart", help="the student's starting weights (a run's warmstart/ folder)")
    ap.add_argument("--out", required=True, help="where the arms' run directories go")
    ap.add_argument("--seeds", type=int, nargs="+", default=[0])
    ap.add_argument("--arms", nargs="+", default=list(ARMS), choices=list(ARMS))
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--eval-every", type=int, default=2)
    ap.add_argument("--margin", type=float, default=0.02, help="target = teacher accuracy - margin")
    ap.add_argument("--set", nargs="*", default=[], help="overrides for every arm, e.g. train.optim.lr=1e-4")
    ap.add_argument("--tag", default="", help="run names become ARM-TAG-sSEED (e.g. a learning rate)")
    ap.add_argument("--report", action="store_true", help="do not train; read the runs already in --out")
    args = ap.parse_args()
    teacher_acc = json.loads((Path(args.teacher) / "summary.json").read_text())["accuracy_after_rl"]
    target = teacher_acc - args.margin
    print(f"teacher accuracy {teacher_acc:.3f}; target {target:.3f}")
    table, curves = {}, {}
    for seed in args.seeds:
        for arm in args.arms:
            run = Path(args.out) / run_name(arm, seed, args.tag)
            if not args.report:
                if args.warmstart is None:
                    ap.error("--warmstart is needed to train (or pass --report)")
                run = run_arm(arm, seed, args)
            table[(arm, seed)] = crossing(run / "metrics.jsonl", target)
            curves[(arm, seed)] = early_curve(run / "metrics.jsonl", 6)
    print(f"{'arm':10} {'seed':>4} {'steps':>6} {'train s':>8} {'best acc':>8} {'steps / grpo':>12} {'s / grpo':>9}")
    for (arm, seed), (step, wall, best) in table.items():
        base_step, base_wall, _ = table.get(("grpo", seed), (None, None, 0.0))
        ratio = f"{step / base_step:.2f}" if step and base_step else "-"
        wratio = f"{wall / base_wall:.2f}" if wall and base_wall else "-"
        shown = (str(step) if step else f">{args.steps}", f"{wall:.1f}" if wall else "-")
        print(f"{arm:10} {seed:>4} {shown[0]:>6} {shown[1]:>8} {best:>8.3f} {ratio:>12} {wratio:>9}")
        print(json.dumps({"arm": arm, "seed": seed, "target": target, "step": step, "train_s": wall, "best": best}))
    print(f"held-out accuracy at the first evaluations (every {args.eval_every} steps):")
    for (arm, seed), accs in curves.items():
        print(f"{arm:10} {seed:>4}  " + " ".join(f"{a:.3f}" for a in accs))


if __name__ == "__main__":
    main()
