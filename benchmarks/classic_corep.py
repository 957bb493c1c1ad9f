"""COREP (Zhang et al. 2024, arXiv:2306.02747) against PPO at equal environment steps on a non-stationary task:
CartPole-v1 under the `drifting` wrapper (pole length and motor force each drifting over +-60% of their defaults on
a sinusoid, out of step, the context changing every 4 episodes; the agent is not told). Arms: PPO, COREP, and
COREP without the guided update (`guided=false`: both GATs always learn), all with the `cartpole-ppo` recipe's
PPO settings; seeds run in ABBA order so that the machine's load falls on every arm. `--stationary` runs the same
arms on plain CartPole-v1, the control that tells a gain from the drift apart from a gain everywhere.

Measures per run: `online_return`, the mean undiscounted return of the training episodes in the last quarter of
the run (the return under the drift while learning, what the paper plots), and `final_return`, the deterministic
evaluation of 10 episodes at 10 phases of the drift. Prints one JSON line per run, then a JSON summary: each arm's
mean with a 95% percentile-bootstrap interval over seeds, and each COREP arm - PPO paired by seed (bootstrap).

    OMP_NUM_THREADS=1 nice -n 10 python benchmarks/classic_corep.py --steps 50000 --seeds 5
    python benchmarks/classic_corep.py --combine first.log second.log     # one summary over both invocations' runs
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
from pathlib import Path

import yaml

DRIFT = "classic.wrappers=[{drifting: {keys: [length, force_mag], amplitude: [0.6, 0.6], period: 8, hold: 4}}]"


def spec(name: str, extra: dict) -> str:
    recipe = yaml.safe_load((Path(__file__).resolve().parents[1] / "ascent/recipes/cartpole-ppo.yaml").read_text())
    params = {**recipe["classic"]["algorithm"]["ppo"], **extra}
    return "classic.algorithm=" + json.dumps({name: params}).replace('"', "")


def online_return(run_dir: Path, steps: int, share: float = 0.25) -> float:
    """Mean return of the training episodes logged after (1 - share) * steps: each metrics line's mean weighted by
    the episodes that finished since the line before."""
    lines = [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines()]
    lines = [x for x in lines if "episode/return" in x and "episodes" in x]
    total = weight = 0.0
    prev = 0.0
    for x in lines:
        n = x["episodes"] - prev
        prev = x["episodes"]
        if x["step"] > (1 - share) * steps and n > 0:
            total, weight = total + n * x["episode/return"], weight + n
    return total / weight if weight else float("nan")


def run(arm: str, steps: int, seed: int, out: Path, stationary: bool = False) -> dict:
    from ascent.app.pipeline import train
    from ascent.config import load_config

    algo = {"ppo": spec("ppo", {}), "corep": spec("corep", {}), "corep_unguided": spec("corep", {"guided": False})}
    overrides = ["classic.env=CartPole-v1", f"classic.total_steps={steps}", f"seed={seed}", "logging.progress=false"]
    overrides += [
        algo[arm],
        "classic.wrappers=[]" if stationary else DRIFT,
        f"output_dir={out}",
        f"name={arm}-s{seed}",
        "classic.eval_episodes=10",
    ]
    overrides += ["classic.log_every=1024"]
    s = train(load_config("cartpole-ppo", overrides))
    return {
        "arm": arm,
        "seed": seed,
        "online_return": round(online_return(out / f"{arm}-s{seed}", steps), 2),
        "final_return": s["final_return"],
        "train_cpu_seconds": s.get("train_cpu_seconds"),
        "train_seconds": s.get("train_seconds"),
        "load": round(os.getloadavg()[0], 1),
    }


def summarise(rows: list[dict], arms: list[str]) -> dict:
    from ascent.app.stats import bootstrap_difference, bootstrap_interval

    out: dict = {}
    for key in ("online_return", "final_return"):
        by = {a: {r["seed"]: r[key] for r in rows if r["arm"] == a} for a in arms}
        seeds = sorted(by["ppo"])
        out[key] = {}
        for a in arms:
            iv = bootstrap_interval([by[a][s] for s in seeds])
            out[key][a] = {"mean": round(iv.mean, 2), "ci95": [round(iv.lo, 2), round(iv.hi, 2)]}
        for a in arms[1:]:
            d = bootstrap_difference([by["ppo"][s] for s in seeds], [by[a][s] for s in seeds], paired=True)
            wins = sum(by[a][s] > by["ppo"][s] for s in seeds)
            out[key][f"{a}-ppo"] = {"diff": round(d.diff, 2), "ci95": [round(d.lo, 2), round(d.hi, 2)], "wins": wins}
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=50000)
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--first-seed", type=int, default=0)
    ap.add_argument("--arms", default="ppo,corep,corep_unguided")
    ap.add_argument("--stationary", action="store_true", help="the control: plain CartPole-v1, no drift")
    ap.add_argument("--work", default="")
    ap.add_argument(
        "--combine", nargs="+", default=[], help="logs of earlier invocations: summarise their runs, run none"
    )
    args = ap.parse_args()
    if args.combine:
        rows = [json.loads(x) for f in args.combine for x in Path(f).read_text().splitlines() if x.startswith('{"arm"')]
        arms = list(dict.fromkeys(r["arm"] for r in rows))
        print(json.dumps({"seeds": sorted({r["seed"] for r in rows}), "summary": summarise(rows, arms)}))
        return
    import torch

    torch.set_num_threads(1)
    out = Path(args.work or tempfile.mkdtemp(prefix="corep-"))
    cpu = next((x.split(":")[1].strip() for x in open("/proc/cpuinfo") if x.startswith("model name")), "?")
    head = {"cpu": cpu, "cores": os.cpu_count(), "steps": args.steps, "stationary": args.stationary, "work": str(out)}
    print(json.dumps(head), flush=True)
    arms = args.arms.split(",")
    rows = []
    for i, seed in enumerate(range(args.first_seed, args.first_seed + args.seeds)):
        for arm in arms if i % 2 == 0 else arms[::-1]:
            rows.append(run(arm, args.steps, seed, out, args.stationary))
            print(json.dumps(rows[-1]), flush=True)
    print(json.dumps({"summary": summarise(rows, arms), "load_end": round(os.getloadavg()[0], 1)}), flush=True)


if __name__ == "__main__":
    main()
