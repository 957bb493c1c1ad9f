"""ascent's classic-RL baselines against Stable-Baselines3: final return and wall time, same task, same seeds.

For one task (`--task`, an ascent recipe name: cartpole-ppo, acrobot-dqn, halfcheetah-sac, hopper-ppo) and
`--seeds` seeds, each side trains one run per seed in its own process:

- ascent: `ascent train TASK seed=S output_dir=D name=N threads=T [classic.total_steps=STEPS]`, which writes
  `D/N/summary.json` (final_return, final_return_std, wall_seconds, env_steps);
- SB3: `benchmarks/sb3_run.py --task TASK --seed S --threads T [--steps STEPS]` in `.venv-sb3` (built by
  `bash benchmarks/sb3_env.sh`; SB3 is never a dependency of ascent). The hyper-parameters are RL Baselines3
  Zoo's tuned values, written once in sb3_run.TASKS; ascent's are in its recipe (the same values).

The runs alternate sides, ascent then SB3 for each seed (ABAB; `--order abba` swaps the order on odd seeds), so
the machine's drift (20-40% between minutes on a shared 2-vCPU VM) hits both sides alike, and only one run is
on the machine at a time. Both sides get the same thread count (`--threads`, default 1: torch's intra-op threads
and OMP/MKL_NUM_THREADS in the child's environment). Evaluation is the same protocol on both sides: the mean
undiscounted return of 10 deterministic episodes on fresh environments after training, episode i reset with seed
S + 10000 + i on both sides (the same start states). The wall time compared is each side's own training
time (`wall_seconds`: SB3's `learn()`, ascent's summary `train_seconds`, its training loop); the whole process's
time measured from outside (imports, env construction and evaluation included) is printed beside it, and so is
the ratio of training CPU seconds (`train_cpu_seconds` on both sides), the steadier figure on a loaded machine.

Usage (from the repository root):

    bash benchmarks/sb3_env.sh                                  # once: .venv-sb3
    .venv/bin/python benchmarks/classic_vs_sb3.py --task cartpole-ppo --seeds 3
    .venv/bin/python benchmarks/classic_vs_sb3.py --task halfcheetah-sac --seeds 3 --json out.json
    .venv/bin/python benchmarks/classic_vs_sb3.py --task hopper-ppo --steps 200000 --sides sb3

Prints the machine, one line per run, a table per side (mean final return with its 95% bootstrap interval over
seeds, ascent.app.stats), the return ratio ascent/SB3 and the wall-time ratio ascent/SB3 (of the means, and the
per-seed ratios), then one JSON line with all of it (also written to `--json`). For a task whose returns are
negative (Acrobot), a return ratio above 1 means ascent did worse; the difference is printed too.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))
from sb3_run import TASKS  # noqa: E402  (standard library only at import)

SB3_PYTHON = ROOT / ".venv-sb3" / "bin" / "python"
SIDES = ("ascent", "sb3")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.ArgumentDefaultsHelpFormatter
    )
    p.add_argument("--task", required=True, choices=sorted(TASKS), help="ascent recipe = sb3_run task")
    p.add_argument("--seeds", type=int, default=3, help="seeds 0..N-1 on each side")
    p.add_argument("--first-seed", type=int, default=0, help="the first seed")
    p.add_argument("--steps", type=int, default=0, help="environment steps on both sides (0: the task's default)")
    p.add_argument("--threads", type=int, default=1, help="torch intra-op threads on both sides")
    p.add_argument("--order", choices=["abab", "abba"], default="abab", help="side order per seed")
    p.add_argument("--sides", default="ascent,sb3", help="comma-separated subset of ascent,sb3")
    p.add_argument("--sb3-python", default=str(SB3_PYTHON), help="the interpreter of the SB3 virtualenv")
    p.add_argument("--ascent", default=str(Path(sys.executable).parent / "ascent"), help="ascent's command")
    p.add_argument("--work", default="", help="folder for run directories and logs (default: a temporary one)")
    p.add_argument("--json", default="", help="also write the JSON result here")
    p.add_argument(
        "--reuse",
        action="store_true",
        help="take a run whose result is already in --work (ascent_sS/summary.json, sb3_sS.json) instead of running "
        "it again: to combine runs made separately or in parallel (their process seconds are then unknown)",
    )
    p.add_argument("overrides", nargs="*", help="extra key=value overrides for ascent train")
    args = p.parse_args(argv)
    args.sides = [s.strip() for s in args.sides.split(",") if s.strip()]
    bad = [s for s in args.sides if s not in SIDES]
    if bad or not args.sides:
        p.error(f"--sides: unknown {bad}; choose from {', '.join(SIDES)}")
    if args.seeds < 1 or args.threads < 1 or args.steps < 0:
        p.error("--seeds and --threads must be >= 1, --steps >= 0")
    if "sb3" in args.sides and not Path(args.sb3_python).exists():
        p.error(f"no SB3 interpreter at {args.sb3_python}: run `bash benchmarks/sb3_env.sh` first")
    return args


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def child_env(threads: int) -> dict[str, str]:
    env = dict(os.environ)
    env.update(OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads), PYTHONUNBUFFERED="1")
    return env


def run_child(cmd: list[str], logfile: Path, threads: int, cwd: Path) -> float:
    """Run `cmd` with its output in `logfile`; the process's wall seconds. A failure raises with the log's tail."""
    t0 = time.perf_counter()
    with open(logfile, "w") as f:
        code = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, env=child_env(threads), cwd=cwd).returncode
    wall = time.perf_counter() - t0
    if code != 0:
        tail = logfile.read_text()[-3000:]
        raise SystemExit(f"{' '.join(cmd)} exited {code}; the end of {logfile}:\n{tail}")
    return wall


def run_sb3(args: argparse.Namespace, seed: int, work: Path) -> dict[str, Any]:
    out = work / f"sb3_s{seed}.json"
    if args.reuse and out.exists():
        return {**json.loads(out.read_text()), "process_seconds": None, "reused": True}
    cmd = [args.sb3_python, str(BENCH / "sb3_run.py"), "--task", args.task, "--seed", str(seed)]
    cmd += ["--threads", str(args.threads), "--out", str(out)] + (["--steps", str(args.steps)] if args.steps else [])
    process_s = run_child(cmd, work / f"sb3_s{seed}.log", args.threads, work)  # cwd: MUJOCO_LOG.TXT lands there
    return {**json.loads(out.read_text()), "process_seconds": process_s}


def run_ascent(args: argparse.Namespace, seed: int, work: Path) -> dict[str, Any]:
    name = f"ascent_s{seed}"
    cmd = [args.ascent, "train", args.task, f"seed={seed}", f"output_dir={work}", f"name={name}"]
    cmd += [f"threads={args.threads}"] + ([f"classic.total_steps={args.steps}"] if args.steps else [])
    done = work / name / "summary.json"
    if args.reuse and done.exists():
        process_s = None
    else:
        process_s = run_child(cmd + ["--overwrite", *args.overrides], work / f"{name}.log", args.threads, work)
    summary = json.loads(done.read_text())
    keep = ("final_return", "final_return_std", "final_returns", "env_steps", "eval_seconds", "threads")
    out = {"side": "ascent", "task": args.task, "seed": seed, **{k: summary.get(k) for k in keep}}
    # the training loop's time, as SB3's learn(); summary's wall_seconds also holds setup and evaluation
    out |= {"wall_seconds": summary["train_seconds"], "command_seconds": summary["wall_seconds"]}
    out |= {"train_cpu_seconds": summary.get("train_cpu_seconds")}
    return out | {"process_seconds": process_s}


def side_order(args: argparse.Namespace, i: int) -> list[str]:
    order = list(SIDES) if args.order == "abab" or i % 2 == 0 else list(reversed(SIDES))
    return [s for s in order if s in args.sides]


def mean_or_none(values: list[Any]) -> Any:
    """The mean, or None when a value is unknown (a reused run's process seconds)."""
    return None if None in values else statistics.fmean(values)


def summarise(runs: list[dict[str, Any]], sides: list[str]) -> dict[str, Any]:
    """Per side: mean return with its bootstrap interval, mean walls; across sides: the ratios."""
    from ascent.app.stats import bootstrap_interval

    out: dict[str, Any] = {}
    for side in sides:
        rs = sorted((r for r in runs if r["side"] == side), key=lambda r: r["seed"])
        ci = bootstrap_interval([r["final_return"] for r in rs])
        out[side] = {
            "seeds": [r["seed"] for r in rs],
            "final_return": [r["final_return"] for r in rs],
            "wall_seconds": [r["wall_seconds"] for r in rs],
            "process_seconds": [r["process_seconds"] for r in rs],
            "mean_return": ci.mean,
            "return_ci95": [ci.lo, ci.hi],
            "mean_wall_seconds": statistics.fmean(r["wall_seconds"] for r in rs),
            "mean_process_seconds": mean_or_none([r["process_seconds"] for r in rs]),
            "train_cpu_seconds": [r.get("train_cpu_seconds") for r in rs],
            "env_steps": [r["env_steps"] for r in rs],
        }
    if set(SIDES) <= set(sides):
        a, b = out["ascent"], out["sb3"]
        out["return_ratio"] = a["mean_return"] / b["mean_return"] if b["mean_return"] else None
        out["return_difference"] = a["mean_return"] - b["mean_return"]
        out["wall_ratio"] = a["mean_wall_seconds"] / b["mean_wall_seconds"]
        out["wall_ratio_per_seed"] = [x / y for x, y in zip(a["wall_seconds"], b["wall_seconds"])]
        if a["mean_process_seconds"] and b["mean_process_seconds"]:
            out["process_ratio"] = a["mean_process_seconds"] / b["mean_process_seconds"]
        cpu_a, cpu_b = a["train_cpu_seconds"], b["train_cpu_seconds"]
        if None not in cpu_a + cpu_b:  # CPU seconds: steadier than wall time on a shared, loaded machine
            out["cpu_ratio"] = statistics.fmean(cpu_a) / statistics.fmean(cpu_b)
    return out


def report(summary: dict[str, Any], sides: list[str]) -> None:
    log(f"{'side':<7} {'mean return':>12} {'95% CI':>22} {'train wall s':>13} {'process s':>10}  per-seed returns")
    for side in sides:
        s = summary[side]
        ci = f"[{s['return_ci95'][0]:.1f}, {s['return_ci95'][1]:.1f}]"
        per = ", ".join(f"{x:.1f}" for x in s["final_return"])
        proc = "-" if s["mean_process_seconds"] is None else f"{s['mean_process_seconds']:.1f}"
        log(f"{side:<7} {s['mean_return']:>12.1f} {ci:>22} {s['mean_wall_seconds']:>13.1f} {proc:>10}  {per}")
    if "wall_ratio" in summary:
        rr = summary["return_ratio"]
        log(
            f"return ratio ascent/SB3 {rr:.3f} (difference {summary['return_difference']:+.1f}); "
            f"wall ratio ascent/SB3 {summary['wall_ratio']:.3f} (per seed "
            f"{', '.join(f'{x:.3f}' for x in summary['wall_ratio_per_seed'])}"
            + (f"; whole process {summary['process_ratio']:.3f})" if "process_ratio" in summary else ")")
            + (f"; CPU-time ratio {summary['cpu_ratio']:.3f}" if "cpu_ratio" in summary else "")
        )


def main(argv: list[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    import torch

    from ascent.kernels.machine import describe, describe_line

    torch.set_num_threads(args.threads)  # so the machine line shows the threads each side's runs get
    machine = describe()
    log(f"machine: {describe_line()} (both sides; OMP/MKL_NUM_THREADS={args.threads} in their environment)")
    work = Path(args.work or tempfile.mkdtemp(prefix=f"classic_vs_sb3_{args.task}_"))
    work.mkdir(parents=True, exist_ok=True)
    steps = args.steps or TASKS[args.task]["steps"]
    log(f"task {args.task}: {TASKS[args.task]['env_id']}, {steps} env steps, seeds {args.seeds}, work {work}")
    runs = []
    for i, seed in enumerate(range(args.first_seed, args.first_seed + args.seeds)):
        for side in side_order(args, i):
            load_before = [round(x, 2) for x in os.getloadavg()]
            r = (run_ascent if side == "ascent" else run_sb3)(args, seed, work)
            r |= {"load_before": load_before, "load_after": [round(x, 2) for x in os.getloadavg()]}
            runs.append(r)
            proc = "reused" if r["process_seconds"] is None else f"process {r['process_seconds']:.1f} s"
            log(
                f"{side:<6} seed {seed}: return {r['final_return']:.1f} +- {r['final_return_std']:.1f}, train "
                f"{r['wall_seconds']:.1f} s, {proc}, {r['env_steps']} env steps, "
                f"load {load_before[0]} -> {r['load_after'][0]}"
            )
    summary = summarise(runs, args.sides)
    report(summary, args.sides)
    out = {"task": args.task, "env_steps": steps, "threads": args.threads, "order": args.order}
    out |= {"machine": machine, "summary": summary, "runs": runs, "work": str(work)}
    print(json.dumps(out), flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1) + "\n")
    return out


if __name__ == "__main__":
    main()
