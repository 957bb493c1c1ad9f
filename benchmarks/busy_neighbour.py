"""The learner update beside a busy neighbour: fixed threads against `learner.adaptive_threads`, one process.

Issue: on the 2-core machine a `nice -n 19` neighbour (a second run, a test suite) made the smollm2-arith
update take 59-242 s instead of ~15 s while rollouts slowed 1.5-2x. This script collects one rollout batch of
the recipe, then times `Learner.update` on it under three conditions, in rounds (quiet, neighbour, neighbour
adaptive, repeated, so that drift hits all three):

    quiet     no neighbour, all torch threads (the reference)
    fixed     a neighbour: a Python busy loop under `nice -n --nice` (one process, one core; default 19),
              all torch threads
    adaptive  the same neighbour, the learner's thread governor (`ascent.trainer.threads`) on; its state carries
              over between rounds as in a run (it learns once that the neighbour is there, then probes)

and prints one JSON line: the machine, the median update seconds of each condition, `fixed_over_quiet` and
`adaptive_over_quiet` (the issue's goal: adaptive <= 2.5x quiet), the governor's thread counts and waiting shares.
Run it on an otherwise idle machine (it prints the load before and after).

    .venv/bin/python benchmarks/busy_neighbour.py [--recipe smollm2-arith] [--prompts 2] [--rounds 4]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

NEIGHBOUR = "while True: pass"


def neighbour(niceness: int) -> subprocess.Popen:
    """A CPU-bound single-threaded process, like a second job started with `nice -n NICENESS`."""
    return subprocess.Popen(["nice", "-n", str(niceness), sys.executable, "-c", NEIGHBOUR])


def main(argv: list[str] | None = None) -> dict:
    from ascent.config import load_config
    from ascent.kernels.machine import describe
    from ascent.trainer.threads import ThreadGovernor

    sys.path.insert(0, str(ROOT / "benchmarks"))
    import step_vs_trl as svt

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--recipe", default="smollm2-arith")
    p.add_argument("--prompts", type=int, default=2, help="prompts per step (x the recipe's samples per prompt)")
    p.add_argument("--rounds", type=int, default=4, help="timed updates per condition")
    p.add_argument("--nice", type=int, default=19, help="the neighbour's niceness (0: as important as the learner)")
    p.add_argument("--threads", type=int, default=0, help="torch threads (0: one per CPU this process may use)")
    args = p.parse_args(argv)
    threads = args.threads or len(os.sched_getaffinity(0))
    torch.set_num_threads(threads)
    print(f"machine: {json.dumps(describe())}", file=sys.stderr, flush=True)
    with tempfile.TemporaryDirectory(prefix="bench-busy-") as tmp:
        cfg = load_config(
            args.recipe,
            [
                f"train.prompts_per_step={args.prompts}",
                "train.checkpoint_every=0",
                "logging.progress=false",
                f"threads={threads}",
                f"output_dir={tmp}",
            ],
        )
        trainer = svt.ascent_trainer(cfg, Path(tmp) / "run")[1]
        batch, scores, _ = trainer.collect()
        adv = trainer.advantages(batch, scores)
        learner = trainer.learner
        governor = ThreadGovernor(threads)

        def update() -> float:
            t = time.perf_counter()
            learner.update(batch, adv, scores.valid, rewards=scores.rewards)
            return time.perf_counter() - t

        learner.governor = None
        update()  # warm-up
        times: dict[str, list[float]] = {"quiet": [], "fixed": [], "adaptive": []}
        used, shares = [], []
        load_before = os.getloadavg()
        for _ in range(args.rounds):
            learner.governor = None
            times["quiet"].append(update())
            n = neighbour(args.nice)
            try:
                time.sleep(0.5)
                times["fixed"].append(update())
                learner.governor = governor
                times["adaptive"].append(update())
                used.append(governor.used)
                shares.append(round(governor.last_share, 3))
            finally:
                n.send_signal(signal.SIGKILL)
                n.wait()
            print(
                " ".join(f"{k} {v[-1]:.2f}s" for k, v in times.items()) + f" (threads {used[-1]})",
                file=sys.stderr,
                flush=True,
            )
    med = {k: statistics.median(v) for k, v in times.items()}
    out = {
        "machine": describe(),
        "recipe": args.recipe,
        "rows": len(batch),
        "threads": threads,
        "neighbour_nice": args.nice,
        "rounds": args.rounds,
        "update_s_median": {k: round(v, 3) for k, v in med.items()},
        "update_s": {k: [round(x, 3) for x in v] for k, v in times.items()},
        "fixed_over_quiet": round(med["fixed"] / med["quiet"], 3),
        "adaptive_over_quiet": round(med["adaptive"] / med["quiet"], 3),
        "adaptive_threads_used": used,
        "adaptive_wait_share": shares,
        "load_before": [round(x, 2) for x in load_before],
        "load_after": [round(x, 2) for x in os.getloadavg()],
    }
    print(json.dumps(out), flush=True)
    return out


if __name__ == "__main__":
    main()
