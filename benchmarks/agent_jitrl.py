"""JitRL (Liu et al. 2026, arXiv:2601.18510) against the same frozen policy without its memory, on the search world.

One warm start (the `search-agent` recipe's, `train.steps=0`), frozen. Per seed, both arms see the same stream of
training questions (a seeded shuffle) and then the same held-out questions (worlds no training question comes
from), each decision picking among K turns sampled from the policy:

- `jitrl`: on the stream, the pick is resampled with weights exp(A / beta) and every finished episode is stored in
  the memory; on the held-out set the memory is frozen and the pick is argmax log pi + A / beta (`--heldout-mode
  sample`: resampled as on the stream);
- `static`: the same K samples with no memory: a uniform pick on the stream, the most likely one held out (`sample`:
  a uniform pick).

    ascent train search-agent name=jit-ws threads=1 train.steps=0 control.enabled=false
    python benchmarks/agent_jitrl.py --warmstart runs/jit-ws/warmstart --seeds 5

Prints one JSON line per seed and arm, then the paired differences (jitrl - static) with 95% t-intervals.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import ci95, frozen_agent, load, print_machine  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--warmstart", required=True, help="the warm-start weights folder (a run's warmstart/)")
    ap.add_argument("--recipe", default="search-agent")
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--stream", type=int, default=192, help="training questions played (and stored) per seed")
    ap.add_argument("--batch", type=int, default=16, help="episodes played at once (the memory grows between)")
    ap.add_argument("--eval", type=int, default=100, help="held-out questions")
    ap.add_argument("--candidates", type=int, default=4)
    ap.add_argument("--beta", type=float, default=0.25)
    ap.add_argument("--heldout-mode", default="greedy", choices=["greedy", "sample"], help="the pick held out")
    ap.add_argument("--set", nargs="*", default=[], help="JitRLParams overrides, key=value")
    ap.add_argument("--json", default="", help="write the summary here too")
    args = ap.parse_args()
    torch.set_num_threads(1)

    from dataclasses import replace

    from ascent.agents.jitrl import JitRL, JitRLParams

    print_machine()
    _, task, policy, engine, frozen_loop = frozen_agent(args.recipe, args.warmstart)
    loop = frozen_loop
    over = {
        k: json.loads(v) if v[:1].isdigit() or v in ("true", "false") else v
        for k, v in (s.split("=", 1) for s in args.set)
    }
    base = JitRLParams(candidates=args.candidates, beta=args.beta, **over)
    agent_task = task.agent
    evals = [agent_task.env_task(r) for r in task.eval[: args.eval]]
    rows: dict[str, list[dict]] = {"jitrl": [], "static": []}
    for seed in range(args.seeds):
        order = list(range(len(task.train)))
        random.Random(seed).shuffle(order)
        stream = [agent_task.env_task(task.train[i]) for i in order[: args.stream]]
        for arm in ("jitrl", "static") if seed % 2 == 0 else ("static", "jitrl"):
            t0, learn = time.perf_counter(), arm == "jitrl"
            agent = JitRL(engine, policy, agent_task.make_env, loop, base)
            g = torch.Generator().manual_seed(1000 + seed)
            played = []
            for b in range(0, len(stream), args.batch):
                played += agent.play(stream[b : b + args.batch], g, learn=learn)
            agent.params = replace(base, mode=args.heldout_mode)
            agent.memory.params = agent.params
            held = agent.play(evals, torch.Generator().manual_seed(2000 + seed), learn=False)
            half = played[len(played) // 2 :]
            rec = {
                "seed": seed,
                "arm": arm,
                "stream_success_2nd_half": round(sum(t.reward for t in half) / len(half), 4),
                "heldout_accuracy": round(sum(t.reward for t in held) / len(held), 4),
                "heldout_tool_calls": round(statistics.mean(t.info.get("num_tool_calls", 0) for t in held), 3),
                "memory_steps": len(agent.memory),
                "decisions_shifted": agent.shifted,
                "wall_s": round(time.perf_counter() - t0, 1),
                "load": load(),
            }
            rows[arm].append(rec)
            print(json.dumps(rec), flush=True)
    summary = {
        "stream": args.stream,
        "eval": len(evals),
        "heldout_mode": args.heldout_mode,
        "params": base.__dict__,
        "seeds": args.seeds,
    }
    for key in ("stream_success_2nd_half", "heldout_accuracy"):
        d = [a[key] - b[key] for a, b in zip(rows["jitrl"], rows["static"])]
        summary[key] = {
            "jitrl": [r[key] for r in rows["jitrl"]],
            "static": [r[key] for r in rows["static"]],
            "diff_mean": round(statistics.mean(d), 4),
            "diff_sd": round(statistics.stdev(d), 4) if len(d) > 1 else 0.0,
            "diff_ci95": ci95(d),
        }
    print(json.dumps(summary))
    if args.json:
        Path(args.json).write_text(json.dumps({"rows": rows, "summary": summary}, indent=1))


if __name__ == "__main__":
    main()
