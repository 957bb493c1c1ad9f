"""Duration-aware advantages (MLE-agent RL, Yang, He-Yueya & Liang 2025, arXiv:2509.01684) against the plain
advantage, in asynchronous RL on `experiment_world`, at equal samples.

Each episode is an `ExperimentEnv` episode driven through its tool interface: the policy (a softmax over the
three plans given the dataset size, zero-initialised: uniform) picks a plan, calls `run_experiment`, and submits
it. `--workers` episodes are in flight at once, each finishing after its simulated duration (event-driven: a heap
of finish times); the learner takes finished episodes in completion order, `--batch` at a time, and makes one
Adam step on -mean(A_i log pi(plan_i | size_i)) (a group = the batch's episodes of one dataset size;
`--one-group`: the whole batch); the freed worker starts its next episode with the updated policy. Fast plans
therefore finish, and enter batches, more often than their probability (the paper's frequency bias).
Arms, each for `--episodes` finished episodes from the same start and the same seeds:

- `plain`: `dr_grpo` (A = r - batch mean), reward with partial credit (`--partial-credit`);
- `duration`: `duration_aware` (A = w (r - b), w = duration / batch mean duration), same reward;
- `duration_outcome`: `duration_aware` with outcome reward only (partial credit 0): what partial credit adds.

Metrics of the final policy, exact under the world's model: `expected_outcome` (mean over the two sizes of
E[test score, 0 when no submission]), `p_deep_large` (probability of the slow, best plan on large data),
`regret` (best expected outcome minus the policy's), and `sim_hours` (simulated wall-clock of the run).

    python benchmarks/agent_duration.py --seeds 10

Prints one JSON line per seed and arm, then the paired differences with 95% t-intervals.
"""

from __future__ import annotations

import argparse
import heapq
import json
import random
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import load, paired_summary, print_machine  # noqa: E402

ARMS = {"plain": ("dr_grpo", True), "duration": ("duration_aware", True), "duration_outcome": ("duration_aware", False)}
"""arm -> (advantage estimator, partial credit on)."""


def play(env, plan: str, size: str, name: str) -> tuple[float, float]:
    """One episode through the tool interface; (reward, simulated seconds)."""
    from ascent.envs.experiment_world import ExperimentTask

    env.reset(ExperimentTask(name=name, size=size))
    call = json.dumps({"name": "run_experiment", "arguments": {"plan": plan}})
    first = env.step(f"<tool_call>{call}</tool_call>")
    last = env.step(f"<answer>{plan}</answer>")
    return last.reward, first.info["duration"] + last.info["duration"]


def final_metrics(logits: torch.Tensor) -> dict[str, float]:
    from ascent.envs.experiment_world import PLANS, SIZES, expected_reward

    probs = torch.softmax(logits, dim=-1)  # (sizes, plans)
    plans = list(PLANS)
    outcome = [[expected_reward(p, s, 0.0) for p in plans] for s in SIZES]
    exp = sum(float(probs[i] @ torch.tensor(outcome[i])) for i in range(len(SIZES))) / len(SIZES)
    best = sum(max(o) for o in outcome) / len(SIZES)
    return {
        "expected_outcome": round(exp, 4),
        "regret": round(best - exp, 4),
        "p_deep_large": round(float(probs[SIZES.index("large"), plans.index("deep")]), 4),
        "p_gbm_small": round(float(probs[SIZES.index("small"), plans.index("gbm")]), 4),
    }


def run_arm(arm: str, seed: int, args) -> dict:
    from ascent.algorithms import ADVANTAGES, AdvantageInput
    from ascent.algorithms.duration import DURATIONS_KEY
    from ascent.config.schema import AlgorithmConfig
    from ascent.envs.experiment_world import PLANS, SIZES, ExperimentEnv

    estimator, partial = ARMS[arm]
    adv_fn, cfg = ADVANTAGES.resolve(estimator), AlgorithmConfig()
    torch.manual_seed(seed)
    logits = torch.zeros(len(SIZES), len(PLANS), requires_grad=True)  # (sizes, plans): uniform start
    opt = torch.optim.Adam([logits], lr=args.lr)
    rng, env = random.Random(seed), ExperimentEnv(seed=seed, partial_credit=args.partial_credit if partial else 0.0)
    plans, heap, now, done, buf = list(PLANS), [], 0.0, 0, []

    def start(worker: int, t: float) -> None:
        s = rng.randrange(len(SIZES))
        with torch.no_grad():
            a = int(torch.multinomial(torch.softmax(logits[s], -1), 1, generator=gen))
        r, sec = play(env, plans[a], SIZES[s], f"comp{rng.randrange(10**6)}")
        heapq.heappush(heap, (t + sec, worker, s, a, r, sec))

    gen = torch.Generator().manual_seed(10_000 + seed)
    for w in range(args.workers):
        start(w, 0.0)
    while done < args.episodes:
        now, w, s, a, r, sec = heapq.heappop(heap)
        buf.append((s, a, r, sec))
        done += 1
        if len(buf) == args.batch:
            ss, aa, rr, dd = (torch.tensor(x) for x in zip(*buf))
            n = len(buf)
            inp = AdvantageInput(
                rr.float(),
                torch.ones(n, dtype=torch.bool),
                ss.long() * (not args.one_group),
                torch.ones(n, 1),
                {DURATIONS_KEY: dd.float()},
            )
            adv = adv_fn(inp, cfg)[:, 0]  # (B,)
            logp = torch.log_softmax(logits[ss], -1).gather(1, aa[:, None])[:, 0]  # (B,)
            loss = -(adv * logp).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            buf = []
        start(w, now)
    return {"seed": seed, "arm": arm, **final_metrics(logits.detach()), "sim_hours": round(now / 3600, 3)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--episodes", type=int, default=640, help="finished episodes consumed per arm (equal samples)")
    ap.add_argument("--batch", type=int, default=16, help="episodes per update, in completion order")
    ap.add_argument("--workers", type=int, default=16, help="episodes in flight at once")
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--partial-credit", type=float, default=0.2)
    ap.add_argument("--one-group", action="store_true", help="one baseline group per batch (both sizes together)")
    ap.add_argument("--json", default="", help="write rows and summary here too")
    args = ap.parse_args()
    torch.set_num_threads(1)
    print_machine()
    t0, rows = time.perf_counter(), []
    for seed in range(args.seeds):
        row = {arm: run_arm(arm, seed, args) for arm in ARMS}
        for rec in row.values():
            print(json.dumps(rec), flush=True)
        rows.append(row)
    keys = ("expected_outcome", "regret", "p_deep_large", "p_gbm_small", "sim_hours")
    summary = {
        "seeds": args.seeds,
        "episodes": args.episodes,
        "batch": args.batch,
        "workers": args.workers,
        "lr": args.lr,
        "partial_credit": args.partial_credit,
        "one_group": args.one_group,
        "duration_vs_plain": paired_summary(rows, keys, arm="duration", control="plain"),
        "partial_credit_vs_outcome": paired_summary(rows, keys, arm="duration", control="duration_outcome"),
        "wall_s": round(time.perf_counter() - t0, 1),
        "load": load(),
    }
    print(json.dumps(summary))
    if args.json:
        Path(args.json).write_text(json.dumps({"rows": rows, "summary": summary}, indent=1))


if __name__ == "__main__":
    main()
