"""ascent's offline IQL / TD3+BC against d3rlpy's: normalised score and training wall time, same dataset, same
network sizes, same gradient-step budget, the same seeds.

Pipeline (every stage cached under `--work`, so a second run costs only the training):
1. the expert: `ascent train halfcheetah-sac classic.env=ENV ...` (SAC, `--expert-steps` environment steps,
   a checkpoint every tenth of the run); reused when its summary.json exists;
2. the dataset: `ascent collect EXPERT_RUN --policy run-checkpoint --level medium --steps N` (D4RL's "medium": the
   checkpoint nearest a third of the expert's normalised score, its stochastic policy); Minari format;
3. per seed, one run per side in its own process, sides alternating A B B A over seeds (the load of a shared
   machine falls on both); by default as many runs at a time as there are cores this process may use (`--jobs`),
   each pinned to a core of its own and started in that order (so on 2 cores each run shares the machine with one
   other run, of either side); `--jobs 1` runs them one after the other, unpinned:
   ascent  `ascent train ... classic.dataset=DATA classic.algorithm=ALGO(hidden=H) classic.total_steps=STEPS`
   d3rlpy  `benchmarks/d3rlpy_offline_run.py` (d3rlpy 2.8.1 from .venv-d3rlpy-site, `bash benchmarks/d3rlpy_env.sh`)
   Both: Adam 3e-4, batch 256, gamma 0.99, tau 0.005, ReLU MLPs of `--hidden`, standardised observations, and
   each algorithm's paper defaults (ascent's registered defaults; the d3rlpy side sets the same values).
   Evaluation on both sides: `--eval-episodes` deterministic episodes, episode i reset with seed + 10000 + i.

Normalised score = 100 (R - R_random) / (R_expert - R_random), the references the dataset records (the random
policy's mean return and the expert checkpoint's deterministic mean return). Printed: one line per run, then one
JSON line with per-side scores (mean, 95% bootstrap interval over seeds, per seed), training wall and CPU seconds,
`score_ratio` = mean score ascent / mean score d3rlpy and `wall_ratio` = mean training wall ascent / d3rlpy (and
`cpu_ratio`, the steadier figure on a loaded machine), the machine and its load around every run.

    bash benchmarks/d3rlpy_env.sh                      # once
    .venv/bin/python benchmarks/offline_vs_d3rlpy.py --algo iql --dataset halfcheetah-medium --seeds 3
    .venv/bin/python benchmarks/offline_vs_d3rlpy.py --algo td3_bc --dataset pendulum-medium --seeds 3 --steps 2000
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import queue
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
SIDES = ("ascent", "d3rlpy")
DATASETS = {
    # name: (Gymnasium id, SAC expert env steps, dataset transitions)
    "halfcheetah-medium": ("HalfCheetah-v5", 100_000, 100_000),
    "hopper-medium": ("Hopper-v5", 100_000, 100_000),
    "pendulum-medium": ("Pendulum-v1", 10_000, 20_000),
}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.ArgumentDefaultsHelpFormatter
    )
    p.add_argument("--algo", choices=["iql", "td3_bc"], required=True)
    p.add_argument("--dataset", choices=sorted(DATASETS), required=True)
    p.add_argument("--seeds", type=int, default=3, help="seeds first..first+N-1 on each side")
    p.add_argument("--first-seed", type=int, default=0, help="the first seed")
    p.add_argument("--steps", type=int, default=20_000, help="gradient steps per run, both sides")
    p.add_argument("--hidden", default="256,256", help="hidden widths of every network, both sides")
    p.add_argument("--eval-episodes", type=int, default=10)
    p.add_argument("--expert-steps", type=int, default=0, help="SAC expert's env steps (0: the dataset's default)")
    p.add_argument("--expert-hidden", default="256,256", help="the SAC expert's hidden widths")
    p.add_argument("--data-steps", type=int, default=0, help="dataset transitions (0: the dataset's default)")
    p.add_argument("--work", default=str(ROOT / ".cache" / "offline_bench"), help="cache of experts, data and runs")
    p.add_argument("--d3rlpy-site", default=str(ROOT / ".venv-d3rlpy-site"), help="where d3rlpy is installed")
    p.add_argument("--sides", default="ascent,d3rlpy")
    p.add_argument(
        "--ascent-params", default="",
        help="more parameters of ascent's algorithm, e.g. log_std=sigmoid (IQL with d3rlpy's log-std form): a "
        "diagnostic arm; its runs are cached under their own names",
    )  # fmt: skip
    p.add_argument("--json", default="", help="also write the JSON result here")
    p.add_argument(
        "--jobs", type=int, default=0,
        help="training runs at once, each pinned to a core of its own (one torch thread each); 0: one per core this "
        "process may use (2 on a 2-core machine halves the wall time against 1, and every run then shares the "
        "machine with one other run); 1: one run at a time, unpinned",
    )  # fmt: skip
    args = p.parse_args(argv)
    args.sides = [s for s in args.sides.split(",") if s]
    cores = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else list(range(os.cpu_count() or 1))
    args.jobs = args.jobs or len(cores)
    if not 1 <= args.jobs <= len(cores):
        p.error(
            f"--jobs must be 0 (every core) or between 1 and the {len(cores)} cores this process may use, "
            f"got {args.jobs}"
        )
    args.cores = cores
    return args


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def machine() -> dict[str, Any]:
    cpu = platform.processor()
    try:
        cpu = next(line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return {"cpu": cpu, "cpus": os.cpu_count(), "load": [round(x, 2) for x in os.getloadavg()], "threads": 1}


def child_env(extra_path: str = "") -> dict[str, str]:
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), extra_path, env.get("PYTHONPATH", "")) if p)
    return env


def run(cmd: list[str], logfile: Path, extra_path: str = "", core: int | None = None) -> str:
    with open(logfile, "w") as fh:
        proc = subprocess.Popen(cmd, cwd=ROOT, env=child_env(extra_path), stdout=subprocess.PIPE, stderr=fh, text=True)
        if core is not None:  # pinned before the child has imported torch (its threads inherit the mask)
            os.sched_setaffinity(proc.pid, {core})
        stdout, _ = proc.communicate()
    out = subprocess.CompletedProcess(cmd, proc.returncode, stdout)
    if out.returncode != 0:
        raise SystemExit(f"failed ({out.returncode}): {' '.join(cmd)}; see {logfile}")
    return out.stdout


def ascent_cmd() -> list[str]:
    return [sys.executable, "-m", "ascent.cli"]


def expert(args: argparse.Namespace, work: Path) -> Path:
    env_id, default_steps, _ = DATASETS[args.dataset]
    steps = args.expert_steps or default_steps
    name = f"{args.dataset.split('-')[0]}-expert"
    run_dir = work / "runs" / name
    if (run_dir / "summary.json").exists():
        return run_dir
    log(f"expert: SAC on {env_id}, {steps} env steps -> {run_dir}")
    cmd = ascent_cmd() + [
        "train", "halfcheetah-sac", f"name={name}", f"output_dir={work / 'runs'}", f"classic.env={env_id}",
        f"classic.total_steps={steps}", f"classic.algorithm=sac(hidden=[{args.expert_hidden}])",
        f"classic.checkpoint_every={max(1, steps // 10)}", "classic.keep_checkpoints=20", "classic.eval_episodes=3",
        "logging.progress=false", "threads=1",
    ]  # fmt: skip
    run(cmd, work / f"{name}.log")
    return run_dir


def dataset(args: argparse.Namespace, work: Path, run_dir: Path) -> dict[str, Any]:
    steps = args.data_steps or DATASETS[args.dataset][2]
    cmd = ascent_cmd() + [
        "collect", str(run_dir), "--policy", "run-checkpoint", "--level", "medium", "--steps", str(steps),
        "--out", str(work / "datasets"), "--eval-episodes", "3",
    ]  # fmt: skip
    return json.loads(run(cmd, work / f"collect-{args.dataset}.log"))


def run_ascent(
    args: argparse.Namespace, data: dict[str, Any], seed: int, work: Path, core: int | None = None
) -> dict[str, Any]:
    extra = args.ascent_params.strip()
    tag = "-" + "".join(c if c.isalnum() else "_" for c in extra) if extra else ""
    name = f"{args.dataset}-{args.algo}-{args.steps}-h{args.hidden.replace(',', 'x')}{tag}-s{seed}"
    params = f"hidden=[{args.hidden}]" + (f", {extra}" if extra else "")
    cmd = ascent_cmd() + [
        "train", "halfcheetah-sac", f"name={name}", f"output_dir={work / 'offline'}", f"seed={seed}",
        f"classic.env={data['env']}", f"classic.dataset={data['path']}", f"classic.total_steps={args.steps}",
        f"classic.algorithm={args.algo}({params})", f"classic.eval_episodes={args.eval_episodes}",
        f"classic.log_every={max(1, args.steps // 10)}", "logging.progress=false", "threads=1", "--overwrite",
    ]  # fmt: skip
    run(cmd, work / f"{name}.log", core=core)
    s = json.loads((work / "offline" / name / "summary.json").read_text())
    return {k: s[k] for k in ("final_returns", "train_seconds", "train_cpu_seconds")}


def run_d3rlpy(
    args: argparse.Namespace, data: dict[str, Any], seed: int, work: Path, core: int | None = None
) -> dict[str, Any]:
    cmd = [
        sys.executable, str(ROOT / "benchmarks" / "d3rlpy_offline_run.py"), "--algo", args.algo,
        "--dataset", data["path"], "--env", data["env"], "--steps", str(args.steps), "--seed", str(seed),
        "--hidden", args.hidden, "--eval-episodes", str(args.eval_episodes),
    ]  # fmt: skip
    name = f"{args.dataset}-{args.algo}-{args.steps}-d3rlpy-s{seed}"
    out = run(cmd, work / f"{name}.log", extra_path=args.d3rlpy_site, core=core)
    return json.loads([line for line in out.splitlines() if line.startswith("{")][-1])


def side_summary(runs: list[dict[str, Any]], data: dict[str, Any]) -> dict[str, Any]:
    from ascent.app.stats import bootstrap_interval

    lo_ref, hi_ref = data["ref_min_score"], data["ref_max_score"]
    scores = [100.0 * (float(np.mean(r["final_returns"])) - lo_ref) / (hi_ref - lo_ref) for r in runs]
    ci = bootstrap_interval(scores)
    low, high = ci.lo, ci.hi
    return {
        "score": float(np.mean(scores)),
        "score_ci95": [float(low), float(high)],
        "scores": [round(s, 2) for s in scores],
        "returns": [round(float(np.mean(r["final_returns"])), 1) for r in runs],
        "train_seconds": float(np.mean([r["train_seconds"] for r in runs])),
        "train_cpu_seconds": float(np.mean([r["train_cpu_seconds"] for r in runs])),
        "per_seed_train_seconds": [round(r["train_seconds"], 1) for r in runs],
    }


def main(argv: list[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    t0 = time.perf_counter()
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    if "d3rlpy" in args.sides and not Path(args.d3rlpy_site, "d3rlpy").is_dir():
        raise SystemExit(f"d3rlpy is not installed in {args.d3rlpy_site}: run `bash benchmarks/d3rlpy_env.sh` first")
    data = dataset(args, work, expert(args, work))
    log(
        f"dataset {data['path']}: {data['transitions']} transitions, medium = {data['checkpoint']} (return "
        f"{data['checkpoint_return']:.1f}, score {data.get('checkpoint_score')}; random {data['ref_min_score']:.1f}, "
        f"expert {data['ref_max_score']:.1f})"
    )
    jobs: list[tuple[str, int]] = []
    for i, seed in enumerate(range(args.first_seed, args.first_seed + args.seeds)):
        order = args.sides if i % 2 == 0 else args.sides[::-1]  # A B, B A, A B: ABBA over seeds
        jobs += [(side, seed) for side in order]
    args.jobs = min(args.jobs, len(jobs))  # never more at once than there are runs (the JSON says what was used)
    free: queue.Queue[int | None] = queue.Queue()
    for core in args.cores[: args.jobs] if args.jobs > 1 else [None]:
        free.put(core)

    def one(side: str, seed: int) -> dict[str, Any]:
        core = free.get()  # with --jobs 1 no pinning: the run may use any core, as before
        try:
            before = [round(x, 2) for x in os.getloadavg()]
            r = (run_ascent if side == "ascent" else run_d3rlpy)(args, data, seed, work, core)
            r |= {
                "seed": seed,
                "core": core,
                "load_before": before,
                "load_after": [round(x, 2) for x in os.getloadavg()],
            }
        finally:
            free.put(core)
        ret, wall, cpu = np.mean(r["final_returns"]), r["train_seconds"], r["train_cpu_seconds"]
        log(f"{side:7s} seed {seed}: return {ret:9.1f}  train {wall:7.1f}s wall, {cpu:7.1f}s CPU  core {core}  "
            f"load {r['load_before']} -> {r['load_after']}")  # fmt: skip
        return r

    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        done = [(side, pool.submit(one, side, seed)) for side, seed in jobs]
    runs: dict[str, list[dict[str, Any]]] = {side: [] for side in args.sides}
    for side, fut in done:
        runs[side].append(fut.result())
    sides = {side: side_summary(rs, data) for side, rs in runs.items()}
    result: dict[str, Any] = {
        "algo": args.algo,
        "dataset": args.dataset,
        "dataset_path": data["path"],
        "transitions": data["transitions"],
        "ref_min_score": data["ref_min_score"],
        "ref_max_score": data["ref_max_score"],
        "steps": args.steps,
        "hidden": args.hidden,
        "ascent_params": args.ascent_params,
        "seeds": args.seeds,
        "first_seed": args.first_seed,
        "eval_episodes": args.eval_episodes,
        "jobs": args.jobs,
        "wall_seconds": round(time.perf_counter() - t0, 1),
        "machine": machine(),
        **{side: s for side, s in sides.items()},
        "runs": runs,
    }
    if set(SIDES) <= set(sides):
        a, d = sides["ascent"], sides["d3rlpy"]
        result["score_ratio"] = a["score"] / d["score"] if d["score"] else None
        result["wall_ratio"] = a["train_seconds"] / d["train_seconds"]
        result["cpu_ratio"] = a["train_cpu_seconds"] / d["train_cpu_seconds"]
    print(json.dumps(result))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2))
    return result


if __name__ == "__main__":
    main()
