"""One-step flow policies (MeanFlowQL, FAN) against IQL and TD3+BC on the same `ascent collect` dataset: normalised
score, training time per gradient step and inference time per action, seeds paired.

Per seed, every algorithm trains `--steps` gradient steps on the dataset in this process (one torch thread), in an
order rotated by the seed (so a shared machine's load falls on every algorithm alike), then is evaluated on
`--eval-episodes` fresh episodes (reset with seeds 10000 + i, the same for every algorithm) and timed acting on one
observation at a time (`--infer-calls` calls, ms per action). FAN's behaviour flow integrated by 10 Euler steps is
timed too: what a flow policy costs per action without the one-step map both papers claim.

Printed: one line per run, then one JSON object: per algorithm the normalised score (mean, sd, per seed), training
wall / CPU seconds, ms per gradient step and per action; per (flow method, baseline) the paired score difference
with its 95% t interval over seeds; the machine and load.

    python benchmarks/offline_flow.py --dataset datasets/pendulum-medium-replay-v0 --env Pendulum-v1 --seeds 5
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

T_975 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262, 10: 2.228}


def paired(a: list[float], b: list[float]) -> dict[str, Any]:
    """Mean of a - b with its 95% t interval over the pairs.

    >>> paired([3.0, 5.0, 4.0], [1.0, 1.0, 1.0])["mean"], paired([3.0, 5.0, 4.0], [1.0, 1.0, 1.0])["ci95"]
    (3.0, [0.516, 5.484])
    """
    d = np.asarray(a) - np.asarray(b)
    n = len(d)
    sd = float(d.std(ddof=1)) if n > 1 else float("nan")
    half = float(T_975.get(n - 1, 1.96) * sd / np.sqrt(n)) if n > 1 else float("nan")
    m = float(d.mean())
    return {"mean": round(m, 3), "sd": round(sd, 3), "ci95": [round(m - half, 3), round(m + half, 3)], "n": n}


def machine() -> dict[str, Any]:
    cpu = platform.processor()
    try:
        cpu = next(ln.split(":", 1)[1].strip() for ln in open("/proc/cpuinfo") if ln.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return {"cpu": cpu, "cores": os.cpu_count(), "load": [round(x, 2) for x in os.getloadavg()]}


def spec_of(algo: str, hidden: list[int]) -> str:
    h = str(hidden).replace(" ", "")
    if algo in ("meanflow_ql", "fan"):
        return f"{algo}(hidden={h},actor_hidden={h})"
    return f"{algo}(hidden={h})"


def run_one(algo: str, args: argparse.Namespace, seed: int) -> dict[str, Any]:
    import gymnasium as gym
    import torch

    import ascent.offline  # noqa: F401  (registers the offline algorithms)
    from ascent.classic import CLASSIC
    from ascent.classic.base import ClassicContext
    from ascent.classic.envs import VecEnv, evaluate

    torch.set_num_threads(1)
    torch.manual_seed(seed)
    make = lambda: gym.make(args.env)  # noqa: E731
    ctx = ClassicContext(VecEnv(make, 1, seed), args.steps, seed, torch.device("cpu"), args.dataset)
    learner = CLASSIC.resolve(spec_of(algo, args.hidden))(ctx)
    load0 = os.getloadavg()[0]
    w0, c0 = time.perf_counter(), time.process_time()
    for _ in range(args.steps):
        learner.iteration(False)
    wall, cpu = time.perf_counter() - w0, time.process_time() - c0
    returns = evaluate(make, lambda obs: learner.act(obs, True), args.eval_episodes, 10_000)
    obs = learner.data.obs[: args.infer_calls].astype(np.float32)
    timings = {"act": act_ms(lambda o: learner.act(o, True), obs)}
    if algo == "fan":

        def flow10(o: np.ndarray) -> np.ndarray:
            with torch.no_grad():
                x = torch.from_numpy(((o - learner.obs_mean) / learner.obs_std).astype(np.float32))
                return learner.flow_policy(x, 10).numpy()

        timings["flow_10_euler_steps"] = act_ms(flow10, obs)
    score = float(np.mean(learner.data.normalized_score(returns)))
    return {
        "algo": algo,
        "seed": seed,
        "return": float(np.mean(returns)),
        "score": score,
        "train_wall_s": wall,
        "train_cpu_s": cpu,
        "ms_per_step_cpu": 1000 * cpu / args.steps,
        "ms_per_action": timings,
        "load": [round(load0, 2), round(os.getloadavg()[0], 2)],
    }


def act_ms(act, obs: np.ndarray) -> float:
    """CPU ms per call of act on one observation (batch 1), over every row of obs after 10 warm-up calls."""
    for o in obs[:10]:
        act(o[None])
    c0 = time.process_time()
    for o in obs:
        act(o[None])
    return 1000 * (time.process_time() - c0) / len(obs)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--dataset", required=True, help="a Minari dataset folder (ascent collect --out DIR)")
    p.add_argument("--env", default="Pendulum-v1")
    p.add_argument("--algos", default="iql,td3_bc,meanflow_ql,fan")
    p.add_argument("--seeds", type=int, default=5)
    p.add_argument("--first-seed", type=int, default=0)
    p.add_argument("--steps", type=int, default=3000, help="gradient steps per run")
    p.add_argument("--hidden", default="64,64", help="hidden widths of every network of every algorithm")
    p.add_argument("--eval-episodes", type=int, default=5)
    p.add_argument("--infer-calls", type=int, default=200)
    p.add_argument("--json", default="", help="also write the JSON here")
    args = p.parse_args(argv)
    args.hidden = [int(x) for x in args.hidden.split(",")]
    algos = args.algos.split(",")
    runs: list[dict[str, Any]] = []
    for seed in range(args.first_seed, args.first_seed + args.seeds):
        k = seed % len(algos)
        for algo in algos[k:] + algos[:k]:
            r = run_one(algo, args, seed)
            runs.append(r)
            print(json.dumps(r), file=sys.stderr, flush=True)
    out: dict[str, Any] = {"args": {k: v for k, v in vars(args).items()}, "machine": machine(), "algos": {}}
    by = {a: sorted((r for r in runs if r["algo"] == a), key=lambda r: r["seed"]) for a in algos}
    for a, rs in by.items():
        s = [r["score"] for r in rs]
        out["algos"][a] = {
            "score_mean": round(float(np.mean(s)), 2),
            "score_sd": round(float(np.std(s, ddof=1)), 2) if len(s) > 1 else None,
            "scores": [round(x, 2) for x in s],
            "train_wall_s": round(float(np.mean([r["train_wall_s"] for r in rs])), 2),
            "train_cpu_s": round(float(np.mean([r["train_cpu_s"] for r in rs])), 2),
            "ms_per_step_cpu": round(float(np.mean([r["ms_per_step_cpu"] for r in rs])), 3),
            "ms_per_action": {
                k: round(float(np.mean([r["ms_per_action"][k] for r in rs])), 3) for k in rs[0]["ms_per_action"]
            },  # fmt: skip
        }
    out["paired"] = {
        f"{m} - {b}": paired([r["score"] for r in by[m]], [r["score"] for r in by[b]])
        for m in ("meanflow_ql", "fan")
        for b in ("iql", "td3_bc")
        if m in by and b in by
    }
    out["machine"]["load_end"] = [round(x, 2) for x in os.getloadavg()]
    print(json.dumps(out))
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1))
    return out


if __name__ == "__main__":
    main()
